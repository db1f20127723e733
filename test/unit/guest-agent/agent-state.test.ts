/**
 * The guest agent's own lifecycle (src/guest-agent/agent-state.ts) on the core StateMachine: the table
 * the README shows, guarded moves that are logged and counted, and refusals that change nothing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AGENT_STATE_TABLE,
  AGENT_STATES,
  AgentStateCause,
  LIVE_AGENT_STATES,
  agentLifecycle,
  agentStateTableMarkdown,
} from '../../../src/guest-agent/agent-state.js';

function recordingLogger(): { info: (o: object, m?: string) => void; warn: (o: object, m?: string) => void; lines: string[] } {
  const lines: string[] = [];
  const push =
    (level: string) =>
    (obj: object, msg?: string): void => {
      const o = obj as Record<string, unknown>;
      const reason = typeof o['reason'] === 'string' ? ` reason=${o['reason']}` : '';
      lines.push(`${level} ${msg ?? ''} cause=${typeof o['cause'] === 'string' ? o['cause'] : '?'}${reason}`);
    };
  return { lines, info: push('info'), warn: push('warn') };
}

void describe('guest agent lifecycle', () => {
  void test('every live state may stop; stopped is final; the README table lists every move', () => {
    for (const s of LIVE_AGENT_STATES) assert.ok(AGENT_STATE_TABLE[s].includes('stopping'), s);
    assert.deepEqual(AGENT_STATE_TABLE.stopped, []);
    const rows = agentStateTableMarkdown().split('\n').slice(2);
    assert.equal(
      rows.length,
      AGENT_STATES.reduce((n, s) => n + AGENT_STATE_TABLE[s].length, 0),
    );
    assert.ok(
      rows.every((r) => !r.endsWith('|  |')),
      'every move has a trigger',
    );
  });

  void test('a connection cycle and a stop: each move logged with its cause (and reason), counted', () => {
    const logger = recordingLogger();
    const life = agentLifecycle(logger);
    assert.equal(life.state, 'idle');
    assert.ok(life.transition(['idle'], 'connecting', AgentStateCause.dialing));
    assert.ok(life.transition(['connecting'], 'registered', AgentStateCause.registered));
    assert.ok(life.transition(['registered'], 'connecting', AgentStateCause.streamEnded, { reason: 'server closed' }));
    assert.equal(life.transition(['idle'], 'connecting', AgentStateCause.dialing), false, 'redialing while connecting is no move');
    assert.ok(life.transition(LIVE_AGENT_STATES, 'stopping', AgentStateCause.stopRequested, { reason: 'SIGTERM' }));
    assert.equal(
      life.transition(['registered'], 'connecting', AgentStateCause.streamEnded),
      false,
      'a stream ending while stopping changes nothing',
    );
    assert.ok(life.transition(['stopping'], 'stopped', AgentStateCause.stopCompleted));
    assert.deepEqual(logger.lines, [
      'info agent lifecycle: idle -> connecting cause=dialing',
      'info agent lifecycle: connecting -> registered cause=registration_accepted',
      'info agent lifecycle: registered -> connecting cause=stream_ended reason=server closed',
      'info agent lifecycle: connecting -> stopping cause=stop_requested reason=SIGTERM',
      'info agent lifecycle: stopping -> stopped cause=stop_completed',
    ]);
    assert.equal(life.counts().skipped, 1);
    assert.equal(life.counts().moves.get('registered->connecting'), 1);
  });

  void test('a move the table forbids is refused, logged at warn and counted as rejected', () => {
    const logger = recordingLogger();
    const life = agentLifecycle(logger);
    assert.equal(life.transition(['idle'], 'registered', AgentStateCause.registered), false);
    assert.equal(life.state, 'idle');
    assert.deepEqual(logger.lines, ['warn agent lifecycle: transition not allowed cause=registration_accepted']);
    assert.equal(life.counts().rejected, 1);
  });
});
