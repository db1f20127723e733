/**
 * PtyConnection against the server end of pty-ws.v1 in memory (fake-pty-server.ts: the server's
 * own subprotocol choice, decoder, schema and encoders), and once over real sockets (the `ws`
 * package on loopback, what sbx uses). The live session hub is covered by the sessions, CLI and
 * dashboard integration tests.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import type { WebSocketConstructor } from '../../../src/client/http-transport.js';
import { PtyConnection, type PtyConnectOptions } from '../../../src/client/pty-ws.js';
import { decodeBinaryInput, encodeBinaryOutput, selectSubprotocol } from '../../../src/sessions/binding/binary.js';
import {
  closedFrame,
  errorFrame,
  goodbyeFrame,
  keyframeFrame,
  membershipChangedFrame,
  outputFrame,
  pingFrame,
  resizeFrame,
  roleAssignedFrame,
  sessionErrorFrame,
} from '../../../src/sessions/binding/encode.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';
import { FakePtySocket, lastSocket } from './fake-pty-server.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

/** A connection whose callbacks log what a terminal would see, one line each. */
function connect(opts: Partial<PtyConnectOptions> = {}): { conn: PtyConnection; ws: FakePtySocket; log: string[] } {
  const log: string[] = [];
  const conn = new PtyConnection(FakePtySocket, 'ws://h/api/v1/sessions/sess-1/pty', {
    role: 'observer',
    cols: 80,
    rows: 24,
    pingIntervalMs: 0,
    onRole: (g, i) =>
      log.push(`role ${i.requested}->${g}${i.downgraded ? ' downgraded' : ''}${i.reason !== undefined ? ` ${i.reason}` : ''}`),
    onKeyframe: (k) => log.push(`keyframe@${k.anchorSequence} ${k.cols}x${k.rows} ${dec(k.snapshot)}`),
    onOutput: (b, seq, stream) => log.push(`${seq}${stream === 'stdout' ? '' : ` ${stream}`}: ${dec(b)}`),
    onResize: (c, r) => log.push(`resize ${c}x${r}`),
    onMembership: (m) => log.push(`members ${m.controllers.map((c) => c.label ?? c.client_id).join(',')}|${m.observers.length}`),
    onExit: (e) => log.push(`exit ${e.exitCode} ${e.reason}`),
    onError: (code, message, info) => log.push(`error ${info.scope} ${code}: ${message}${info.retryable ? ' (retryable)' : ''}`),
    onGoodbye: (reason) => log.push(`goodbye ${reason}`),
    onClose: (code) => log.push(`close ${code}`),
    ...opts,
  });
  return { conn, ws: lastSocket(), log };
}

