/**
 * The VM `agentshare` flag (spec 4.3 create field; default true): the agent's inbox and outbox,
 * shared into the VM read-write.
 *
 *   inbox   <storage root>/inbox/<agent_id>    what operators put there (scoped API, reviewed)
 *   outbox  <storage root>/outbox/<agent_id>   what the agent leaves for operators
 *
 * A VM's agent id is its name, so its outbox is `outbox/<vm name>` (VM names are `agent-…`, task
 * ids `task-<uuid>`: the two never collide; a task's own outbox is brought into the guest by the
 * task, src/tasks/guest-workspace.ts).
 *
 * - Local agents (the test driver): `<work dir>/inbox` and `<work dir>/outbox` are symlinks to
 *   the two directories (sandboxd made them; the agent runs as sandboxd's user).
 * - qemu guests: two virtio-9p shares (`accessmode='mapped'`: the guest's owners and modes are
 *   kept in xattrs, not applied to host files, so the guest cannot plant a setuid file or a
 *   device on the host) with tags `sbx-inbox` and `sbx-outbox`; the guest mounts them with
 *   `mount -t 9p -o trans=virtio,version=9p2000.L sbx-inbox <dir>` (the minimal image's /init at
 *   `<work dir>/inbox` and `outbox`, a cloud-init seed at `workspace/…`). The two directories
 *   belong to QEMU's user, which writes there for the guest.
 * Whatever the guest puts there (symlinks out, swapped directories) the server's own access goes
 * through area-fs.ts, which never follows a symlink.
 */
import { chmod, chown, mkdir, readlink, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';

/** 9p mount tags of the two shares. */
export const INBOX_TAG = 'sbx-inbox';
export const OUTBOX_TAG = 'sbx-outbox';

export interface AgentshareDirs {
  readonly inbox: string;
  readonly outbox: string;
}

/**
 * The host directories of an agent's share (made when missing, mode 0775). `owner`: the user QEMU
 * runs as (libvirt-qemu), who must write there for the guest: the two directories become its,
 * mode 2775 (setgid: what the server makes inside keeps the group, so QEMU can add to it).
 */
export async function agentshareDirs(
  storageDir: string,
  agentId: string,
  owner?: { uid: number; gid: number } | null,
): Promise<AgentshareDirs> {
  const dirs = { inbox: join(storageDir, 'inbox', agentId), outbox: join(storageDir, 'outbox', agentId) };
  for (const d of [dirs.inbox, dirs.outbox]) {
    await mkdir(d, { recursive: true, mode: 0o775 });
    if (owner !== undefined && owner !== null) {
      await chown(d, owner.uid, owner.gid);
      await chmod(d, 0o2775);
    }
  }
  return dirs;
}

/** The qemu domain's shares for an agent (see QemuDomainSpec.shares). */
export function agentshareQemuShares(dirs: AgentshareDirs): { hostPath: string; tag: string }[] {
  return [
    { hostPath: dirs.inbox, tag: INBOX_TAG },
    { hostPath: dirs.outbox, tag: OUTBOX_TAG },
  ];
}

/** `<workDir>/inbox` and `<workDir>/outbox` as symlinks to the share (a local agent's view); replaces stale links. */
export async function linkAgentshare(workDir: string, dirs: AgentshareDirs): Promise<void> {
  for (const [name, target] of [
    ['inbox', dirs.inbox],
    ['outbox', dirs.outbox],
  ] as const) {
    const link = join(workDir, name);
    const current = await readlink(link).catch(() => null);
    if (current === target) continue;
    await rm(link, { recursive: false, force: true }).catch(() => undefined);
    await symlink(target, link, 'dir');
  }
}
