import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeBinaryInput, encodeClientFrame } from '../../../src/sessions/pty-ws-frames.js';
import { decodeClientFrame, type ClientFrame } from '../../../src/sessions/pty-ws-protocol.js';
import { SessionHub, type SessionHubOptions } from '../../../src/sessions/session-hub.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';
import { FakeSink, join } from './fake-sink.js';

interface Rig {
  hub: SessionHub;
  inputs: string[];
  resizes: string[];
  clock: { now: number };
  connect: (frame?: ClientFrame) => FakeSink;
  /** Send a frame as raw bytes through the decoder, like the route does. */
  raw: (sink: FakeSink, data: string | Uint8Array, isBinary?: boolean) => void;
}

function rig(over: Partial<SessionHubOptions> = {}): Rig {
  const inputs: string[] = [];
  const resizes: string[] = [];
  const clock = { now: 1_000_000 };
  const hub = new SessionHub({
    sessionId: 's1',
    state: 'running',
    agentConnected: true,
    terminalSize: { cols: 80, rows: 24 },
    pingIntervalMs: 0,
    pongTimeoutMs: 90_000,
    now: () => clock.now,
    pty: { input: (d) => inputs.push(Buffer.from(d).toString()), resize: (c, r) => resizes.push(`${c}x${r}`) },
    ...over,
  });
  const r: Rig = {
    hub,
    inputs,
    resizes,
    clock,
    connect: (frame) => {
      const sink = new FakeSink();
      hub.open(sink);
      if (frame !== undefined) hub.handle(sink, frame);
      return sink;
    },
    raw: (sink, data, isBinary = false) => {
      const d = decodeClientFrame(typeof data === 'string' ? new TextEncoder().encode(data) : data, isBinary);
      if (d.ok) hub.handle(sink, d.frame);
      else hub.protocolError(sink, d.code, d.message);
    },
  };
  return r;
}

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('SessionHub', () => {
  test('binding_hello first, with the real capabilities (tmux/managed only) and limits', () => {
    const { connect } = rig();
    const c = connect();
    const hello = c.frames[0];
    assert.equal(hello?.op, 'binding_hello');
    assert.equal(hello?.['binding'], 'pty-ws.v1');
    const host = hello?.['session_host'] as { backends: { session_backend: string; session_class: string; supported: boolean }[] };
    assert.deepEqual(
      host.backends.filter((b) => b.supported).map((b) => `${b.session_backend}/${b.session_class}`),
      ['tmux/managed'],
    );
    assert.ok(host.backends.some((b) => b.session_backend === 'native' && b.session_class === 'direct' && !b.supported));
    assert.deepEqual((hello?.['session'] as { current_seq: number }).current_seq, 0);
    assert.ok((hello?.['supported_operations'] as string[]).includes('pty.join_session'));
  });

  test('controller types, observer reads; a second controller is downgraded and told why', () => {
    const { hub, inputs, connect } = rig();
    const ctl = connect(join({ role: 'controller' }));
    const obs = connect(join());
    const ctl2 = connect(join({ role: 'controller' }));
    assert.deepEqual(
      [ctl.last('pty.role_assigned')?.['role'], ctl.last('pty.role_assigned')?.['requested_role']],
      ['controller', 'controller'],
    );
    assert.deepEqual(
      [obs.last('pty.role_assigned')?.['role'], obs.last('pty.role_assigned')?.['requested_role']],
      ['observer', 'observer'],
    );
    const r2 = ctl2.last('pty.role_assigned');
    assert.deepEqual([r2?.['role'], r2?.['requested_role'], r2?.['reason']], ['observer', 'controller', 'lease_held']);
    hub.handle(ctl, { op: 'pty.session_input', data: text('echo hi\r') });
    hub.output(1, text('echo hi\r\nhi\r\n'));
    assert.deepEqual(inputs, ['echo hi\r']);
    assert.equal(obs.output(), 'echo hi\r\nhi\r\n');
    assert.equal(ctl2.output(), 'echo hi\r\nhi\r\n');
    assert.deepEqual(hub.membership(), { controllers: [`c${ctl.id}`], observers: [`c${obs.id}`, `c${ctl2.id}`], attachment_count: 3 });
    assert.deepEqual(obs.last('pty.membership')?.['controllers'], [`c${ctl.id}`]);
  });

  test('observer input and resize are ignored, and the observer is told so (input_not_permitted)', () => {
    const { hub, inputs, resizes, connect } = rig();
    connect(join({ role: 'controller' }));
    const obs = connect(join());
    hub.handle(obs, { op: 'pty.session_input', data: text('rm -rf /\r') });
    hub.handle(obs, { op: 'pty.session_resize', cols: 10, rows: 10 });
    assert.deepEqual(inputs, []);
    assert.deepEqual(resizes, []);
    const errs = obs.all('error');
    assert.deepEqual(
      errs.map((e) => [e['code'], e['fatal']]),
      [
        ['input_not_permitted', false],
        ['input_not_permitted', false],
      ],
    );
    assert.equal(obs.closed, false);
  });

  test("the controller's join size and resizes reach the PTY and every client learns the size", () => {
    const { hub, resizes, connect } = rig();
    const obs = connect(join());
    const ctl = connect(join({ role: 'controller', terminalSize: { cols: 120, rows: 40 } }));
    hub.handle(ctl, { op: 'pty.session_resize', cols: 100, rows: 30 });
    assert.deepEqual(resizes, ['120x40', '100x30']);
    assert.deepEqual(
      obs.all('pty.resize').map((f) => `${String(f['cols'])}x${String(f['rows'])}`),
      ['120x40', '100x30'],
    );
    assert.deepEqual(hub.terminalSize, { cols: 100, rows: 30 });
  });

  test('when the controller leaves, disconnects or times out, the lease is free for the next request', () => {
    const { hub, connect, clock } = rig();
    const a = connect(join({ role: 'controller' }));
    const b = connect(join());
    hub.handle(a, { op: 'pty.leave_session' });
    assert.equal(a.last('pty.left')?.op, 'pty.left');
    assert.equal(a.closeCode, 1000);
    hub.handle(b, { op: 'pty.request_role', role: 'controller' });
    assert.equal(b.last('pty.role_assigned')?.['role'], 'controller');
    hub.disconnect(b);
    const c = connect(join({ role: 'controller' }));
    assert.equal(c.last('pty.role_assigned')?.['role'], 'controller');
    const d = connect(join());
    clock.now += 60_000;
    hub.handle(d, { op: 'pong', id: 1 });
    clock.now += 40_000;
    hub.tick();
    assert.equal(c.closeCode, 4408);
    assert.equal(c.last('error')?.['code'], 'ping_timeout');
    assert.equal(d.closed, false);
    assert.equal(d.last('ping')?.op, 'ping');
    assert.deepEqual(hub.membership().controllers, []);
    hub.handle(d, { op: 'pty.request_role', role: 'controller' });
    assert.equal(d.last('pty.role_assigned')?.['role'], 'controller');
  });

  test('a controller silent past the pong timeout cannot block a new controller even before the sweep', () => {
    const { connect, clock } = rig();
    connect(join({ role: 'controller' }));
    clock.now += 100_000;
    const b = connect(join({ role: 'controller' }));
    assert.equal(b.last('pty.role_assigned')?.['role'], 'controller');
  });

  test('a client that stops reading is dropped (4413) without slowing the others; its lease frees', () => {
    const { hub, connect, inputs } = rig({ maxQueuedBytes: 64 * 1024, replayBytes: 16 * 1024 });
    const slow = connect(join({ role: 'controller' }));
    const fast = connect(join());
    slow.stopReading();
    const chunk = new Uint8Array(4096).fill(0x61);
    for (let seq = 1; seq <= 100; seq++) hub.output(seq, chunk);
    assert.equal(slow.closeCode, 4413);
    assert.equal(slow.last('error')?.['code'], 'slow_consumer');
    assert.deepEqual(
      fast.seqs(),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    assert.deepEqual(hub.membership().controllers, []);
    hub.handle(slow, { op: 'pty.session_input', data: text('x') });
    assert.deepEqual(inputs, []);
  });

  test('join replays from the cursor without loss or repeats, then live; reset when output is gone', () => {
    const { hub, connect } = rig({ replayBytes: 4 * (8 + 64) });
    for (let seq = 1; seq <= 6; seq++) hub.output(seq, text(`line-${seq}\n`));
    const resume = connect(join({ replayFrom: 4 }));
    hub.output(7, text('line-7\n'));
    assert.deepEqual(resume.last('pty.replay'), { op: 'pty.replay', from_seq: 4, to_seq: 6, reset: false });
    assert.deepEqual(resume.seqs(), [4, 5, 6, 7]);
    const stale = connect(join({ replayFrom: 1 }));
    assert.deepEqual([stale.last('pty.replay')?.['reset'], stale.seqs()], [true, [4, 5, 6, 7]]);
    const fresh = connect(join({ binaryOutput: true }));
    assert.equal(fresh.last('pty.replay')?.['reset'], true);
    assert.equal(fresh.output(), 'line-4\nline-5\nline-6\nline-7\n');
    hub.output(7, text('dup'));
    assert.deepEqual(resume.seqs(), [4, 5, 6, 7]);
    assert.deepEqual(hub.stats(), { hasScreen: true, newestSeq: 7, maxClientLagBytes: 0 });
  });

  test('unsupported selections fail closed before anything reaches the PTY (4501)', () => {
    const { connect, inputs, resizes } = rig();
    for (const sel of [
      { sessionBackend: 'screen' },
      { sessionClass: 'direct' },
      { argv: ['/bin/sh'] },
      { env: { A: 'b' } },
      { cwd: '/tmp' },
    ]) {
      const c = connect(join({ role: 'controller', terminalSize: { cols: 10, rows: 5 }, ...sel }));
      assert.equal(c.closeCode, 4501, JSON.stringify(sel));
      assert.equal(c.last('error')?.['code'], 'unsupported_selection');
      assert.equal(c.last('pty.role_assigned'), undefined);
    }
    assert.deepEqual([inputs, resizes], [[], []]);
    const ok = connect(join({ role: 'controller', sessionBackend: 'tmux', sessionClass: 'managed' }));
    assert.equal(ok.last('pty.role_assigned')?.['role'], 'controller');
  });

  test('malformed frames close that client only (4400); frames before the join are refused', () => {
    const r = rig();
    const good = r.connect(join());
    const bad = r.connect(join({ role: 'controller' }));
    r.raw(bad, '{"op":"pty.session_input","data":"!!"}');
    assert.equal(bad.closeCode, 4400);
    assert.equal(bad.last('error')?.['code'], 'invalid_field');
    const early = r.connect();
    r.raw(early, encodeClientFrame({ op: 'pty.session_input', data: text('x') }));
    assert.equal(early.closeCode, 4400);
    assert.equal(early.last('error')?.['code'], 'not_joined');
    const garbage = r.connect();
    r.raw(garbage, 'nonsense');
    assert.equal(garbage.closeCode, 4400);
    r.hub.output(1, text('still here'));
    assert.equal(good.output(), 'still here');
    assert.equal(good.closed, false);
    assert.deepEqual(r.hub.membership().controllers, []);
    const ctl = r.connect(join({ role: 'controller' }));
    r.raw(ctl, encodeBinaryInput(text('bin')), true);
    r.raw(ctl, encodeClientFrame({ op: 'ping', id: 7 }));
    assert.deepEqual(r.inputs, ['bin']);
    assert.deepEqual(ctl.last('pong'), { op: 'pong', id: 7 });
    r.raw(ctl, encodeClientFrame(join()));
    assert.equal(ctl.last('error')?.['code'], 'already_joined');
    assert.equal(ctl.closed, false);
  });

  test('status changes reach joined clients; close ends everyone with pty.closed and refuses later joins', () => {
    const { hub, connect } = rig();
    const c = connect(join());
    hub.setStatus('detached', false);
    assert.deepEqual(c.last('pty.session_status'), {
      op: 'pty.session_status',
      session_id: 's1',
      state: 'detached',
      agent_connected: false,
    });
    const late = connect(join());
    assert.equal(late.last('pty.session_status')?.['state'], 'detached');
    hub.close(0, 'exited');
    assert.deepEqual(c.last('pty.closed'), { op: 'pty.closed', session_id: 's1', exit_code: 0, reason: 'exited' });
    assert.equal(c.closeCode, 1000);
    const after = connect();
    assert.equal(after.closeCode, 4404);
    assert.equal(hub.clientCount, 0);
  });

  test("the hub's own timer pings and reaps (unref'd interval)", async () => {
    const pinging = rig({ pingIntervalMs: 20, pongTimeoutMs: 60_000, now: Date.now });
    const c = pinging.connect(join());
    await waitFor("two pings from the hub's own timer", () => c.all('ping').length >= 2, {
      deadlineMs: DEADLINE_MS.local,
      intervalMs: 10,
      lastState: () => c.describe(),
    });
    assert.equal(c.closed, false);
    pinging.hub.close(null, 'test over');
    const reaping = rig({ pingIntervalMs: 20, pongTimeoutMs: 50, now: Date.now });
    const d = reaping.connect(join());
    await waitFor('the silent client to be reaped after its pong timeout', () => d.closed, {
      deadlineMs: DEADLINE_MS.local,
      intervalMs: 10,
      lastState: () => d.describe(),
    });
    assert.equal(d.closeCode, 4408);
    assert.equal(reaping.hub.clientCount, 0);
  });
});