describe('PtyConnection', () => {
  test('offers the binary subprotocol, joins after binding_hello, decodes PW1O output and types PW1I input', () => {
    const { conn, ws, log } = connect({ role: 'controller', cols: 100, rows: 30, clientLabel: 'sbx alice' });
    assert.deepEqual(ws.offered, ['pty-ws.v1.binary', 'pty-ws.v1']);
    assert.equal(ws.binaryType, 'arraybuffer');
    ws.open({ currentSequence: 7 });
    assert.equal(conn.protocol, 'pty-ws.v1.binary');
    const [join] = ws.framesOf('pty.join_session');
    assert.deepEqual(join?.payload, { role: 'controller', cols: 100, rows: 30, client_label: 'sbx alice' });
    assert.equal(join?.replay_from, undefined, 'a first join asks for no replay');

    ws.sendFrame(roleAssignedFrame(7, { role: 'controller', clientId: 'c-1' }));
    assert.equal(conn.role, 'controller');
    // A granted controller reports its size, so the PTY follows this terminal.
    assert.deepEqual(ws.framesOf('pty.session_resize').at(-1)?.payload, { cols: 100, rows: 30 });
    ws.sendFrame(keyframeFrame(7, { snapshot: enc('\x1b[H$ '), cols: 100, rows: 30, anchorSequence: 7 }));
    ws.sendOutput(8, 'héllo');
    ws.sendOutput(9, 'oops', 'stderr');
    assert.deepEqual(log, ['role controller->controller', 'keyframe@7 100x30 \x1b[H$ ', '8: héllo', '9 stderr: oops']);
    assert.equal(conn.lastSequence, 9);

    assert.equal(conn.input('ls\r'), true);
    assert.equal(ws.received.at(-1)?.kind, 'binary');
    // Longer input goes in frames of at most 64 KiB.
    assert.equal(conn.input(new Uint8Array(150_000).fill(0x61)), true);
    assert.deepEqual(
      ws.received.slice(-3).map((r) => r.input?.byteLength),
      [65536, 65536, 18928],
    );
    assert.equal(ws.typed().length, 3 + 150_000);
  });

  test('over pty-ws.v1 (JSON only) output arrives as Output frames and input leaves as base64', () => {
    const { conn, ws, log } = connect({ role: 'controller' });
    ws.open({ only: 'pty-ws.v1' });
    assert.equal(conn.protocol, 'pty-ws.v1');
    ws.sendFrame(roleAssignedFrame(0, { role: 'controller', clientId: 'c-1' }));
    ws.sendFrame(outputFrame(1, enc('a\r\n'), 'stdout'));
    assert.equal(conn.input('echo hi\r'), true);
    const input = ws.framesOf('pty.session_input').at(-1);
    assert.equal(dec(Buffer.from(input?.payload.data ?? '', 'base64')), 'echo hi\r');
    assert.deepEqual(log, ['role controller->controller', '1: a\r\n']);
    // Offering JSON only.
    const json = connect({ binary: false });
    assert.deepEqual(json.ws.offered, ['pty-ws.v1']);
  });

  test('a keyframe resets the screen; frames it covers are dropped, and older or equal keyframes are ignored', () => {
    const { conn, ws, log } = connect();
    ws.open({ currentSequence: 40 });
    assert.deepEqual(ws.framesOf('pty.join_session')[0]?.payload, { role: 'observer' }, "an observer's size never reaches the PTY");
    ws.sendFrame(roleAssignedFrame(40, { role: 'observer', clientId: 'c-2' }));
    ws.sendFrame(membershipChangedFrame(41, [{ client_id: 'c-1', label: 'alice' }], [{ client_id: 'c-2' }]));
    ws.sendFrame(keyframeFrame(41, { snapshot: enc('SCREEN@40'), cols: 132, rows: 43, anchorSequence: 40 }));
    ws.sendOutput(40, 'covered by the snapshot');
    ws.sendOutput(42, 'x');
    ws.sendFrame(resizeFrame(43, 100, 30));
    ws.sendOutput(44, 'y');
    // A cadence keyframe of the live stream describes what is on screen: no redraw.
    ws.sendFrame(keyframeFrame(45, { snapshot: enc('SAME'), cols: 100, rows: 30, anchorSequence: 44 }));
    ws.sendFrame(keyframeFrame(45, { snapshot: enc('OLDER'), cols: 100, rows: 30, anchorSequence: 43 }));
    // One asked for is drawn even when nothing changed.
    assert.equal(conn.requestKeyframe(), true);
    assert.equal(ws.framesOf('pty.request_keyframe').length, 1);
    ws.sendFrame(keyframeFrame(45, { snapshot: enc('ASKED'), cols: 100, rows: 30, anchorSequence: 44 }));
    // A format this client cannot draw is reported and skipped.
    ws.sendFrame(keyframeFrame(46, { snapshot: enc('?'), cols: 1, rows: 1, anchorSequence: 46, format: 'other-v1' }));
    assert.deepEqual(log, [
      'role observer->observer',
      'members alice|1',
      'keyframe@40 132x43 SCREEN@40',
      '42: x',
      'resize 100x30',
      '44: y',
      'keyframe@44 100x30 ASKED',
      'error session KEYFRAME_FORMAT: a keyframe in format other-v1 cannot be drawn; it is ignored',
    ]);
    assert.equal(conn.lastSequence, 45);
  });

  test('resumes with replay_from; a replay gap or a restarted counter lets the next keyframe redraw', () => {
    const resumed = connect({ replayFrom: 50 });
    resumed.ws.open({ currentSequence: 53 });
    assert.equal(resumed.ws.framesOf('pty.join_session')[0]?.replay_from, 50);
    resumed.ws.sendFrame(roleAssignedFrame(50, { role: 'observer', clientId: 'c-3' }));
    resumed.ws.sendOutput(51, 'missed-1');
    resumed.ws.sendOutput(52, 'missed-2');
    resumed.ws.sendFrame(membershipChangedFrame(53, [], [{ client_id: 'c-3' }]));
    // The join's keyframe shows what is already drawn: not redrawn.
    resumed.ws.sendFrame(keyframeFrame(53, { snapshot: enc('SAME'), cols: 80, rows: 24, anchorSequence: 52 }));
    assert.deepEqual(resumed.log, ['role observer->observer', '51: missed-1', '52: missed-2', 'members |1']);
    assert.equal(resumed.conn.lastSequence, 53);

    // The server no longer holds frames after 50: the keyframe that follows redraws, even an older one.
    const gap = connect({ replayFrom: 50 });
    gap.ws.open({ currentSequence: 5000 });
    gap.ws.sendFrame(roleAssignedFrame(5000, { role: 'observer', clientId: 'c-4' }));
    gap.ws.sendFrame(errorFrame({ code: 'REPLAY_OUT_OF_RANGE', message: 'frames after 50 are gone', requestId: 'x' }));
    assert.equal(gap.conn.lastSequence, -1);
    gap.ws.sendFrame(keyframeFrame(5000, { snapshot: enc('NOW'), cols: 80, rows: 24, anchorSequence: 4990 }));
    gap.ws.sendOutput(5001, 'live');
    assert.deepEqual(gap.log, [
      'role observer->observer',
      'error binding REPLAY_OUT_OF_RANGE: frames after 50 are gone',
      'keyframe@4990 80x24 NOW',
      '5001: live',
    ]);
    assert.equal(gap.conn.lastSequence, 5001);

    // A counter behind our cursor is another stream (a restarted server): join fresh, redraw.
    const restarted = connect({ replayFrom: 900 });
    restarted.ws.open({ currentSequence: 3 });
    assert.equal(restarted.ws.framesOf('pty.join_session')[0]?.replay_from, undefined);
    restarted.ws.sendFrame(keyframeFrame(3, { snapshot: enc('FRESH'), cols: 80, rows: 24, anchorSequence: 2 }));
    restarted.ws.sendOutput(4, 'z');
    assert.deepEqual(restarted.log, ['keyframe@2 80x24 FRESH', '4: z']);
  });

  test('roles: a downgrade is reported, an observer cannot type or resize, a lease given unasked is handed back', async () => {
    const { conn, ws, log } = connect({ role: 'controller' });
    ws.open();
    ws.sendFrame(roleAssignedFrame(0, { role: 'observer', clientId: 'c-5', downgraded: true, reason: 'lease_held' }));
    assert.equal(conn.input('x'), false);
    assert.equal(conn.resize(120, 40), false);
    assert.deepEqual(
      ws.received.map((r) => (r.kind === 'frame' ? r.frame.op : 'binary')),
      ['pty.join_session'],
    );
    assert.equal(conn.requestRole('controller'), true);
    ws.sendFrame(roleAssignedFrame(0, { role: 'controller', clientId: 'c-5' }));
    assert.deepEqual(ws.framesOf('pty.session_resize').at(-1)?.payload, { cols: 120, rows: 40 }, 'the size asked for while observer');
    assert.deepEqual(log, ['role controller->observer downgraded lease_held', 'role controller->controller']);
    conn.close();
    assert.deepEqual(await conn.closed(), { code: 1000, reason: 'client closed' });
    assert.equal(conn.role, null);

    // The first member of a session is made controller whatever it asked; an observer gives it back.
    const first = connect({ role: 'observer' });
    first.ws.open();
    first.ws.sendFrame(roleAssignedFrame(0, { role: 'controller', clientId: 'c-6' }));
    assert.deepEqual(first.ws.framesOf('pty.request_role').at(-1)?.payload, { role: 'observer' });
    assert.equal(first.conn.role, 'observer');
    assert.equal(first.conn.input('x'), false);
    first.ws.sendFrame(roleAssignedFrame(0, { role: 'observer', clientId: 'c-6' }));
    assert.deepEqual(first.log, ['role observer->observer'], 'reported once, as what was asked for');
    assert.equal(first.ws.framesOf('pty.session_resize').length, 0);
  });

  test('answers pings, sends its own, and gives up on a server that went silent', async () => {
    const { ws } = connect();
    ws.open();
    const ping = pingFrame();
    ws.sendFrame(ping);
    const pong = ws.framesOf('pong').at(-1);
    assert.equal(pong?.id, ping.id);
    assert.equal(pong?.payload.client_ts, ping.payload.client_ts);
    assert.ok(Date.parse(pong?.payload.server_ts ?? '') > 0);

    const pinging = connect({ pingIntervalMs: 15 });
    pinging.ws.open();
    await waitFor('an application ping', () => pinging.ws.framesOf('ping').length >= 1, { deadlineMs: DEADLINE_MS.local });
    // Nothing comes back: after two intervals the connection ends as a lost one (1006). The
    // client's timers are unref'd, so the wait polls to keep this process alive.
    await waitFor('the silent connection to end', () => pinging.log.includes('close 1006'), {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => pinging.log.join('; '),
    });
    assert.equal((await pinging.conn.closed()).code, 1006);
  });

  test('a client whose own loop stalled asks before it gives up on the server', async () => {
    const stalled = connect({ pingIntervalMs: 15 });
    stalled.ws.open();
    // The client's loop is busy for four intervals right after the open (a GC, a loaded machine):
    // the server was not asked anything yet, so its silence proves nothing.
    const until = Date.now() + 60;
    while (Date.now() < until) {
      // busy
    }
    await waitFor('the silent connection to end', () => stalled.log.includes('close 1006'), {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => stalled.log.join('; '),
    });
    assert.ok(stalled.ws.framesOf('ping').length >= 1, 'the client pinged before it gave up');
  });

  test('surfaces errors, the end of the session and the goodbye; ignores what is not a frame', async () => {
    const { conn, ws, log } = connect();
    ws.open();
    ws.onmessage?.({ data: 'not json' });
    ws.onmessage?.({ data: '[1,2]' });
    ws.onmessage?.({ data: '{"op":"pty.output","seq":1,"data":"aGk="}' });
    ws.onmessage?.({ data: Uint8Array.of(1, 2, 3).buffer });
    ws.sendFrame(errorFrame({ code: 'PERMISSION_DENIED', message: 'observers cannot type', requestId: 'r-1' }));
    ws.sendFrame(errorFrame({ code: 'RATE_LIMITED', message: 'slow down' }));
    ws.sendFrame(sessionErrorFrame(1, 'PTY_WRITE_FAILED', 'EIO'));
    ws.sendFrame(sessionErrorFrame(2, 'PTY_OUTPUT_LAGGED', 'dropped 4 KiB'));
    assert.equal(ws.framesOf('pty.request_keyframe').length, 1, 'lost output: ask for a fresh screen');
    ws.sendFrame(closedFrame(3, 0, 'normal'));
    ws.sendFrame(goodbyeFrame('session_closed'));
    ws.serverClose(1000);
    assert.deepEqual(log, [
      'error binding PERMISSION_DENIED: observers cannot type',
      'error binding RATE_LIMITED: slow down (retryable)',
      'error session PTY_WRITE_FAILED: EIO (retryable)',
      'error session PTY_OUTPUT_LAGGED: dropped 4 KiB (retryable)',
      'exit 0 normal',
      'goodbye session_closed',
      'close 1000',
    ]);
    assert.deepEqual(await conn.closed(), { code: 1000, reason: '' });
    assert.equal(conn.leave(), false, 'nothing is sent after the close');
  });
});

