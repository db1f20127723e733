/**
 * The dashboard WebSocket's session dialect: session events as the reference dashboard reads
 * them (session_frame for a join_session, the untagged-stream `output` for a legacy attach), the
 * join's answer, later role changes, keyframes that replace the screen, errors.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { RoleInfo, SessionEvent } from '../../../src/sessions/session-dialect.js';
import { wsSessionDialect, type WsSessionForm, type WsSessionIds } from '../../../src/streaming/ws-session-dialect.js';

const TS = '2026-03-01T10:00:00.250Z';
const TS_MS = Date.parse(TS);
const ids: WsSessionIds = { sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-2', sessionName: 'main' };
const controller: RoleInfo = { role: 'controller', clientId: 'c-9', requested: 'controller', downgraded: false, reason: undefined };
const observer: RoleInfo = { role: 'observer', clientId: 'c-9', requested: 'controller', downgraded: true, reason: 'lease_held' };

function dialect(form: WsSessionForm, roles: RoleInfo[] = []) {
  return wsSessionDialect({
    form,
    ids: () => ids,
    onRole: (r) => roles.push(r),
    firstRole: (r) => ({ type: 'session_attached', session_id: ids.sessionId, role: r.role }),
  });
}

const json = (s: string | Uint8Array | undefined): Record<string, unknown> => {
  assert.equal(typeof s, 'string', 'a text message');
  return JSON.parse(s as string) as Record<string, unknown>;
};

const output = (data: string): SessionEvent => ({
  sequence: 7,
  id: 'f-7',
  ts: TS,
  kind: 'Output',
  stream: 'stdout',
  data: Buffer.from(data),
});

describe('ws session dialect', () => {
  test('output: a session_frame with base64 bytes (frames), the reference output message with text (legacy)', () => {
    const bytes = 'héllo \x1b[1mbold\x1b[0m\r\n';
    assert.deepEqual(json(dialect('frames').event(output(bytes))), {
      type: 'session_frame',
      session_id: 's-1',
      seq: 7,
      ts: TS_MS,
      kind: 'output',
      stream: 'stdout',
      data: Buffer.from(bytes).toString('base64'),
    });
    assert.deepEqual(json(dialect('legacy').event(output(bytes))), {
      type: 'output',
      agent_id: 'agent-a',
      command_id: 'cmd-2',
      stream: 'stdout',
      data: bytes,
      ts: TS_MS,
    });
    assert.notEqual(dialect('frames').key, dialect('legacy').key, 'the two forms are encoded apart');
  });

  test('legacy text replaces invalid UTF-8 as the reference does', () => {
    const e: SessionEvent = { sequence: 1, id: 'f', ts: TS, kind: 'Output', stream: 'stdout', data: Uint8Array.of(0x61, 0xff, 0x62) };
    assert.equal(json(dialect('legacy').event(e))['data'], 'a\ufffdb');
  });

  test('resize, membership, closed and error events', () => {
    const d = dialect('frames');
    const base = { sequence: 3, id: 'f', ts: TS };
    assert.deepEqual(json(d.event({ ...base, kind: 'Resize', cols: 120, rows: 40 })), {
      type: 'session_frame',
      session_id: 's-1',
      seq: 3,
      ts: TS_MS,
      kind: 'resize',
      cols: 120,
      rows: 40,
    });
    const m = json(
      d.event({ ...base, kind: 'MembershipChanged', controllers: [{ client_id: 'c-1' }], observers: [{ client_id: 'c-2', label: 'x' }] }),
    );
    assert.deepEqual([m['kind'], m['controllers'], m['observers']], ['membership_changed', ['c-1'], ['c-2']]);
    for (const form of ['frames', 'legacy'] as const) {
      const closed = json(dialect(form).event({ ...base, kind: 'Closed', exitCode: 0, reason: 'normal' }));
      assert.deepEqual(
        [closed['type'], closed['kind'], closed['exit_code'], closed['reason']],
        ['session_frame', 'closed', 0, 'normal'],
        form,
      );
      const err = json(dialect(form).event({ ...base, kind: 'Error', code: 'PTY_WRITE_FAILED', message: 'broken pipe' }));
      assert.deepEqual([err['type'], err['kind'], err['message']], ['session_frame', 'error', 'broken pipe'], form);
    }
    assert.equal(dialect('legacy').event({ ...base, kind: 'Resize', cols: 1, rows: 1 }), undefined, 'legacy attachments get no resize');
  });

  test('cadence keyframes are not sent; a join keyframe clears the screen and redraws it', () => {
    const snap = Buffer.from('\x1b[1;1Hprompt$ ');
    const kf = {
      sequence: 9,
      id: 'k',
      ts: TS,
      kind: 'Keyframe' as const,
      snapshot: snap,
      format: 'vt100-screen-state-v1',
      cols: 80,
      rows: 24,
      anchorSequence: 8,
    };
    assert.equal(dialect('frames').event(kf), undefined);
    const f = json(dialect('frames').keyframe(kf, 12, undefined));
    assert.deepEqual(
      [f['type'], f['kind'], f['seq'], f['stream']],
      ['session_frame', 'keyframe', 12, 'stdout'],
      'stamped with the position',
    );
    assert.equal(Buffer.from(f['data'] as string, 'base64').toString(), `\x1b[0m\x1b[H\x1b[2J${snap.toString()}`);
    const l = json(dialect('legacy').keyframe(kf, 12, undefined));
    assert.deepEqual([l['type'], l['command_id'], l['data']], ['output', 'cmd-2', `\x1b[0m\x1b[H\x1b[2J${snap.toString()}`]);
  });

  test('the first role answers the join (session_joined, or the legacy request reply); later ones are role_assigned', () => {
    const roles: RoleInfo[] = [];
    const d = dialect('frames', roles);
    assert.deepEqual(json(d.role(controller, 5, undefined)), {
      type: 'session_joined',
      session_id: 's-1',
      role: 'controller',
      current_seq: 5,
    });
    const later = json(d.role(observer, 6, undefined));
    assert.deepEqual([later['type'], later['kind'], later['role'], later['seq']], ['session_frame', 'role_assigned', 'observer', 6]);
    assert.deepEqual(
      roles.map((r) => r.role),
      ['controller', 'observer'],
    );
    const l = dialect('legacy');
    assert.deepEqual(json(l.role(observer, 1, undefined)), { type: 'session_attached', session_id: 's-1', role: 'observer' });
    assert.equal(l.role(controller, 2, undefined), undefined);
  });

  test('errors are the reference error message; hello, status and goodbye are not shown', () => {
    const d = dialect('frames');
    assert.deepEqual(json(d.error('PERMISSION_DENIED', 'only the controller may type', 3, 'r-1')), {
      type: 'error',
      code: 'PERMISSION_DENIED',
      message: 'only the controller may type',
      session_id: 's-1',
    });
    assert.equal(d.status({ state: 'detached', agentConnected: false }), undefined);
    assert.equal(d.goodbye('session_closed', undefined), undefined);
  });
});
