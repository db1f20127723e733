/**
 * The agent status table (spec part 3; transitions are ours): its shape, its wire mapping
 * (checked against the generated enum), and a property test that any sequence of what can happen
 * to an agent (registration, heartbeats with any status, missed heartbeats, stream end) only ever
 * asks the table for moves it allows.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { v1 } from '../../../proto/index.js';
import {
  AGENT_STATUS_TABLE,
  AGENT_STATUSES,
  agentStatusMachine,
  agentStatusTableMarkdown,
  CONNECTED_STATUSES,
  PROTO_AGENT_STATUS,
  REPORTED_STATUSES,
  reportedStatusFromProto,
  statusFromProto,
  toProtoStatus,
} from '../../../src/core/agent-status.js';

const WIRE_NAMES: Record<string, string> = {
  Starting: 'STARTING',
  Ready: 'READY',
  Busy: 'BUSY',
  Error: 'ERROR',
  ShuttingDown: 'SHUTTING_DOWN',
  Stale: 'STALE',
  Disconnected: 'DISCONNECTED',
};

void describe('agent status', () => {
  void test("the values are the spec's, in its order", () => {
    assert.deepEqual([...AGENT_STATUSES], ['Starting', 'Ready', 'Busy', 'Error', 'ShuttingDown', 'Stale', 'Disconnected']);
  });

  void test('the wire numbers equal svc.sandbox.v1.AgentStatus', () => {
    const wire = v1.AgentStatus as unknown as Record<string, number>;
    for (const s of AGENT_STATUSES) {
      assert.equal(PROTO_AGENT_STATUS[s], wire[WIRE_NAMES[s]!], s);
      assert.equal(toProtoStatus(s), wire[WIRE_NAMES[s]!]);
      assert.equal(statusFromProto(wire[WIRE_NAMES[s]!]), s);
    }
    assert.equal(statusFromProto(v1.AgentStatus.AGENT_STATUS_UNSPECIFIED), null);
  });

  void test('agents report only Starting, Ready, Busy, Error, ShuttingDown; the rest is unspecified', () => {
    for (const s of REPORTED_STATUSES) assert.equal(reportedStatusFromProto(PROTO_AGENT_STATUS[s]), s);
    for (const n of [0, v1.AgentStatus.STALE, v1.AgentStatus.DISCONNECTED, 99, -1, null, undefined])
      assert.equal(reportedStatusFromProto(n), null);
  });

  void test('table: every connected status can reach Disconnected; Disconnected only leads to Starting; no self-moves', () => {
    for (const s of CONNECTED_STATUSES) assert.ok(AGENT_STATUS_TABLE[s].includes('Disconnected'), s);
    assert.deepEqual([...AGENT_STATUS_TABLE.Disconnected], ['Starting']);
    for (const s of AGENT_STATUSES) assert.ok(!AGENT_STATUS_TABLE[s].includes(s), s);
    assert.ok(!AGENT_STATUS_TABLE.Stale.includes('Stale'));
  });

  void test('the Markdown version has one row per allowed move', () => {
    const rows = agentStatusTableMarkdown().split('\n').slice(2);
    assert.equal(
      rows.length,
      AGENT_STATUSES.reduce((n, s) => n + AGENT_STATUS_TABLE[s].length, 0),
    );
    assert.ok(rows.includes('| Ready | Stale | no heartbeat for SVC_AGENT_STALE_AFTER_SECONDS |'));
    assert.ok(rows.includes('| Disconnected | Starting | registration accepted on a new stream |'));
  });

  void test("whatever happens to an agent, the actor's moves are all in the table", () => {
    type Ev = { t: 'register' } | { t: 'beat'; s: (typeof REPORTED_STATUSES)[number] } | { t: 'missed' } | { t: 'end' };
    const ev = fc.oneof(
      fc.constant<Ev>({ t: 'register' }),
      fc.constantFrom(...REPORTED_STATUSES).map((s): Ev => ({ t: 'beat', s })),
      fc.constant<Ev>({ t: 'missed' }),
      fc.constant<Ev>({ t: 'end' }),
    );
    fc.assert(
      fc.property(fc.array(ev, { maxLength: 60 }), (events) => {
        const m = agentStatusMachine({});
        let connected = false;
        for (const e of events) {
          if (e.t === 'register' && !connected) {
            connected = m.transition(['Disconnected'], 'Starting', 'registered');
          } else if (e.t === 'beat' && connected) {
            m.transition(CONNECTED_STATUSES, e.s, 'heartbeat');
          } else if (e.t === 'missed' && connected && m.state !== 'Stale') {
            m.transition(CONNECTED_STATUSES, 'Stale', 'heartbeat_missed');
          } else if (e.t === 'end' && connected) {
            m.transition(CONNECTED_STATUSES, 'Disconnected', 'stream_ended');
            connected = false;
          }
        }
        assert.equal(m.counts().rejected, 0);
        assert.equal(connected, m.state !== 'Disconnected');
      }),
      { numRuns: 500 },
    );
  });
});
