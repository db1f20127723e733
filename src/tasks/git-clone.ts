/**
 * The staging step of a task: a real, shallow `git clone` of the manifest's repository.
 *
 *   git -c protocol.ext.allow=never clone --depth 1 [--branch B] -- URL DIR
 *
 * - spawned without a shell (argv as given; `--` ends the options, so a URL can never be read as
 *   one), in its own process group (detached), so a timeout or a cancel kills git and every
 *   helper it started (ssh, git-remote-https);
 * - GIT_TERMINAL_PROMPT=0 (set through env(1)): a repository that needs credentials fails at
 *   once instead of waiting for a password nobody will type (the new session has no terminal
 *   either);
 * - an absolute path is cloned as `file://PATH`: git ignores --depth for plain local paths;
 * - bounded by `timeoutMs`; stdout and stderr are kept (the last {@link GIT_OUTPUT_KEEP_BYTES})
 *   so a failure says what git said.
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { SvcError } from '../core/errors.js';

/** How much of git's output a failure message quotes (bytes, the tail). */
export const GIT_OUTPUT_KEEP_BYTES = 4096;
/** Default bound of one clone (5 minutes). */
export const DEFAULT_CLONE_TIMEOUT_MS = 5 * 60_000;

export interface CloneOptions {
  readonly url: string;
  /** null: the remote's default branch. */
  readonly branch: string | null;
  /** The workspace to create; must not exist yet (git refuses a non-empty directory). */
  readonly dir: string;
  /** Default {@link DEFAULT_CLONE_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Default `git` (found on PATH). */
  readonly gitPath?: string;
}

export interface CloneResult {
  /** The commit checked out (`git rev-parse HEAD`), or null when it could not be read. */
  readonly commit: string | null;
  readonly durationMs: number;
}

/** The URL git is given: absolute paths become file:// URLs so the clone is really shallow. */
export function cloneSource(url: string): string {
  return url.startsWith('/') ? `file://${url}` : url;
}

/** The argv after `git` (exported for tests and for the state message). */
export function cloneArgs(url: string, branch: string | null, dir: string): string[] {
  return [
    '-c',
    'protocol.ext.allow=never',
    'clone',
    '--depth',
    '1',
    ...(branch !== null ? ['--branch', branch] : []),
    '--',
    cloneSource(url),
    dir,
  ];
}

/**
 * Clones the repository. Rejects with SvcError `server.unavailable` carrying git's message when git
 * fails, `server.timeout` when it runs past timeoutMs, or the signal's reason when aborted;
 * the partial workspace is removed in every failure case.
 */
export async function gitClone(opts: CloneOptions): Promise<CloneResult> {
  const t0 = performance.now();
  const git = opts.gitPath ?? 'git';
  const timeoutMs = opts.timeoutMs ?? DEFAULT_CLONE_TIMEOUT_MS;
  try {
    await runGit(git, cloneArgs(opts.url, opts.branch, opts.dir), {
      timeoutMs,
      ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
      what: 'git clone',
    });
  } catch (err) {
    await rm(opts.dir, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
  const head = await runGit(git, ['-C', opts.dir, 'rev-parse', 'HEAD'], { timeoutMs: 10_000, what: 'git rev-parse' }).catch(() => null);
  const commit = head === null ? null : head.trim().slice(0, 64) || null;
  return { commit, durationMs: Math.round(performance.now() - t0) };
}

/** Runs git; resolves with its stdout (the kept tail), rejects as {@link gitClone} documents. */
function runGit(git: string, args: string[], o: { timeoutMs: number; signal?: AbortSignal; what: string }): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    if (o.signal?.aborted === true) {
      reject(o.signal.reason as Error);
      return;
    }
    // git inherits the server's environment (PATH, HOME, proxy settings) like every child the
    // server starts; env(1) adds the two variables that turn interactive prompting off, so the
    // server never has to read its own environment (config is parsed once, in src/config).
    const child = spawn('env', ['GIT_TERMINAL_PROMPT=0', 'GCM_INTERACTIVE=never', git, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      shell: false,
    });
    const out = new TailBuffer(GIT_OUTPUT_KEEP_BYTES);
    const err = new TailBuffer(GIT_OUTPUT_KEEP_BYTES);
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    let failure: Error | undefined;
    const kill = (why: Error): void => {
      failure ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(
      () => kill(new SvcError('server.timeout', `${o.what} did not finish within ${Math.round(o.timeoutMs / 1000)} s; it was killed`)),
      o.timeoutMs,
    );
    timer.unref();
    const onAbort = (): void => kill(o.signal?.reason instanceof Error ? o.signal.reason : new Error(`${o.what} aborted`));
    o.signal?.addEventListener('abort', onAbort, { once: true });
    const done = (): void => {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
    };
    child.once('error', (e) => {
      done();
      reject(new SvcError('server.unavailable', `${o.what} could not start: ${e.message}`));
    });
    child.once('close', (code, signal) => {
      done();
      if (failure !== undefined) reject(failure);
      else if (code === 0) resolve(out.text());
      else {
        const said = err.text().trim() || out.text().trim() || '(no output)';
        reject(
          new SvcError(
            'server.unavailable',
            `${o.what} failed (${code !== null ? `exit code ${code}` : `signal ${signal ?? '?'}`}): ${said}`,
          ),
        );
      }
    });
  });
}

/** The last `maxBytes` of a stream, without concatenating per chunk. */
class TailBuffer {
  readonly #max: number;
  #chunks: Buffer[] = [];
  #bytes = 0;
  #dropped = false;

  constructor(maxBytes: number) {
    this.#max = maxBytes;
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    while (this.#bytes - (this.#chunks[0]?.length ?? 0) >= this.#max && this.#chunks.length > 1) {
      this.#bytes -= (this.#chunks.shift() as Buffer).length;
      this.#dropped = true;
    }
  }

  text(): string {
    const all = Buffer.concat(this.#chunks, this.#bytes);
    const tail = all.length > this.#max ? all.subarray(all.length - this.#max) : all;
    return (this.#dropped || all.length > this.#max ? '…' : '') + tail.toString('utf8');
  }
}
