/**
 * Runs a host tool for the image builder and host preparation: argv only (no shell), bounded,
 * stdout as a Buffer; and installs a step's programs (src/setup/programs.mjs) before it runs them.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { aptInstallLine, missingPackages, missingPrograms, PROGRAMS, type ImageKind } from '../setup/programs.mjs';

export interface RunOptions {
  cwd?: string;
  input?: Buffer;
  /** Default 120000 ms. */
  timeoutMs?: number;
  /** Default 64 MiB. */
  maxBuffer?: number;
  /** Exit codes treated as success. Default [0]. */
  okCodes?: readonly number[];
}

/** stdout of `cmd args`; rejects with the command, its exit code and stderr otherwise. */
export function run(cmd: string, args: readonly string[], o: RunOptions = {}): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      {
        encoding: 'buffer',
        cwd: o.cwd,
        timeout: o.timeoutMs ?? 120_000,
        maxBuffer: o.maxBuffer ?? 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1;
        if ((o.okCodes ?? [0]).includes(code)) {
          resolve(stdout);
          return;
        }
        const why = err?.message.split('\n')[0] ?? `exit ${code}`;
        const notFound = (err as { code?: unknown } | null)?.code === 'ENOENT' ? `: ${installHint(cmd)}` : '';
        const errText = stderr.toString().trim().slice(-800);
        reject(new Error(`${cmd} ${args.slice(0, 6).join(' ')}: ${why}${notFound}${errText === '' ? '' : `: ${errText}`}`));
      },
    );
    // A tool that exits without reading all of its input must not become an uncaught EPIPE.
    child.stdin?.on('error', () => undefined);
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}

let aptListsReady: Promise<void> | undefined;

/**
 * Makes sure apt has package lists (a fresh Debian container has none, and then neither
 * `apt-get download` nor `apt-get install` finds anything): runs `apt-get update` once per
 * process when /var/lib/apt/lists holds no Packages file and we are root. Otherwise a no-op.
 */
export function ensureAptLists(): Promise<void> {
  aptListsReady ??= (async () => {
    const lists = await readdir('/var/lib/apt/lists').catch(() => [] as string[]);
    if (lists.some((f) => f.endsWith('_Packages') || f.endsWith('_Packages.lz4'))) return;
    if (process.getuid?.() !== 0) return;
    await run('apt-get', ['update', '-qq'], { timeoutMs: 300_000 });
  })();
  return aptListsReady;
}

/** What to do about a program that is not installed, from the program table. */
function installHint(cmd: string): string {
  const name = cmd.split('/').at(-1) ?? cmd;
  const p = PROGRAMS[name];
  if (p === undefined) return `${name} is not in src/setup/programs.mjs, so no step installs it`;
  return p.debianPackage === null
    ? `${name} is not installed (${p.why})`
    : `${name} is not installed; its step (${p.step}) installs it, or run: ${aptInstallLine([p.debianPackage])}`;
}

/**
 * Makes sure the programs of `step` (image: those `kind` needs) are installed before the step
 * spawns them: installs the missing packages with apt-get when root (and `install` is not false),
 * and otherwise rejects naming the programs and the one apt-get line that installs them.
 */
export async function ensureStepPrograms(
  step: 'image' | 'host',
  o: { kind?: ImageKind; install?: boolean; log?: (line: string) => void } = {},
): Promise<void> {
  const missing = missingPrograms(step, o.kind);
  const packages = missingPackages(step, o.kind);
  if (packages.length === 0) return;
  const what = missing.length > 0 ? `missing ${missing.join(', ')}` : `missing ${packages.join(', ')}`;
  if (process.getuid?.() !== 0 || o.install === false) throw new Error(`${what}; as root run: ${aptInstallLine(packages)}`);
  o.log?.(`installing ${packages.join(' ')} (${what})`);
  await ensureAptLists();
  await run('env', ['DEBIAN_FRONTEND=noninteractive', 'apt-get', 'install', '-y', '-q', '--no-install-recommends', ...packages], {
    timeoutMs: 900_000,
  });
  const still = missingPrograms(step, o.kind);
  if (still.length > 0) throw new Error(`still missing ${still.join(', ')} after installing ${packages.join(' ')}`);
}
