/**
 * Applying what a VM's loadout and startup profile give it, where its agent runs (README "Startup
 * profiles and loadouts"). Shared by the server's provisioner (a test-driver VM: the host plays the
 * guest) and the guest agent (`--loadout-file`: a VM booted from a built image, which gets the
 * material by fw_cfg), so src/core holds it.
 *
 * - files are written under the agent's work directory, mode as given, never through a symbolic
 *   link (each existing parent is checked with lstat, the file is opened with O_NOFOLLOW): a work
 *   directory that outlives its VM, or commands of the VM itself, must not redirect a write out
 *   of it;
 * - packages are never installed here (no apt-get): each package is checked installed (dpkg's
 *   status file) and each tool found on PATH, and the outcome goes to
 *   `<work>/.sandboxd/loadout-report.json`. A missing one does not fail anything;
 * - the environment is the caller's to hand on (the local agent's process environment, the guest
 *   agent's own, which its commands inherit).
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, lstat, mkdir, open, readFile, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';

export interface LoadoutFile {
  /** Relative to the agent's work directory. */
  readonly path: string;
  readonly content: string;
  /** Permission bits, 0o000-0o777. */
  readonly mode: number;
}

/** What a VM gets: the part of a loadout the provisioner applies. */
export interface LoadoutSpec {
  readonly packages: readonly string[];
  readonly tools: readonly string[];
  readonly environment: Readonly<Record<string, string>>;
  readonly files: readonly LoadoutFile[];
}

/** What a VM gets at provisioning: the loadout (if any) with the profile's agent env over its environment. */
export interface ProvisioningMaterial extends LoadoutSpec {
  /** The loadout's name, null when only a profile's env is applied. */
  readonly loadout: string | null;
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

/** Where a guest agent records which material it applied, relative to its work directory. */
export const APPLIED_MARKER_PATH = '.sandboxd/loadout-applied';

/**
 * Reads the material a guest agent was given (`--loadout-file`) and applies it to `workDir` once:
 * the files are written when the material's SHA-256 differs from the one recorded in the marker
 * (the first start, or material that changed), so an agent restart does not overwrite what the
 * VM's commands changed since. Returns the material's environment for the agent to take on, or
 * null when the file does not exist or is empty (no loadout). Throws on a file that is not
 * material.
 */
export async function applyMaterialFile(
  file: string,
  workDir: string,
  opts: { pathEnv: string; dpkgStatusFile?: string },
): Promise<{ material: ProvisioningMaterial; applied: LocalApplyReport | null } | null> {
  const text = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (text === '') return null;
  const material = parseMaterial(text);
  const sha = createHash('sha256').update(text).digest('hex');
  const marker = join(workDir, APPLIED_MARKER_PATH);
  if ((await readFile(marker, 'utf8').catch(() => '')).trim() === sha) return { material, applied: null };
  const applied = await applyLocally(material, workDir, opts);
  await writeFile(marker, `${sha}\n`, { mode: 0o644 });
  return { material, applied };
}

const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** The material's JSON, checked for shape (the server validated it; a guest checks what it acts on). */
function parseMaterial(text: string): ProvisioningMaterial {
  const m = JSON.parse(text) as Record<string, unknown>;
  const env = m['environment'];
  const files = m['files'];
  if (
    typeof m !== 'object' ||
    m === null ||
    !(m['loadout'] === null || typeof m['loadout'] === 'string') ||
    !isStringList(m['packages']) ||
    !isStringList(m['tools']) ||
    typeof env !== 'object' ||
    env === null ||
    !Object.values(env).every((v) => typeof v === 'string') ||
    !Array.isArray(files) ||
    !files.every(
      (f: unknown) =>
        typeof f === 'object' &&
        f !== null &&
        typeof (f as LoadoutFile).path === 'string' &&
        typeof (f as LoadoutFile).content === 'string' &&
        Number.isInteger((f as LoadoutFile).mode),
    )
  )
    throw new Error('the loadout file is not provisioning material ({loadout, packages, tools, environment, files})');
  for (const f of files as LoadoutFile[]) {
    if (f.path.startsWith('/') || f.path.split('/').some((s) => s === '' || s === '.' || s === '..'))
      throw new Error(`the loadout file names a path outside the work directory: ${f.path.slice(0, 64)}`);
  }
  return m as unknown as ProvisioningMaterial;
}
