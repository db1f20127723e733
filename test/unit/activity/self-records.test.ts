/**
 * What sandboxd records about itself: v1 command and session events and tasks' tool calls become
 * activity drafts with the right names, planes and correlation, carrying metadata only (argv0,
 * never arguments), and every draft makes a record the store's validator accepts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StoredEvent } from '../../../src/events/event-store.js';
import { validateEvent } from '../../../src/activity/record.js';
import { SELF_COLLECTOR_ID, uuidV7 } from '../../../src/activity/self-collector.js';
import { argv0, draftOfEvent, draftOfToolCall, scopeId, type SelfDraft } from '../../../src/activity/self-records.js';

let nextId = 1;
const v1 = (event_type: string, details: Record<string, unknown>, agent_id = 'agent-a'): StoredEvent => ({
  id: nextId++,
  event_type,
  vm_name: '',
  timestamp: '2026-11-27T09:00:00.000Z',
  details,
  agent_id,
  trace_id: null,
});
const noSessions = { sessionOfCommand: () => undefined };

/** The record the collector builds from a draft (the same shape), validated as ingest would. */
function validates(d: SelfDraft): void {
  const scope = { tenant_id: 't', host_id: 'h', instance_id: d.agentId, agent_id: d.agentId, collector_id: SELF_COLLECTOR_ID };
  validateEvent(
    {
      schema_version: 'activity.event/v1',
      event_id: uuidV7(),
      event_name: d.eventName,
      plane: d.plane,
      occurred_at: d.occurredAt,
      observed_at: d.occurredAt,
      source: { collector: SELF_COLLECTOR_ID, layer: 'control-plane', runtime: 'host', trust: 'observed' },
      correlation: { tenant_id: 't', host_id: 'h', instance_id: d.agentId, agent_id: d.agentId, ...d.correlation },
      ...(d.outcome !== undefined && { outcome: d.outcome }),
      sensitivity: 'metadata',
      retention_class: 'standard',
      payload: d.payload,
      integrity: { collector_sequence: 1 },
    },
    0,
    scope,
  );
}

describe('self-recorded activity', () => {
  test('a command: started with argv0 only, finished with its exit code and outcome', () => {
    const started = draftOfEvent(
      v1('agent.command.started', {
        command_id: 'cmd-1',
        command: '/usr/bin/curl -H "Authorization: Bearer abcdefgh12345" x',
        source: 'exec',
        pty: false,
        timeout_seconds: 30,
      }),
      noSessions,
    );
    assert.ok(started !== null);
    assert.equal(started.eventName, 'command.started');
    assert.equal(started.plane, 'runtime');
    assert.deepEqual(started.correlation, { command_id: 'cmd-1' });
    assert.deepEqual(started.payload, { argv0: 'curl', pty: false, origin: 'exec', timeout_seconds: 30 });
    assert.doesNotMatch(JSON.stringify(started), /Bearer|Authorization/);
    validates(started);

    const finished = draftOfEvent(
      v1('agent.command.completed', {
        command_id: 'cmd-1',
        exit_code: 2,
        duration_ms: 15,
        result: 'failure',
        timed_out_by: '',
        error: 'secret text',
      }),
      { sessionOfCommand: (id) => (id === 'cmd-1' ? 'sess-1' : undefined) },
    );
    assert.ok(finished !== null);
    assert.equal(finished.eventName, 'command.finished');
    assert.deepEqual(finished.correlation, { command_id: 'cmd-1', session_id: 'sess-1' });
    assert.deepEqual(finished.outcome, { status: 'failure', exit_code: 2 });
    assert.doesNotMatch(JSON.stringify(finished), /secret text/, 'the error text is not recorded');
    validates(finished);

    const ok = draftOfEvent(
      v1('agent.command.completed', { command_id: 'cmd-2', exit_code: 0, result: 'success', timed_out_by: '' }),
      noSessions,
    );
    assert.equal(ok?.outcome?.status, 'success');
  });

  test('a session: opened and closed with its id; PTY commands of no session are not sessions', () => {
    const opened = draftOfEvent(
      v1('agent.pty.created', {
        session_id: 'sess-1',
        command_id: 'cmd-9',
        session_name: 'build',
        command: 'bash -l',
        session_backend: 'tmux',
      }),
      noSessions,
    );
    assert.equal(opened?.eventName, 'session.opened');
    assert.equal(opened?.plane, 'session');
    assert.deepEqual(opened?.correlation, { session_id: 'sess-1', command_id: 'cmd-9' });
    assert.deepEqual(opened?.payload, { session_name: 'build', session_backend: 'tmux', argv0: 'bash' });
    validates(opened);
    const closed = draftOfEvent(
      v1('agent.pty.closed', { session_id: 'sess-1', command_id: 'cmd-9', exit_code: 0, reason: 'exited' }),
      noSessions,
    );
    assert.equal(closed?.eventName, 'session.closed');
    assert.deepEqual(closed?.outcome, { status: 'success', exit_code: 0, reason: 'exited' });
    validates(closed);
    assert.equal(draftOfEvent(v1('agent.pty.created', { session_id: '', command_id: 'cmd-3' }), noSessions), null);
    assert.equal(draftOfEvent(v1('agent.heartbeat', {}), noSessions), null);
    assert.equal(draftOfEvent(v1('vm.started', { command_id: 'x' }, ''), noSessions), null);
  });

  test("a task's tool call: task, tool call and command ids, the tool name, the status", () => {
    const base = { taskId: 'task-1', agentId: 'agent-task-1', commandId: 'task-1', atMs: Date.parse('2026-11-27T09:00:00Z') };
    const started = draftOfToolCall({ ...base, phase: 'started', id: 'toolu_01', name: 'Edit', isError: null });
    assert.equal(started?.eventName, 'tool.call_started');
    assert.equal(started?.plane, 'action');
    assert.deepEqual(started?.correlation, { task_id: 'task-1', tool_call_id: 'toolu_01', command_id: 'task-1' });
    assert.deepEqual(started?.payload, { tool_name: 'Edit' });
    validates(started);
    const failed = draftOfToolCall({ ...base, phase: 'finished', id: 'toolu_01', name: 'Edit', isError: true });
    assert.equal(failed?.eventName, 'tool.call_finished');
    assert.equal(failed?.outcome?.status, 'failure');
    validates(failed);
    assert.equal(draftOfToolCall({ ...base, phase: 'finished', id: 'toolu_02', name: null, isError: null })?.outcome?.status, 'unknown');
    assert.equal(
      draftOfToolCall({ ...base, phase: 'started', id: 'has space', name: 'X', isError: null }),
      null,
      'an id the store refuses',
    );
  });

  test('ids the store would refuse are left out; scope values are made valid', () => {
    const d = draftOfEvent(v1('agent.command.started', { command_id: 'bad id with spaces', command: 'ls' }), noSessions);
    assert.equal(d, null);
    assert.equal(scopeId('agent-1'), 'agent-1');
    assert.equal(scopeId('agent one/é'), 'agent_one/_');
    assert.equal(scopeId('  '), 'unknown');
    assert.equal(argv0('  make -j4 all'), 'make');
    assert.equal(argv0('/opt/x/bin/tool'), 'tool');
    assert.equal(argv0(''), undefined);
  });

  test('UUIDv7 ids are well formed and time-ordered', () => {
    const a = uuidV7(1_700_000_000_000);
    const b = uuidV7(1_700_000_000_001);
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(a < b);
  });
});
