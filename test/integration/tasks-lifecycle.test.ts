/**
 * Tasks end to end on the embedded default (issue 7): a real repository, a real shallow clone,
 * a VM per task with its real agent, the fake Claude CLI as the coding agent. The happy path walks
 * every state in order, counts the tool calls, edits the repository, leaves artifacts whose
 * checksums match their bytes, and its log replays after completion; a failing command fails the
 * task with its exit code; failure_action preserve keeps the VM.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS } from '../support/wait.js';
import { FAKE_COMMAND, startTaskHarness, until, type Json, type TaskHarness } from './tasks-harness.js';

const ORDER = ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing', 'completed'];

void describe('tasks: the full walk', () => {
  let h: TaskHarness;
  let repo: string;
  before(async () => {
    h = await startTaskHarness();
    repo = await h.makeRepo();
  });
  after(() => h.stop());

  void test('a task walks every state in order, counts tool calls, edits the repo, collects checked artifacts and replays its log', async () => {
    const id = await h.submit(
      h.manifest(repo, 'Make hello.txt greet the sandbox', { metadata: { id: 'JIRA-7' }, lifecycle: { timeout: '10m' } }),
    );
    assert.match(id, /^task-[0-9a-f-]{36}$/);
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'completed', JSON.stringify(task));
    assert.equal(task['exit_code'], 0);
    assert.equal(task['error'], null);
    assert.equal(task['name'], 'fix-greeting');
    assert.equal(task['vm_name'], `agent-task-${id.slice(5, 13)}`);
    assert.equal(typeof task['started_at'], 'string');
    assert.ok(Date.parse(String(task['state_changed_at'])) >= Date.parse(String(task['started_at'])));
    const progress = task['progress'] as Json;
    assert.equal(progress['tool_calls'], 5, 'Read, Edit, Bash, Write, Write');
    assert.equal(progress['current_tool'], null);
    assert.ok(Number(progress['output_bytes']) > 1000);

    // Every move is an event, in order, each with its message.
    const ev = await h.request('GET', '/api/v1/events?event_type=task.state_changed&limit=5000');
    const moves = (ev.body['events'] as Array<{ details: Json; vm_name: string }>).filter((e) => e.details['task_id'] === id);
    assert.deepEqual(
      moves.map((e) => e.details['to']),
      ORDER,
    );
    assert.deepEqual(
      moves.map((e) => e.details['from']),
      [null, ...ORDER.slice(0, -1)],
    );
    for (const m of moves) assert.ok(String(m.details['message']).length > 0);
    assert.equal(moves.at(-1)?.vm_name, task['vm_name']);

    // The repository file was edited in the cloned workspace (a shallow clone of main).
    const workspace = join(h.dir, 'tasks', id, 'workspace');
    assert.equal(await readFile(join(workspace, 'hello.txt'), 'utf8'), 'hello sandbox\nsecond line\n');
    assert.equal(await readFile(join(repo, 'hello.txt'), 'utf8'), 'hello world\nsecond line\n', 'the origin is untouched');
    const { execFileSync } = await import('node:child_process');
    assert.equal(
      execFileSync('git', ['rev-list', '--count', 'HEAD'], { cwd: workspace, encoding: 'utf8' }).trim(),
      '1',
      'the clone is shallow',
    );

    // Artifacts: listed with checksums that match the downloaded bytes.
    const arts = await h.request('GET', `/api/v1/tasks/${id}/artifacts`);
    assert.equal(arts.status, 200, arts.text);
    const list = arts.body['artifacts'] as Array<{
      name: string;
      path: string;
      size_bytes: number;
      content_type: string;
      checksum: string;
    }>;
    assert.deepEqual(
      list.map((a) => a.name),
      ['patches/changes.diff', 'report.md'],
    );
    for (const a of list) {
      assert.equal(a.path, `outbox/${id}/${a.name}`);
      const res = await fetch(`${h.base}/api/v1/tasks/${id}/artifacts/${encodeURIComponent(a.name)}`);
      assert.equal(res.status, 200);
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.length, a.size_bytes);
      assert.equal(createHash('sha256').update(bytes).digest('hex'), a.checksum);
      assert.equal(res.headers.get('content-type'), a.content_type);
      assert.match(res.headers.get('content-disposition') ?? '', /^attachment; filename="/);
    }
    const report = list.find((a) => a.name === 'report.md');
    assert.equal(report?.content_type, 'text/markdown; charset=utf-8');
    const diff = await (await fetch(`${h.base}/api/v1/tasks/${id}/artifacts/patches/changes.diff`)).text();
    assert.match(diff, /-hello world\n\+hello sandbox/);
    // The same bytes through the storage route.
    const viaStorage = await fetch(`${h.base}/api/v1/storage/outbox/${id}/_download?path=report.md`);
    assert.equal(viaStorage.status, 200);
    assert.match(await viaStorage.text(), /Prompt: Make hello.txt greet the sandbox/);
    // Artifact downloads stream: one past the 64 MiB the route used to read into memory whole
    // arrives intact (Content-Length, then the bytes).
    const big = randomBytes(65 * 1024 * 1024 + 123);
    await writeFile(join(h.dir, 'storage', 'outbox', id, 'big.bin'), big);
    const bigRes = await fetch(`${h.base}/api/v1/tasks/${id}/artifacts/big.bin`);
    assert.equal(bigRes.status, 200);
    assert.equal(bigRes.headers.get('content-length'), String(big.length));
    const got = Buffer.from(await bigRes.arrayBuffer());
    assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(big).digest('hex'));
    assert.equal((await h.request('GET', `/api/v1/tasks/${id}/artifacts/nope.txt`)).status, 404);
    assert.equal((await h.request('GET', `/api/v1/tasks/${id}/artifacts/..%2F..%2Fetc%2Fpasswd`)).status, 400);

    // The log replays from the start after completion and ends with `completed`.
    const log = await h.sse(`/api/v1/tasks/${id}/logs`);
    const last = log.at(-1);
    assert.equal(last?.event, 'completed');
    assert.equal(last?.data, '0');
    const states = log
      .filter((e) => e.event === 'event')
      .map((e) => JSON.parse(e.data) as Json)
      .filter((d) => d['kind'] === 'state');
    assert.deepEqual(
      states.map((s) => s['to']),
      ORDER,
    );
    const stdout = log
      .filter((e) => e.event === 'stdout')
      .map((e) => e.data)
      .join('');
    assert.match(stdout, /"type":"system","subtype":"init"/);
    assert.match(stdout, /"type":"result"/);
    const toolUses = log
      .filter((e) => e.event === 'event')
      .map((e) => JSON.parse(e.data) as Json)
      .filter((d) => d['kind'] === 'stream_json');
    assert.ok(toolUses.length >= 12, `parsed stream-json events: ${toolUses.length}`);
    const ids = log.map((e) => Number(e.id));
    assert.deepEqual(
      ids,
      ids.map((_, i) => i + 1),
      'ids are 1, 2, 3, …',
    );
    // Resuming with Last-Event-ID gives only the rest.
    const rest = await h.sse(`/api/v1/tasks/${id}/logs`, { 'last-event-id': String(ids.length - 2) });
    assert.deepEqual(
      rest.map((e) => e.id),
      [String(ids.length - 1), String(ids.length)],
    );

    // The VM is deleted after the task.
    await until(
      'the task VM deleted',
      async () => (await h.request('GET', `/api/v1/vms/${String(task['vm_name'])}`)).status === 404,
      DEADLINE_MS.agent,
      async () => `vm ${(await h.request('GET', `/api/v1/vms/${String(task['vm_name'])}`)).text}`,
    );
    // Finished tasks cannot be cancelled.
    const del = await h.request('DELETE', `/api/v1/tasks/${id}`, { reason: 'too late' });
    assert.equal(del.status, 400);
    assert.equal((del.body['error'] as Json)['code'], 'task.not_cancellable');
    // Metrics.
    const metrics = await (await fetch(`${h.base}/metrics`)).text();
    assert.match(metrics, /svc_task_outcomes_total\{outcome="success"\} [1-9]/);
    assert.match(metrics, /svc_tasks_by_state\{state="completed"\} [1-9]/);
  });

  void test('a branch is cloned when the manifest names one; YAML manifests work', async () => {
    const yaml = [
      'version: "1"',
      'kind: Task',
      'metadata:',
      '  name: on-feature',
      'repository:',
      `  url: ${repo}`,
      '  branch: feature',
      'agent:',
      '  prompt: Fix the greeting on the feature branch',
      `  command: ${JSON.stringify(FAKE_COMMAND)}`,
      'lifecycle:',
      '  timeout: 10m',
    ].join('\n');
    const r = await h.request('POST', '/api/v1/tasks', { manifest_yaml: yaml });
    assert.equal(r.status, 202, r.text);
    const id = String(r.body['task_id']);
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'completed', JSON.stringify(task));
    assert.equal(await readFile(join(h.dir, 'tasks', id, 'workspace', 'feature.txt'), 'utf8'), 'on the feature branch\n');
  });

  void test('a failing coding agent fails the task with its exit code and stderr', async () => {
    const id = await h.submit(h.manifest(repo, 'Please FAIL now'));
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'failed');
    assert.equal(task['exit_code'], 3);
    assert.match(String(task['error']), /exited with code 3: fake-claude: error: simulated failure/);
    const log = await h.sse(`/api/v1/tasks/${id}/logs`);
    assert.equal(log.at(-1)?.event, 'error');
    assert.match(log.at(-1)?.data ?? '', /exited with code 3/);
    assert.ok(log.some((e) => e.event === 'stderr' && e.data.includes('simulated failure')));
    await until(
      'failed (destroy) deletes the VM',
      async () => (await h.request('GET', `/api/v1/vms/${String(task['vm_name'])}`)).status === 404,
      DEADLINE_MS.agent,
      async () => `vm ${(await h.request('GET', `/api/v1/vms/${String(task['vm_name'])}`)).text}`,
    );
  });

  void test('failure_action preserve keeps the VM: failed_preserved', async () => {
    const id = await h.submit(h.manifest(repo, 'Please FAIL here', { lifecycle: { failure_action: 'preserve' } }));
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'failed_preserved');
    assert.equal(task['exit_code'], 3);
    const vm = await h.request('GET', `/api/v1/vms/${String(task['vm_name'])}`);
    assert.equal(vm.status, 200, 'the VM is kept for inspection');
    assert.equal(vm.body['state'], 'running');
    const del = await h.request('DELETE', `/api/v1/vms/${String(task['vm_name'])}?force=true&delete_disk=true`);
    assert.equal(del.status, 200);
  });

  void test("a repository that cannot be cloned fails the task in staging with git's message", async () => {
    const id = await h.submit(h.manifest(join(h.dir, 'no-such-repo'), 'anything'));
    const task = await h.waitTask(id);
    assert.equal(task['state'], 'failed');
    assert.match(
      String(task['error']),
      /^staging failed: git clone failed \(exit code 128\): .*(does not appear to be a git repository|not found|No such)/s,
    );
    assert.equal(task['vm_name'], null, 'no VM was created');
  });
});
