/**
 * Loaded (`--import`) into every test-file process by test/run.ts. It gives the file a place of
 * its own and watches that the file ends when its tests do:
 *
 * - HOME, TMUX_TMPDIR and the XDG folders point into a fresh temporary folder, so no user's
 *   dotfiles reach the shells a test starts (a slow ~/.bashrc once made every session test time
 *   out) and two files running side by side never share a tmux server.
 * - SANDBOXD_TEST_FILE names the file; every process the file starts inherits it, so the runner's
 *   leftover check can say which file left a process behind.
 * - When the file's tests are done, a watchdog (unref'd, so it never keeps the process alive) waits
 *   `kOutliveMs`; if the process is still there, something holds it open: the watchdog names the
 *   open handles and exits with status 1, which fails the file.
 *
 * Only test-file processes are touched; the runner itself and the node programs the tests start
 * load this module too, through the inherited execArgv, and it does nothing there.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { repoRoot } from './paths.js';

/** How long a file may stay alive after its last test and root hooks finished, ms. */
const kOutliveMs = 15_000;

function describeHandle(h: unknown): string {
  const name = (h as { constructor?: { name?: string } } | null)?.constructor?.name ?? typeof h;
  const o = h as Record<string, unknown>;
  if (typeof o['spawnargs'] === 'object') return `${name} pid ${String(o['pid'])}: ${(o['spawnargs'] as string[]).join(' ').slice(0, 200)}`;
  if (typeof o['remotePort'] === 'number')
    return `${name} ${String(o['localAddress'])}:${String(o['localPort'])} -> ${String(o['remoteAddress'])}:${String(o['remotePort'])}`;
  if (typeof o['address'] === 'function') {
    try {
      return `${name} listening on ${JSON.stringify((o['address'] as () => unknown).call(h))}`;
    } catch {
      return name;
    }
  }
  if (typeof o['fd'] === 'number') return `${name} fd ${String(o['fd'])}`;
  return name;
}

/** What keeps this process alive, one line per handle plus node's summary of resources. */
export function openHandlesReport(): string {
  const stdio = new Set<unknown>([process.stdin, process.stdout, process.stderr]);
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().filter((h) => !stdio.has(h));
  const lines = handles.map((h) => `  ${describeHandle(h)}`);
  return `${lines.join('\n')}\n  resources: ${process.getActiveResourcesInfo().join(', ')}`;
}

// Children of a test file inherit both NODE_TEST_CONTEXT and, when they reuse process.execArgv,
// this module: only the test file's own process (argv[1] a *.test.js) is set up.
if (process.env['NODE_TEST_CONTEXT'] !== undefined && /\.test\.js$/.test(process.argv[1] ?? '')) {
  const { after } = await import('node:test');
  const file = relative(repoRoot, process.argv[1] ?? 'unknown');
  const home = mkdtempSync(join(tmpdir(), 'sbx-test-home-'));
  const tmux = join(home, 'tmux');
  mkdirSync(tmux, { mode: 0o700 });
  process.env['HOME'] = home;
  process.env['TMUX_TMPDIR'] = tmux;
  process.env['SANDBOXD_TEST_FILE'] = file;
  for (const k of ['XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME', 'XDG_RUNTIME_DIR', 'TMUX'])
    delete process.env[k];
  process.on('exit', () => rmSync(home, { recursive: true, force: true }));

  after(() => {
    setTimeout(() => {
      process.stderr.write(
        `${file}: still running ${kOutliveMs / 1000} s after its tests finished; open handles:\n${openHandlesReport()}\n`,
      );
      process.exit(1);
    }, kOutliveMs).unref();
  });
}
