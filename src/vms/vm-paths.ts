/**
 * Where a VM's files live on the sandboxd host: everything under `<SVC_STATE_DIR>/vms/<name>/`.
 *
 *   certs/          the agent's mTLS bundle (ca.pem, agent.pem, agent-key.pem 0600); removed on delete
 *   work/           the local agent's working directory (test driver)
 *   agent.log       the local agent's stdout and stderr (rotated once to agent.log.1 past 16 MiB)
 *   agent.pid       pid of the running local agent (to reap an orphan after a sandboxd crash)
 *   tmux/           the local VM's private tmux socket directory, TMUX_TMPDIR (local-vm-processes.ts)
 *   disk.qcow2      qemu: the root disk, a qcow2 overlay on the base image
 *   seed.iso        qemu: the cloud-init NoCloud seed (ISO 9660, label cidata)
 *   cloud-init/     qemu: user-data, meta-data, network-config as written into the seed
 *   console.log     qemu: the serial console
 *   fwcfg/          qemu, built image: the agent's settings and mTLS files QEMU passes by fw_cfg; removed on delete
 *   bootstrap/material.json  staged bootstrap material (0600, dir 0700; bootstrapMaterialPath): the
 *                   agent enrolls with its single-use token instead of a pre-issued certificate
 *
 * delete_disk=true removes the whole directory; without it only certs/ goes.
 */
import { join, resolve, sep } from 'node:path';

export interface VmPaths {
  readonly dir: string;
  readonly certs: string;
  readonly work: string;
  readonly agentLog: string;
  readonly agentPid: string;
  readonly disk: string;
  readonly seed: string;
  readonly cloudInit: string;
  readonly console: string;
  readonly fwCfg: string;
}

/** Names reaching here were validated (^agent-[a-z0-9-]+$ or an existing libvirt name); this guards against path tricks anyway. */
export function vmPaths(stateDir: string, vmName: string): VmPaths {
  if (!/^[A-Za-z0-9_.+-]{1,64}$/.test(vmName) || vmName === '.' || vmName === '..') throw new Error(`unsafe VM name for a path: ${vmName}`);
  const dir = join(resolve(stateDir), 'vms', vmName);
  return {
    dir,
    certs: join(dir, 'certs'),
    work: join(dir, 'work'),
    agentLog: join(dir, 'agent.log'),
    agentPid: join(dir, 'agent.pid'),
    disk: join(dir, 'disk.qcow2'),
    seed: join(dir, 'seed.iso'),
    cloudInit: join(dir, 'cloud-init'),
    console: join(dir, 'console.log'),
    fwCfg: join(dir, 'fwcfg'),
  };
}

/** True when `path` is inside `dir` (never deletes files outside a VM's own directory). */
export function isInside(dir: string, path: string): boolean {
  const d = resolve(dir) + sep;
  return resolve(path).startsWith(d);
}

/**
 * Where bootstrap material for the VM whose directory is `vmDir` is staged (BootstrapService.stage
 * `file`). A local agent of a VM with this file and no certificate for its instance id is started
 * with --bootstrap-token-file instead of a pre-issued certificate (provisioner.ts agentUp).
 */
export function bootstrapMaterialPath(vmDir: string): string {
  return join(vmDir, 'bootstrap', 'material.json');
}