// ---- the same client over real sockets: the `ws` package, as sbx uses it

interface WsServerSocket {
  readonly protocol: string;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  send(data: string | Uint8Array): void;
}
interface WsServer {
  address(): { port: number };
  on(event: 'connection', cb: (socket: WsServerSocket) => void): this;
  on(event: 'listening', cb: () => void): this;
  close(cb: () => void): void;
}
type WsServerCtor = new (opts: { host: string; port: number; handleProtocols: (protocols: Set<string>) => string | false }) => WsServer;
const ws = createRequire(import.meta.url)('ws') as { WebSocketServer: WsServerCtor; WebSocket: WebSocketConstructor };

test('over the ws package: binary negotiated, PW1O arrives as ArrayBuffer, PW1I reaches the server', async () => {
  const server = new ws.WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (offered) => selectSubprotocol([...offered].join(', ')) ?? false,
  });
  await new Promise<void>((r) => server.on('listening', r));
  const typed: string[] = [];
  server.on('connection', (s) => {
    s.on('message', (data, isBinary) => {
      if (isBinary) {
        const r = decodeBinaryInput(new Uint8Array(data));
        if (r.ok) typed.push(dec(r.value));
        return;
      }
      const f = JSON.parse(data.toString('utf8')) as { op: string };
      if (f.op !== 'pty.join_session') return;
      s.send(JSON.stringify(roleAssignedFrame(0, { role: 'controller', clientId: 'c-1' })));
      s.send(encodeBinaryOutput(1, enc('over the wire')));
    });
    s.send(`{"op":"binding_hello","id":"h","ts":"2026-01-01T00:00:00Z","sequence":0,"payload":{"session":{"current_sequence":0}}}`);
  });
  try {
    const out: string[] = [];
    const conn = new PtyConnection(ws.WebSocket, `ws://127.0.0.1:${server.address().port}/`, {
      role: 'controller',
      cols: 80,
      rows: 24,
      pingIntervalMs: 0,
      onOutput: (b, seq) => {
        out.push(`${seq}: ${dec(b)}`);
        conn.input('typed back');
      },
    });
    await waitFor('the typed input at the server', () => typed.length > 0, {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => `output ${JSON.stringify(out)}, protocol ${conn.protocol}`,
    });
    assert.equal(conn.protocol, 'pty-ws.v1.binary');
    assert.deepEqual(out, ['1: over the wire']);
    assert.deepEqual(typed, ['typed back']);
    conn.close();
    await conn.closed();
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
});
