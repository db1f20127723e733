/**
 * A real PostgreSQL for tests: Debian's `postgresql` package (installed by the test step of
 * set-up), started in a fresh temporary folder on a loopback port and ended with the test.
 *
 * - The programs are found where the package puts them, /usr/lib/postgresql/<newest>/bin
 *   (src/setup/programs.mjs findProgram): a fresh machine has them on no PATH.
 * - The server listens on 127.0.0.1 only, its unix socket is in the temporary folder, and every
 *   loopback connection is trusted (initdb --auth=trust): the superuser is `postgres`, no password.
 * - PostgreSQL refuses to run as root, so a root test runs initdb and the server as the `postgres`
 *   system user (the package creates it) through setpriv, with the folder given to that user.
 * - The server dies with the test's process (setpriv --pdeathsig), so a test process that is
 *   killed leaves no server behind; folders such servers left are removed by the next start.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { findProgram } from '../../src/setup/programs.mjs';
import { serverPort } from './ports.js';
import { DEADLINE_MS, tail, waitFor } from './wait.js';

const kDirPrefix = 'sbx-pg-';
/** A folder without a server pid older than this is a start that died half-way, ms. */
const kStaleUnstartedMs = 3_600_000;
/** How long a fast shutdown may take before the server is killed, ms. */
const kStopGraceMs = 10_000;
/** Server output kept for error messages, characters. */
const kLogChars = 8_000;

export interface TestPostgres {
  /** A database made for the caller: postgres://postgres@127.0.0.1:<port>/sandboxd. */
  readonly url: string;
  readonly port: number;
  /** Creates another empty database and returns its URL (a fresh one per test keeps tests apart). */
  createDatabase(): Promise<string>;
  /** Ends the server (fast shutdown; killed after 10 s) and removes its folder. Idempotent. */
  stop(): Promise<void>;
}

/** The user the server runs as: `postgres` (uid, gid) when this process is root, else none (this user). */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const r = spawnSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' });
  const [, , uid, gid] = r.stdout.trim().split(':');
  if (r.status !== 0 || uid === undefined || gid === undefined)
    throw new Error("the tests run as root and PostgreSQL refuses root, but there is no 'postgres' user (install the postgresql package)");
  return { uid: Number(uid), gid: Number(gid) };
}

/** setpriv's argv before the program: the postgres user when root; always: die with this process. */
function asServerUser(user: { uid: number; gid: number } | undefined): string[] {
  const who = user === undefined ? [] : ['--reuid=postgres', '--regid=postgres', '--init-groups'];
  return ['--pdeathsig', 'KILL', ...who];
}

function pidAlive(pid: number): boolean {
  return existsSync(`/proc/${pid}`);
}

/** Removes folders of earlier runs whose server is gone (killed with its test process). */
function removeStaleFolders(): void {
  for (const name of readdirSync(tmpdir()).filter((n) => n.startsWith(kDirPrefix))) {
    const dir = join(tmpdir(), name);
    try {
      const pidFile = join(dir, 'data', 'postmaster.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
      const stale = pid === undefined ? Date.now() - statSync(dir).mtimeMs > kStaleUnstartedMs : !pidAlive(pid);
      if (stale) rmSync(dir, { recursive: true, force: true });
    } catch {
      // another run's folder, changing under us: leave it
    }
  }
}

function programPath(name: 'initdb' | 'postgres'): string {
  const path = findProgram(name);
  if (path === undefined)
    throw new Error(`${name} is not in /usr/lib/postgresql/<version>/bin: run \`node src/setup/ensure.mjs --tests\` (Debian's postgresql)`);
  return path;
}

function runToEnd(argv: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('setpriv', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: string): void => void (output = (output + d).slice(-kLogChars));
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** Starts a PostgreSQL of its own, with one database made; see the module comment. */
export async function startPostgres(): Promise<TestPostgres> {
  const initdb = programPath('initdb');
  const postgres = programPath('postgres');
  const user = serverUser();
  removeStaleFolders();
  const dir = mkdtempSync(join(tmpdir(), kDirPrefix));
  let server: ChildProcess | undefined;
  let log = '';
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const stop = async (): Promise<void> => {
    if (server !== undefined && exited === undefined) {
      const s = server;
      const gone = new Promise<void>((resolve) => s.once('exit', () => resolve()));
      s.kill('SIGINT'); // fast shutdown: ends the sessions, writes a checkpoint
      const timer = setTimeout(() => s.kill('SIGKILL'), kStopGraceMs);
      await gone;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (user !== undefined) chownSync(dir, user.uid, user.gid);
    const data = join(dir, 'data');
    const init = await runToEnd([
      ...asServerUser(user),
      initdb,
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync', // a test's data directory need not survive a power cut
    ]);
    if (init.code !== 0) throw new Error(`initdb exited with ${init.code}: ${tail(init.output)}`);

    const port = await serverPort();
    server = spawn(
      'setpriv',
      [...asServerUser(user), postgres, '-D', data, '-k', dir, '-h', '127.0.0.1', '-p', String(port), '-c', 'shared_buffers=16MB'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (d: string): void => void (log = (log + d).slice(-kLogChars));
    server.stdout?.setEncoding('utf8').on('data', keep);
    server.stderr?.setEncoding('utf8').on('data', keep);
    server.once('exit', (code, signal) => (exited = { code, signal }));
    server.once('error', (err) => {
      keep(`\n${err.message}`);
      exited ??= { code: null, signal: null };
    });

    const base = `postgres://postgres@127.0.0.1:${port}`;
    const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
      const c = new pg.Client({ connectionString: `${base}/postgres` });
      c.on('error', () => undefined); // a server that goes away is reported by the query
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    };
    const ready = await waitFor(
      `PostgreSQL to accept connections on 127.0.0.1:${port}`,
      async () => (exited !== undefined ? 'exited' : admin(() => Promise.resolve('ready' as const))),
      { deadlineMs: DEADLINE_MS.process, intervalMs: 100, lastState: () => tail(log) },
    );
    if (ready === 'exited') throw new Error(`PostgreSQL exited (${exited?.code ?? exited?.signal}): ${tail(log)}`);

    let made = 0;
    const createDatabase = async (): Promise<string> => {
      const name = `test_${++made}`;
      await admin((c) => c.query(`CREATE DATABASE ${name}`));
      return `${base}/${name}`;
    };
    const url = `${base}/sandboxd`;
    await admin((c) => c.query('CREATE DATABASE sandboxd'));
    return { url, port, createDatabase, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
