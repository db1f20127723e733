import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { v1 } from '../../../proto/index.js';
import { planReconcile, ReconcileRun, reconcileMessage, type SessionEvent } from '../../../src/sessions/reconcile.js';
import { SessionReconciler, type ReconcileTransport } from '../../../src/sessions/session-reconciler.js';
import type { SessionRecord } from '../../../src/sessions/session-types.js';

function rec(over: Partial<SessionRecord> & { sessionId: string }): SessionRecord {
  return {
    agentId: 'agent-1',
    instanceId: 'inst-1',
    commandId: `cmd-${over.sessionId}`,
    generation: 0,
    sessionName: `terminal-${over.sessionId}`,
    command: 'bash',
    sessionType: 'interactive',
    sessionBackend: 'tmux',
    sessionClass: 'managed',
    createdAtMs: 1,
    state: 'detached',
    cols: 80,
    rows: 24,
    hubEpoch: 1,
    ...over,
  };
}

/** A report as the agent sends it, through the real wire encoding. */
function wireReport(sessions: v1.IActiveSession[]): v1.ISessionReport {
  const bytes = v1.SessionReport.encode(v1.SessionReport.create({ agentId: 'agent-1', sessions, timestampMs: 1_700_000_000_000 })).finish();
  return v1.SessionReport.decode(bytes);
}

