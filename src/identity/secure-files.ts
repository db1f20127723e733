/**
 * File handling for key material: private directories, atomic writes with explicit modes,
 * permission checks, and a lock file so that two processes starting at once (the server and a
 * `sandboxd certs` command) never create two different CAs in the same directory.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { SvcError } from '../core/errors.js';

/** Mode of private keys. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of certificates (public). */
export const PUBLIC_FILE_MODE = 0o644;
/** Mode of directories holding private keys. */
export const PRIVATE_DIR_MODE = 0o700;

function modeText(mode: number): string {
  return (mode & 0o777).toString(8).padStart(4, '0');
}

/**
 * Creates `dir` (and parents) mode 0700, or tightens an existing directory we own to 0700:
 * a key directory others can list or write defeats the 0600 keys inside it.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const st = await stat(dir);
  if (!st.isDirectory()) throw new SvcError('server.internal', `${dir} is not a directory`);
  if ((st.mode & 0o077) !== 0 && st.uid === process.getuid?.()) await chmod(dir, PRIVATE_DIR_MODE);
}

/**
 * Writes `data` to `path` atomically (temp file in the same directory, fsync, rename) with
 * `mode` set explicitly, so the umask cannot widen it and readers never see half a key.
 */
export async function writeFileAtomic(path: string, data: string, mode: number): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.chmod(mode);
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Rejects when `path` (a private key) is accessible by group or others. */
export async function assertPrivateFile(path: string): Promise<void> {
  const st = await stat(path);
  if ((st.mode & 0o077) !== 0) {
    throw new SvcError(
      'server.internal',
      `refusing to use ${path}: a private key must not be accessible by group or others (mode ${modeText(st.mode)}); run: chmod 600 ${path}`,
      { path },
    );
  }
}

/** True when `path` exists (any type). */
export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock is stale when its holder is gone (same host) or it is older than `staleMs`. */
async function isStale(lockPath: string, staleMs: number): Promise<boolean> {
  try {
    const [st, text] = await Promise.all([stat(lockPath), readFile(lockPath, 'utf8')]);
    const pid = Number.parseInt(text, 10);
    if (Number.isInteger(pid) && pid > 0 && !pidAlive(pid)) return true;
    return Date.now() - st.mtimeMs > staleMs;
  } catch {
    return false; // vanished or unreadable: just retry
  }
}

/**
 * Runs `fn` holding the lock file `lockPath` (O_EXCL create, holder pid inside). Waits up to
 * `timeoutMs` (default 15 s) for another holder; takes over a lock whose holder died or that is
 * older than `staleMs` (default 30 s).
 */
export async function withLockFile<T>(
  lockPath: string,
  fn: () => Promise<T>,
  opts: { timeoutMs?: number; staleMs?: number } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const staleMs = opts.staleMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fh = await open(lockPath, 'wx', PRIVATE_FILE_MODE);
      try {
        await fh.writeFile(String(process.pid));
      } finally {
        await fh.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (await isStale(lockPath, staleMs)) {
        await rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new SvcError(
          'server.timeout',
          `timed out after ${timeoutMs} ms waiting for ${lockPath}; remove it if no sandboxd process is running`,
          { path: lockPath },
        );
      }
      // Not unref'd on purpose: the caller is awaiting this wait (a CLI has nothing else alive).
      await sleep(20 + Math.floor(Math.random() * 30));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lockPath, { force: true });
  }
}
