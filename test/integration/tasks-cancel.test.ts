/**
 * Stopping tasks (issue 7): DELETE during running kills the whole process group (the fake CLI and
 * the grandchild it spawned are gone when DELETE answers) and frees the VM; the live log stream
 * sees the output and ends with the cancel; lifecycle.timeout fails the task with a message naming
 * the timer and kills the group; a cancel before running needs no process at all; unknown ids 404.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS } from '../support/wait.js';
import { alive, startTaskHarness, until, type Json, type TaskHarness } from './tasks-harness.js';

async function pidFile(path: string): Promise<number> {
  let pid = 0;
  await until(
    `${path} written`,
    async () => {
      pid = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      return pid > 1;
    },
    DEADLINE_MS.agent,
    async () => `it holds ${JSON.stringify(await readFile(path, 'utf8').catch((err: unknown) => String(err)))}`,
  );
  return pid;
}

void describe('tasks: cancel and timeout', () => {
  let h: TaskHarness;
  let repo: string;
  before(async () => {
    h = await startTaskHarness();
    repo = await h.makeRepo();
  });
  after(() => h.stop());

  void test('DELETE during running kills the process group, frees the VM, and ends the live log', async () => {
    const id = await h.submit(h.manifest(repo, 'SPAWN a helper and wait', { lifecycle: { timeout: '10m' } }));
    const running = await h.waitTask(id, ['running']);
    const outbox = join(h.dir, 'storage', 'outbox', id);
    const leader = await pidFile(join(outbox, 'fake-claude.pid'));
    const grandchild = await pidFile(join(outbox, 'grandchild.pid'));
    assert.ok(alive(leader) && alive(grandchild));
    // A live reader joined before the cancel.
    const live = h.sse(`/api/v1/tasks/${id}/logs`);
    await until(
      'progress to show the Bash call',
      async () => ((await h.request('GET', `/api/v1/tasks/${id}`)).body['progress'] as Json)['current_tool'] === 'Bash',
      DEADLINE_MS.process,
      () => h.describeTask(id),
    );

    const del = await h.request('DELETE', `/api/v1/tasks/${id}`, { reason: 'changed my mind' });
    assert.equal(del.status, 200, del.text);
    assert.deepEqual(del.body, { success: true, error: null });
    assert.equal(alive(leader), false, 'the coding agent is gone when DELETE answers');
    assert.equal(alive(grandchild), false, 'its grandchild (same process group) is gone too');

    const task = await h.waitTask(id);
    assert.equal(task['state'], 'cancelled');
    assert.equal(task['state_message'], 'cancelled: changed my mind');
    const log = await live;
    assert.ok(log.some((e) => e.event === 'stdout' && e.data.includes(`grandchild sleep started, pid ${grandchild}`)));
    assert.equal(log.at(-1)?.event, 'error');
    assert.equal(log.at(-1)?.data, 'cancelled: changed my mind');
    await until(
      'the VM to be deleted',
      async () => (await h.request('GET', `/api/v1/vms/${String(running['vm_name'])}`)).status === 404,
      DEADLINE_MS.agent,
      async () => `vm ${(await h.request('GET', `/api/v1/vms/${String(running['vm_name'])}`)).text}`,
    );
    const again = await h.request('DELETE', `/api/v1/tasks/${id}`, { reason: 'twice' });
    assert.equal(again.status, 400);
  });

  void test('lifecycle.timeout fails the task with a message naming the timer and kills the group', async () => {
    const id = await h.submit(h.manifest(repo, 'SLEEP until stopped', { lifecycle: { timeout: '2s' } }));
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'failed');
    assert.match(String(task['error']), /^lifecycle\.timeout \(2s\) expired in state \w+/);
    const leaderPath = join(h.dir, 'storage', 'outbox', id, 'fake-claude.pid');
    const leader = Number((await readFile(leaderPath, 'utf8').catch(() => '0')).trim());
    if (leader > 1) await until(`the timed-out command (pid ${leader}) to be killed`, () => !alive(leader), DEADLINE_MS.process);
    const log = await h.sse(`/api/v1/tasks/${id}/logs`);
    assert.match(log.at(-1)?.data ?? '', /lifecycle\.timeout \(2s\) expired/);
  });

  void test('a task cancelled right after submission ends cancelled and leaves no VM', async () => {
    const id = await h.submit(h.manifest(repo, 'never runs'));
    const del = await h.request('DELETE', `/api/v1/tasks/${id}`, { reason: 'oops' });
    assert.equal(del.status, 200, del.text);
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'cancelled');
    const name = `agent-task-${id.slice(5, 13)}`;
    await until(
      `VM ${name} to be gone`,
      async () => (await h.request('GET', `/api/v1/vms/${name}`)).status === 404,
      DEADLINE_MS.endToEnd,
      async () => `vm ${(await h.request('GET', `/api/v1/vms/${name}`)).text}`,
    );
    const log = await h.sse(`/api/v1/tasks/${id}/logs`);
    assert.equal(log.at(-1)?.event, 'error');
  });

  void test('unknown and malformed task ids are 404 on every route', async () => {
    for (const id of ['task-00000000-0000-4000-8000-000000000000', 'nope', '..%2F..']) {
      for (const [method, suffix] of [
        ['GET', ''],
        ['DELETE', ''],
        ['GET', '/logs'],
        ['GET', '/artifacts'],
        ['GET', '/artifacts/report.md'],
      ] as const) {
        const r = await h.request(method, `/api/v1/tasks/${id}${suffix}`);
        assert.ok(r.status === 404 || (id.startsWith('..') && r.status === 400), `${method} ${id}${suffix}: ${r.status} ${r.text}`);
        if (r.status === 404) assert.equal((r.body['error'] as Json)['code'], 'task.not_found');
      }
    }
  });
});
