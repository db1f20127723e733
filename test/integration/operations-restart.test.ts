/**
 * The one operations store across restarts of `sandboxd serve` (a child process, test:///default):
 * a VM create's operation reads back the same after a SIGTERM and a start on the same state
 * directory, at the v1 and the v2 admin route; an operation still running when the server is
 * killed with SIGKILL comes back failed with error_code server.restarted.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { spawnServe, type ServeProcess } from '../support/serve-process.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

type Json = Record<string, unknown>;

const stateDirs: string[] = [];
const children: ServeProcess[] = [];
const stoppedAgents: number[] = [];

after(() => {
  for (const pid of stoppedAgents) kill(pid, 'SIGKILL');
  for (const c of children) c.child.kill('SIGKILL');
  for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
});

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function stateDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sandboxd-ops-restart-'));
  stateDirs.push(d);
  return d;
}

async function serve(dir: string): Promise<{ proc: ServeProcess; url: string }> {
  const proc = spawnServe(dir, { SVC_ADMIN_ADDR: 'off', LOG_LEVEL: 'warn' });
  children.push(proc);
  return { proc, url: await proc.url() };
}

async function getJson(url: string): Promise<{ status: number; json: Json }> {
  const r = await fetch(url);
  return { status: r.status, json: (await r.json()) as Json };
}

async function createVm(url: string, name: string): Promise<string> {
  const r = await fetch(`${url}api/v1/vms`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  const body = (await r.json()) as { operation: Json };
  assert.equal(r.status, 202, JSON.stringify(body));
  return String(body.operation['id']);
}

describe('operations across restarts of sandboxd serve', () => {
  test('a finished VM create reads back the same after SIGTERM and a new start, at /api/v1 and /api/v2/admin', async () => {
    const dir = stateDir();
    const first = await serve(dir);
    const id = await createVm(first.url, 'agent-ops-kept');
    const done = await waitFor(
      'the create to finish',
      async () => {
        const { json } = await getJson(`${first.url}api/v1/operations/${id}`);
        return json['status'] === 'completed' || json['status'] === 'failed' ? json : undefined;
      },
      { deadlineMs: DEADLINE_MS.agent },
    );
    assert.equal(done['status'], 'completed', JSON.stringify(done));
    const v2Before = await getJson(`${first.url}api/v2/admin/operations/${id}`);
    assert.deepEqual(v2Before.json, { ...done, links: { self: `/api/v2/admin/operations/${id}` } });
    first.proc.child.kill('SIGTERM');
    assert.equal((await first.proc.exit).code, 0, first.proc.stderr());

    const second = await serve(dir);
    const v1 = await getJson(`${second.url}api/v1/operations/${id}`);
    assert.equal(v1.status, 200);
    assert.deepEqual(v1.json, done, 'the same JSON after the restart');
    const v2 = await getJson(`${second.url}api/v2/admin/operations/${id}`);
    assert.equal(v2.status, 200);
    assert.deepEqual(v2.json, v2Before.json);
    const unknown = await getJson(`${second.url}api/v2/admin/operations/op-00000000-0000-0000-0000-000000000000`);
    assert.equal(unknown.status, 404);
    assert.equal((unknown.json['error'] as Json)['code'], 'operation.not_found');
    second.proc.child.kill('SIGTERM');
    assert.equal((await second.proc.exit).code, 0, second.proc.stderr());
  });

  test('an operation running at a SIGKILL comes back failed with error_code server.restarted', async () => {
    const dir = stateDir();
    const first = await serve(dir);
    // The create waits for its VM's local agent to connect: the agent is stopped (SIGSTOP) as soon
    // as it exists, so the operation stays running until the server is killed. An agent that
    // connected before the stop (a slow machine) finishes its create: then try another VM.
    let running: Json | undefined;
    let id = '';
    for (let attempt = 0; attempt < 3 && running === undefined; attempt++) {
      const name = `agent-ops-cut-${attempt}`;
      id = await createVm(first.url, name);
      const pid = await waitFor(
        "the VM's local agent to start",
        () => {
          const text = (() => {
            try {
              return readFileSync(join(dir, 'vms', name, 'agent.pid'), 'utf8');
            } catch {
              return '';
            }
          })();
          const n = Number(text.trim());
          return Number.isSafeInteger(n) && n > 1 ? n : undefined;
        },
        { deadlineMs: DEADLINE_MS.agent, intervalMs: 5 },
      );
      kill(pid, 'SIGSTOP');
      stoppedAgents.push(pid);
      const now = (await getJson(`${first.url}api/v1/operations/${id}`)).json;
      if (now['status'] === 'running') running = now;
    }
    assert.ok(running !== undefined, 'an operation caught running');
    first.proc.child.kill('SIGKILL');
    assert.equal((await first.proc.exit).signal, 'SIGKILL');
    for (const pid of stoppedAgents.splice(0)) kill(pid, 'SIGKILL');

    const second = await serve(dir);
    const v1 = await getJson(`${second.url}api/v1/operations/${id}`);
    assert.equal(v1.status, 200);
    const op = v1.json;
    assert.equal(op['status'], 'failed');
    assert.equal(op['error_code'], 'server.restarted');
    assert.match(String(op['error']), /sandboxd restarted while this operation was running; its outcome is unknown/);
    assert.deepEqual(
      [op['id'], op['type'], op['target'], op['created_at']],
      [running['id'], running['type'], running['target'], running['created_at']],
      'the operation it was',
    );
    // Progress alone is written at most a second late: at most what was seen, never more.
    assert.ok(Number(op['progress_percent']) <= Number(running['progress_percent']), JSON.stringify({ op, running }));
    assert.equal(typeof op['completed_at'], 'string');
    const v2 = await getJson(`${second.url}api/v2/admin/operations/${id}`);
    assert.deepEqual(v2.json, { ...op, links: { self: `/api/v2/admin/operations/${id}` } });
    assert.match(second.proc.stdout(), /operations left pending or running by the previous sandboxd are failed/);
    second.proc.child.kill('SIGTERM');
    assert.equal((await second.proc.exit).code, 0, second.proc.stderr());
  });
});