class Counter {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

const KNOWN = [rec({ sessionId: 's-run' }), rec({ sessionId: 's-lost' }), rec({ sessionId: 's-tmux', sessionName: 'build' })];
const REPORT = wireReport([
  {
    commandId: 'cmd-s-run',
    sessionId: 's-run',
    sessionName: 'terminal-s-run',
    sessionType: v1.SessionType.INTERACTIVE,
    command: 'tmux -L sandboxd new-session …',
    pid: 100,
    isPty: true,
    startedAtMs: 1,
  },
  { commandId: 'tmux:build', sessionName: 'build', sessionType: v1.SessionType.INTERACTIVE, isPty: true },
  { commandId: 'cmd-stranger', sessionId: 'stranger', sessionName: 'evil', sessionType: v1.SessionType.INTERACTIVE, isPty: true, pid: 200 },
  { commandId: 'task-cmd-9', sessionName: 'task-9', sessionType: v1.SessionType.HEADLESS, pid: 300 },
  { commandId: 'cmd-s-run', sessionId: 's-run' },
]);

describe('reconciliation plan', () => {
  test('known sessions are kept (by id, command or tmux name), unknown ones killed, the rest re-attached', () => {
    const plan = planReconcile(KNOWN, REPORT, (cmd) => cmd.startsWith('task-'));
    assert.deepEqual(
      plan.keep.map((k) => [k.id, k.sessionId]),
      [
        ['s-run', 's-run'],
        ['tmux:build', 's-tmux'],
        ['task-cmd-9', undefined],
      ],
    );
    assert.deepEqual(
      plan.kill.map((k) => k.id),
      ['stranger'],
    );
    assert.deepEqual(plan.running, ['s-run']);
    assert.deepEqual(plan.reattach, ['s-lost', 's-tmux']);
    const msg = reconcileMessage(plan);
    assert.deepEqual(msg, {
      keepSessionIds: ['s-run', 'tmux:build', 'task-cmd-9'],
      killSessionIds: ['stranger'],
      killUnrecognized: false,
      gracePeriodSeconds: 5,
    });
    const back = v1.SessionReconcile.decode(v1.SessionReconcile.encode(v1.SessionReconcile.create(msg)).finish());
    assert.deepEqual(
      [back.keepSessionIds, back.killSessionIds, back.killUnrecognized, back.gracePeriodSeconds],
      [msg.keepSessionIds, msg.killSessionIds, false, 5],
    );
  });

  test('an empty report keeps nothing, kills nothing and re-attaches every known session', () => {
    const plan = planReconcile(KNOWN, wireReport([]));
    assert.deepEqual([plan.keep, plan.kill, plan.running], [[], [], []]);
    assert.deepEqual(plan.reattach, ['s-run', 's-lost', 's-tmux']);
  });

  test('property: every reported id is in exactly one of keep and kill; known ids are never killed', () => {
    const ids = fc.constantFrom('s-run', 's-lost', 's-tmux', 'x1', 'x2', 'tmux:build', 'tmux:other', '');
    fc.assert(
      fc.property(
        fc.array(fc.record({ sessionId: ids, commandId: fc.constantFrom('cmd-s-run', 'cmd-s-lost', 'c9', 'tmux:build', '') }), {
          maxLength: 12,
        }),
        (sessions) => {
          const plan = planReconcile(KNOWN, { sessions });
          const keep = new Set(plan.keep.map((k) => k.id));
          const kill = new Set(plan.kill.map((k) => k.id));
          for (const id of keep) assert.ok(!kill.has(id));
          for (const s of sessions) {
            const id = s.sessionId || s.commandId;
            if (id === '') continue;
            assert.ok(keep.has(id) !== kill.has(id));
            if (KNOWN.some((r) => r.sessionId === s.sessionId || r.commandId === s.commandId)) assert.ok(keep.has(id), id);
          }
        },
      ),
    );
  });
});

describe('ReconcileRun events', () => {
  test('query, report, started, preserved per kept, killed per killed, complete — in order, with the metrics', () => {
    const events: SessionEvent[] = [];
    const metrics = { sessionReconciliationsTotal: new Counter(), sessionsKilledTotal: new Counter() };
    const run = new ReconcileRun('agent-1', (e) => events.push(e), metrics);
    assert.deepEqual(run.querySent(), { reportAll: true, sessionIds: [] });
    const r = run.reportReceived(REPORT, KNOWN, { isKnownCommand: (c) => c.startsWith('task-') });
    assert.ok(r);
    assert.equal(run.reportReceived(REPORT, KNOWN), null, 'a second report is ignored');
    const ack = v1.SessionReconcileAck.decode(
      v1.SessionReconcileAck.encode({
        agentId: 'agent-1',
        killedSessionIds: ['stranger'],
        keptSessionIds: ['s-run', 'tmux:build', 'task-cmd-9'],
      }).finish(),
    );
    assert.ok(run.ackReceived(ack));
    assert.equal(run.ackReceived(ack), false);
    assert.deepEqual(
      events.map((e) => e.event_type),
      [
        'session.query_sent',
        'session.report_received',
        'session.reconcile_started',
        'session.preserved',
        'session.preserved',
        'session.preserved',
        'session.killed',
        'session.reconcile_complete',
      ],
    );
    assert.ok(events.every((e) => e.agent_id === 'agent-1'));
    assert.equal(events[6]?.details['session_id'], 'stranger');
    assert.equal(events[4]?.details['reattach'], true, 'the tmux-only session is preserved and re-attached');
    assert.deepEqual([metrics.sessionReconciliationsTotal.value, metrics.sessionsKilledTotal.value], [1, 1]);
  });

  test('a failed kill ends the run with reconcile_failed instead of complete', () => {
    const events: string[] = [];
    const run = new ReconcileRun('a', (e) => events.push(`${e.event_type}:${String((e.details['reason'] as string | undefined) ?? '')}`));
    run.querySent();
    run.reportReceived(REPORT, KNOWN);
    run.ackReceived({ killedSessionIds: [], failedToKill: ['stranger'] });
    assert.equal(events.at(-1), 'session.reconcile_failed:kill_failed');
    assert.ok(!events.some((e) => e.startsWith('session.reconcile_complete')));
  });
});

describe('SessionReconciler timers and transport', () => {
  function setup(over: { reportTimeoutMs?: number; ackTimeoutMs?: number } = {}): {
    r: SessionReconciler;
    sent: string[];
    events: string[];
  } {
    const sent: string[] = [];
    const events: string[] = [];
    const transport: ReconcileTransport = {
      sendSessionQuery: (a, q) => sent.push(`query:${a}:${String(q.reportAll)}`),
      sendSessionReconcile: (a, m) => sent.push(`reconcile:${a}:${m.killSessionIds.join(',')}`),
    };
    const r = new SessionReconciler({
      sessions: { listByAgent: () => KNOWN },
      transport,
      emit: (e) => events.push(`${e.event_type}:${String((e.details['reason'] as string | undefined) ?? '')}`),
      graceSeconds: 1,
      ...over,
    });
    return { r, sent, events };
  }

  test('registration → query; report → reconcile (and the plan); ack → complete', () => {
    const plans: string[] = [];
    const sent: string[] = [];
    const r = new SessionReconciler({
      sessions: { listByAgent: () => KNOWN },
      transport: {
        sendSessionQuery: () => sent.push('query'),
        sendSessionReconcile: (_a, m) => sent.push(`reconcile grace=${m.gracePeriodSeconds}`),
      },
      emit: () => undefined,
      onPlan: (a, p) => plans.push(`${a}:${p.reattach.join(',')}`),
    });
    r.agentRegistered('agent-1');
    assert.equal(r.reportReceived('agent-9', REPORT), false, 'no run for that agent');
    assert.ok(r.reportReceived('agent-1', REPORT));
    assert.deepEqual(sent, ['query', 'reconcile grace=5']);
    assert.deepEqual(plans, ['agent-1:s-lost,s-tmux']);
    assert.ok(r.ackReceived('agent-1', { killedSessionIds: ['stranger'] }));
    assert.equal(r.pending, 0);
  });

  test('no report in time → reconcile_failed report_timeout; nothing is sent to kill', async () => {
    const { r, sent, events } = setup({ reportTimeoutMs: 30 });
    r.agentRegistered('agent-1');
    // Waits out the 30 ms timeout: timers fire in expiry order, so the reconciler's timer armed before this pause has run when it ends, however busy the machine.
    await new Promise((res) => setTimeout(res, 150));
    assert.deepEqual(sent, ['query:agent-1:true']);
    assert.deepEqual(events, ['session.query_sent:', 'session.reconcile_failed:report_timeout']);
    assert.equal(r.reportReceived('agent-1', REPORT), false);
  });

  test('no ack in time → ack_timeout; disconnect and re-registration end a run too', async () => {
    const { r, events } = setup({ ackTimeoutMs: 30 });
    r.agentRegistered('agent-1');
    r.reportReceived('agent-1', REPORT);
    // Waits out the 30 ms timeout: timers fire in expiry order, so the reconciler's timer armed before this pause has run when it ends, however busy the machine.
    await new Promise((res) => setTimeout(res, 150));
    assert.equal(events.at(-1), 'session.reconcile_failed:ack_timeout');
    r.agentRegistered('agent-1');
    r.agentRegistered('agent-1');
    assert.equal(events.at(-2), 'session.reconcile_failed:superseded');
    r.agentDisconnected('agent-1');
    assert.equal(events.at(-1), 'session.reconcile_failed:agent_disconnected');
    assert.equal(r.pending, 0);
    r.stop();
  });
});
