import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { buildAgentBundle, ensureAgentBundle } from '../../../src/image/agent-bundle.js';
import { BUNDLE_FILE, CODE_CACHE_FILE } from '../../../src/image/agent-loader.js';
import { installAgent } from '../../../src/image/image-files.js';

const agentTree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const packageRoot = resolve(agentTree, '..');

/** Runs `node <args>` and returns stdout, stderr and the exit code. */
function node(args: string[], env: Record<string, string> = {}): { stdout: string; stderr: string; code: number } {
  try {
    const stdout = execFileSync(process.execPath, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    return { stdout, stderr: '', code: 0 };
  } catch (err) {
    const e = err as { stdout: string; stderr: string; status: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.status };
  }
}

void describe('the agent bundle guest images ship', () => {
  let dir: string;
  let agent: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-agent-bundle-'));
    await buildAgentBundle({ agentTree, packageRoot, outDir: join(dir, 'bundle') });
    agent = join(dir, 'image-agent');
    await installAgent(agent, join(dir, 'bundle'), process.execPath);
    // Preloaded by the node-pty check: lists every module the process requires.
    await writeFile(
      join(dir, 'hook.cjs'),
      [
        `const Module = require('node:module'); const load = Module._load; const seen = [];`,
        `Module._load = function (r, ...a) { seen.push(r); return load.call(this, r, ...a); };`,
        `process.on('exit', () => process.stderr.write('loaded: ' + seen.join(',') + '\\n'));`,
      ].join('\n'),
    );
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  void test('is one JavaScript file plus the lazily loaded packages, with a code cache made by the image node', async () => {
    assert.ok(existsSync(join(agent, 'src', 'bin', BUNDLE_FILE)));
    assert.ok(existsSync(join(agent, 'src', 'bin', CODE_CACHE_FILE)));
    assert.ok(existsSync(join(agent, 'node_modules', 'node-pty', 'build', 'Release', 'pty.node')));
    // No package the bundle already holds is shipped a second time.
    assert.ok(!existsSync(join(agent, 'node_modules', '@grpc')) && !existsSync(join(agent, 'node_modules', 'pino')));
    const pkg = JSON.parse(await readFile(join(agent, 'package.json'), 'utf8')) as { version: string };
    const root = JSON.parse(await readFile(join(packageRoot, 'package.json'), 'utf8')) as { version: string };
    assert.equal(pkg.version, root.version);
  });

  void test('runs: --help prints the usage, V8 accepts the cache, and node-pty is not loaded at start', () => {
    const help = node([join(agent, 'src', 'bin', 'sandbox-agent.js'), '--help']);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^usage: sandbox-agent --server HOST:PORT/);
    assert.doesNotMatch(help.stderr, /rejected the code cache/);
    // A bad setting exits 2 like the compiled tree does, after every module of the bundle ran its top level.
    const hook = join(dir, 'hook.cjs');
    const r = node(['-r', hook, join(agent, 'src', 'bin', 'sandbox-agent.js'), '--server', 'x']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /loaded: .*\bhttp2\b/, 'the hook saw the bundle load its built-ins');
    assert.doesNotMatch(r.stderr, /node-pty/);
  });

  void test('a cache V8 rejects is said on stderr and the agent still starts', async () => {
    const copy = join(dir, 'tampered');
    await cp(agent, copy, { recursive: true });
    await cp(join(copy, 'src', 'bin', 'sandbox-agent.js'), join(copy, 'src', 'bin', CODE_CACHE_FILE)); // garbage as cache
    const r = node([join(copy, 'src', 'bin', 'sandbox-agent.js'), '--server']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /rejected the code cache/);
    assert.match(r.stderr, /sandbox-agent: --server/);
  });

  void test('is reused while its inputs are unchanged', async () => {
    const first = await ensureAgentBundle({ agentTree, packageRoot, outDir: join(dir, 'bundle') });
    assert.equal(first.rebuilt, false);
  });
});
