/**
 * Applying a loadout at provisioning (README "Startup profiles and loadouts").
 *
 * What a VM gets is its loadout's spec with its startup profile's `agent.env` laid over the
 * loadout's `environment` (provisioningMaterial). The provisioner keeps a copy in
 * `<vm>/loadout.json` (a later change of the profile does not change a VM that exists; an agent
 * restart or a deploy-agent uses the copy).
 *
 * Local agents (test-driver VMs; the host plays the guest):
 * - files are written under the VM's work directory (the agent's cwd), mode as given, never
 *   through a symbolic link (each existing parent is checked with lstat, the file is opened with
 *   O_NOFOLLOW): a name reused after a delete without delete_disk keeps the old work directory,
 *   and whatever the old VM's commands left there must not redirect a write out of it;
 * - the environment is added to the agent process's, which its commands inherit;
 * - packages cannot be installed on the host, and never are (no apt-get): each package is
 *   checked installed (dpkg's status file) and each tool found on PATH, and the outcome goes to
 *   `<work>/.sandboxd/loadout-report.json` and the log. A missing one does not fail the create.
 * qemu guests (cloud-init seed, src/vms/cloud-init.ts): files by write_files under
 * /home/agent/workspace, packages by cloud-init's `packages:` (apt in the guest), the environment
 * as the agent unit's EnvironmentFile; tools are expected to come with the packages or the image.
 */
import { constants } from 'node:fs';
import { access, lstat, mkdir, open, readFile, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import type { LoadoutFile, LoadoutSpec } from './loadout-record.js';

/** What a VM gets at provisioning: the loadout (if any) with the profile's agent env over its environment. */
export interface ProvisioningMaterial extends LoadoutSpec {
  /** The loadout's name, null when only a profile's env is applied. */
  readonly loadout: string | null;
}

/** The loadout spec plus the profile env; null when there is nothing to apply. */
export function provisioningMaterial(
  loadout: (LoadoutSpec & { readonly name: string }) | null,
  profileEnv: Readonly<Record<string, string>>,
): ProvisioningMaterial | null {
  if (loadout === null && Object.keys(profileEnv).length === 0) return null;
  return {
    loadout: loadout?.name ?? null,
    packages: loadout?.packages ?? [],
    tools: loadout?.tools ?? [],
    files: loadout?.files ?? [],
    environment: { ...(loadout?.environment ?? {}), ...profileEnv },
  };
}

export interface LocalApplyReport {
  readonly loadout: string | null;
  readonly files_written: number;
  readonly environment: readonly string[];
  readonly packages: { readonly present: readonly string[]; readonly missing: readonly string[] };
  readonly tools: { readonly present: readonly string[]; readonly missing: readonly string[] };
}

/** Where a local VM's report goes, relative to its work directory. */
export const LOCAL_REPORT_PATH = '.sandboxd/loadout-report.json';

/** Writes one file under `root` without following a symbolic link anywhere below `root`. */
async function writeInside(root: string, f: LoadoutFile): Promise<void> {
  const segments = f.path.split('/');
  let at = root;
  for (const s of segments.slice(0, -1)) {
    at = join(at, s);
    const st = await lstat(at).catch(() => null);
    if (st === null) await mkdir(at, { mode: 0o755 });
    else if (!st.isDirectory()) throw new Error(`${f.path}: ${at.slice(root.length + 1)} exists and is not a directory`);
  }
  const target = join(root, f.path);
  const handle = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, f.mode);
  try {
    await handle.writeFile(f.content);
    await handle.chmod(f.mode);
  } finally {
    await handle.close();
  }
}

async function onPath(tool: string, pathEnv: string): Promise<boolean> {
  for (const dir of pathEnv.split(delimiter)) {
    if (dir === '') continue;
    if (
      await access(join(dir, tool), constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return true;
  }
  return false;
}

/** Installed package names from dpkg's status file (none when there is no dpkg). */
async function installedPackages(statusFile: string): Promise<Set<string>> {
  const text = await readFile(statusFile, 'utf8').catch(() => '');
  const out = new Set<string>();
  for (const stanza of text.split('\n\n')) {
    const name = /^Package: (\S+)$/m.exec(stanza)?.[1];
    if (name !== undefined && /^Status: .* installed$/m.test(stanza)) out.add(name);
  }
  return out;
}

/** Applies `m` for a local agent whose work directory is `workDir` (see the file comment). */
export async function applyLocally(
  m: ProvisioningMaterial,
  workDir: string,
  opts: { pathEnv: string; dpkgStatusFile?: string },
): Promise<LocalApplyReport> {
  await mkdir(workDir, { recursive: true, mode: 0o700 });
  for (const f of m.files) await writeInside(workDir, f);
  const installed = m.packages.length === 0 ? new Set<string>() : await installedPackages(opts.dpkgStatusFile ?? '/var/lib/dpkg/status');
  const tools = await Promise.all(m.tools.map(async (t) => [t, await onPath(t, opts.pathEnv)] as const));
  const report: LocalApplyReport = {
    loadout: m.loadout,
    files_written: m.files.length,
    environment: Object.keys(m.environment),
    packages: { present: m.packages.filter((p) => installed.has(p)), missing: m.packages.filter((p) => !installed.has(p)) },
    tools: { present: tools.filter(([, ok]) => ok).map(([t]) => t), missing: tools.filter(([, ok]) => !ok).map(([t]) => t) },
  };
  const reportPath = join(workDir, LOCAL_REPORT_PATH);
  await mkdir(dirname(reportPath), { recursive: true, mode: 0o700 });
  await writeFile(reportPath, `${JSON.stringify(report, null, 2)}\n`, { mode: 0o644 });
  return report;
}

/** One line of a systemd EnvironmentFile: the value double-quoted, with \ and " escaped (systemd expands no variables there). */
export function environmentFileLine(key: string, value: string): string {
  return `${key}="${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
