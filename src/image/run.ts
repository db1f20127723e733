/** Runs a host tool for the image builder and host preparation: argv only (no shell), bounded, stdout as a Buffer. */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';

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
    const child = execFile(cmd, args, {
      encoding: 'buffer', cwd: o.cwd, timeout: o.timeoutMs ?? 120_000, maxBuffer: o.maxBuffer ?? 64 * 1024 * 1024,
    }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1;
      if ((o.okCodes ?? [0]).includes(code)) {
        resolve(stdout);
        return;
      }
      const why = err?.message.split('\n')[0] ?? `exit ${code}`;
      reject(new Error(`${cmd} ${args.slice(0, 6).join(' ')}: ${why}: ${stderr.toString().trim().slice(-800)}`));
    });
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
