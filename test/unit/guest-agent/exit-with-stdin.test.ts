/**
 * The real sandbox-agent binary with `--exit-with stdin`, as sandboxd starts the local agent of a
 * VM that ends with it (src/vms/local-agents.ts): when the other end of its stdin pipe closes —
 * what happens when sandboxd ends, SIGKILL included — the agent stops gracefully and exits 0,
 * while it was still trying to reach a server that is not there. Without the flag, the end of
 * stdin changes nothing.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { distRoot } from '../../support/paths.js';

const AGENT = join(distRoot, 'src', 'bin', 'sandbox-agent.js');

describe('sandbox-agent --exit-with stdin', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-exit-with-'));
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  /** An agent dialling a port nobody listens on (no certificates: every attempt fails, it keeps retrying). */
  async function agent(extra: string[]): Promise<{ child: ChildProcess; log: () => string }> {
    const child = spawn(
      process.execPath,
      [
        AGENT,
        '--server',
        '127.0.0.1:9',
        '--certs',
        join(dir, 'certs'),
        '--agent-id',
        'a1',
        '--instance-id',
        'i1',
        '--work-dir',
        dir,
        ...extra,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    children.push(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const deadline = Date.now() + 20_000;
    while (!out.includes('cannot connect')) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `the agent tries to connect:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return { child, log: () => out };
  }

  test('the end of stdin stops the agent gracefully (exit 0)', async () => {
    const { child, log } = await agent(['--exit-with', 'stdin']);
    const exited = once(child, 'exit');
    child.stdin!.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const [code] = (await exited) as [number | null];
    clearTimeout(timer);
    assert.equal(code, 0, log());
    assert.match(log(), /standard input ended \(--exit-with stdin\)/);
    assert.match(log(), /agent stopped/);
  });

  test('without the flag the end of stdin changes nothing', async () => {
    const { child, log } = await agent([]);
    child.stdin!.end();
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(child.exitCode, null, log());
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
  });
});
