import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { validateManifest, type TaskManifest } from '../../../src/tasks/manifest.js';
import { TaskTransitionError, type TaskStateEvent } from '../../../src/tasks/task-state.js';
import { parseStateFilter, parseTaskListQuery, TaskStore } from '../../../src/tasks/task-store.js';
import { MINIMAL } from './manifest-fixtures.js';

const manifest = (name = 'demo', failure_action = 'destroy'): TaskManifest =>
  validateManifest({ ...MINIMAL, name, lifecycle: { failure_action } });

function store(opts: ConstructorParameters<typeof TaskStore>[0] = {}): TaskStore {
  let t = Date.parse('2026-01-01T00:00:00Z');
  return new TaskStore({ now: () => new Date((t += 1000)), ...opts });
}

function walk(s: TaskStore, id: string, to: 'running' | 'completed'): void {
  const path = ['staging', 'provisioning', 'ready', 'running', 'completing', 'completed'] as const;
  for (const st of path.slice(0, path.indexOf(to) + 1)) s.transition(id, st, st);
}

async function metricValue(m: ReturnType<typeof createMetrics>, name: string, labels: Record<string, string>): Promise<number> {
  const metric = await m.registry.getSingleMetric(name)?.get();
  return metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? NaN;
}

describe('TaskStore', () => {
  test('create gives a pending task-<uuid> with the spec’s fields and a creation event', () => {
    const events: TaskStateEvent[] = [];
    const s = store({ onEvent: (e) => events.push(e) });
    const t = s.create(manifest('fix-login'));
    assert.match(t.id, /^task-[0-9a-f-]{36}$/u);
    assert.deepEqual(Object.keys(t).sort(), [
      'created_at',
      'error',
      'exit_code',
      'id',
      'name',
      'progress',
      'started_at',
      'state',
      'state_changed_at',
      'state_message',
      'vm_ip',
      'vm_name',
    ]);
    assert.equal(t.state, 'pending');
    assert.equal(t.name, 'fix-login');
    assert.deepEqual(t.progress, { output_bytes: 0, tool_calls: 0, current_tool: null, last_activity_at: t.created_at });
    assert.deepEqual(
      events.map((e) => [e.from, e.to]),
      [[null, 'pending']],
    );
  });

  test('records handed out are copies', () => {
    const s = store();
    const t = s.create(manifest());
    t.state = 'completed';
    t.progress.tool_calls = 99;
    assert.equal(s.require(t.id).state, 'pending');
    assert.equal(s.require(t.id).progress.tool_calls, 0);
  });

  test('unknown ids are 404 task.not_found', () => {
    const s = store();
    assert.throws(
      () => s.require('task-nope'),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_found' && e.httpStatus === 404,
    );
    assert.throws(
      () => s.cancel('task-nope', 'x'),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_found',
    );
    assert.equal(s.get('task-nope'), undefined);
  });

  test('cancel: unfinished → cancelled with the reason, signal aborted; finished → 400 task.not_cancellable', () => {
    const s = store();
    const t = s.create(manifest());
    walk(s, t.id, 'running');
    const signal = s.signal(t.id);
    const c = s.cancel(t.id, 'user asked');
    assert.equal(c.state, 'cancelled');
    assert.equal(c.state_message, 'cancelled: user asked');
    assert.ok(signal.aborted);
    assert.match(String((signal.reason as Error).message), /cancelled: user asked/u);
    assert.throws(
      () => s.cancel(t.id, 'again'),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_cancellable' && e.httpStatus === 400,
    );
    const done = s.create(manifest());
    walk(s, done.id, 'completed');
    assert.throws(
      () => s.cancel(done.id, ''),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_cancellable',
    );
  });

  test('fail honours failure_action, and never touches a finished task', () => {
    const s = store();
    const keep = s.create(manifest('keep', 'preserve'));
    walk(s, keep.id, 'running');
    assert.equal(s.fail(keep.id, 'lifecycle.timeout of 30m expired', { exitCode: null }), 'failed_preserved');
    assert.equal(s.require(keep.id).error, 'lifecycle.timeout of 30m expired');
    const early = s.create(manifest('early', 'preserve'));
    s.transition(early.id, 'staging', 'cloning');
    assert.equal(s.fail(early.id, 'git clone failed'), 'failed', 'no VM to preserve before running');
    assert.equal(s.fail(early.id, 'again'), null);
    assert.equal(s.require(early.id).state_message, 'git clone failed');
  });

  test('illegal moves throw TaskTransitionError; tryTransition returns false after a cancel', () => {
    const s = store();
    const t = s.create(manifest());
    assert.throws(() => s.transition(t.id, 'completed', 'x'), TaskTransitionError);
    s.transition(t.id, 'staging', 'cloning');
    s.cancel(t.id, 'stop');
    assert.equal(s.tryTransition(t.id, ['staging'], 'provisioning', 'cloned'), false);
    assert.equal(s.require(t.id).state, 'cancelled');
  });

  test('vm and progress updates show in the record', () => {
    const s = store();
    const t = s.create(manifest());
    s.setVm(t.id, { name: 'agent-task-1', ip: '10.0.0.5' });
    s.updateProgress(t.id, { output_bytes: 10, tool_calls: 2, current_tool: 'Edit', last_activity_at: '2026-01-01T00:00:09.000Z' });
    const r = s.require(t.id);
    assert.equal(r.vm_name, 'agent-task-1');
    assert.equal(r.vm_ip, '10.0.0.5');
    assert.deepEqual(r.progress, { output_bytes: 10, tool_calls: 2, current_tool: 'Edit', last_activity_at: '2026-01-01T00:00:09.000Z' });
  });

  test('list: newest first, state filter, limit/offset, total_count of all matches', () => {
    const s = store();
    const ids = Array.from({ length: 25 }, (_, i) => s.create(manifest(`t${i}`)).id);
    for (const id of ids.slice(0, 10)) walk(s, id, 'completed');
    for (const id of ids.slice(10, 15)) walk(s, id, 'running');
    const all = s.list({ limit: 50, offset: 0 });
    assert.equal(all.total_count, 25);
    assert.deepEqual(
      all.tasks.map((t) => t.id),
      [...ids].reverse(),
    );
    const page = s.list({ limit: 4, offset: 2, states: parseStateFilter('completed') });
    assert.equal(page.total_count, 10);
    assert.deepEqual(
      page.tasks.map((t) => t.id),
      ids.slice(0, 10).reverse().slice(2, 6),
    );
    const two = s.list({ limit: 100, offset: 0, states: parseStateFilter('running,pending') });
    assert.equal(two.total_count, 15);
    assert.ok(two.tasks.every((t) => t.state === 'running' || t.state === 'pending'));
    assert.deepEqual(s.list({ limit: 10, offset: 100 }), { tasks: [], total_count: 25 });
    assert.equal(s.activeCount(), 15);
  });

  test('parseTaskListQuery: defaults 50/0, bounds, and each state validated', () => {
    assert.deepEqual(parseTaskListQuery(new URLSearchParams('')), { limit: 50, offset: 0 });
    const q = parseTaskListQuery(new URLSearchParams('state=running,failed_preserved&limit=1000&offset=7'));
    assert.deepEqual([...(q.states ?? [])], ['running', 'failed_preserved']);
    assert.equal(q.limit, 1000);
    assert.equal(q.offset, 7);
    for (const bad of [
      'state=runnin',
      'state=running,',
      'state=',
      'state=RUNNING',
      'state=a&state=b',
      'limit=0',
      'limit=1001',
      'limit=x',
      'offset=-1',
      'offset=1.5',
    ]) {
      assert.throws(
        () => parseTaskListQuery(new URLSearchParams(bad)),
        (e: unknown) => e instanceof SvcError && e.code === 'request.invalid',
        bad,
      );
    }
  });

  test('metrics: svc_tasks_by_state follows every move; outcomes count success and failure', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const s = store({ metrics: m });
    const a = s.create(manifest());
    const b = s.create(manifest());
    const c = s.create(manifest());
    walk(s, a.id, 'completed');
    walk(s, b.id, 'running');
    s.fail(b.id, 'exit 1', { exitCode: 1 });
    s.cancel(c.id, 'x');
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'completed' }), 1);
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'failed' }), 1);
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'cancelled' }), 1);
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'pending' }), 0);
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'running' }), 0);
    assert.equal(await metricValue(m, 'svc_task_outcomes_total', { outcome: 'success' }), 1);
    assert.equal(await metricValue(m, 'svc_task_outcomes_total', { outcome: 'failure' }), 1);
  });

  test('finished tasks beyond maxFinishedTasks are forgotten, oldest finish first; running ones never', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const s = store({ maxFinishedTasks: 3, metrics: m });
    const running = s.create(manifest());
    walk(s, running.id, 'running');
    const done = Array.from({ length: 5 }, () => s.create(manifest()).id);
    for (const id of done) walk(s, id, 'completed');
    assert.equal(s.size, 4);
    assert.equal(s.get(done[0]!), undefined);
    assert.equal(s.get(done[1]!), undefined);
    assert.ok(s.get(done[4]!));
    assert.equal(s.require(running.id).state, 'running');
    assert.equal(await metricValue(m, 'svc_tasks_by_state', { state: 'completed' }), 3);
  });
});
