/**
 * The session WebSocket routes over a real uWS HTTP listener on loopback, with the `ws` client
 * (Node 20 has no global WebSocket without a flag).
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { SvcError } from '../../../src/core/errors.js';
import { Router } from '../../../src/http/router.js';
import { startHttpListener, type HttpListener } from '../../../src/http/uws-server.js';
import { startScreenStates } from '../../../actors/terminal/screen-states.js';
import { decodeBinaryOutput, encodeBinaryInput } from '../../../src/sessions/binding/binary.js';
import { clientFrame, toText } from '../../../src/sessions/binding/encode.js';
import type { ClientFrame } from '../../../src/sessions/binding/frames.js';
import { TEST_BINDING_PARAMS, TEST_HOST } from './fake-sink.js';
import { parseOrchestrateQuery, sessionWsRoutes } from '../../../src/sessions/pty-ws-routes.js';
import { SessionHub, type SessionHubOptions } from '../../../src/sessions/session-hub.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

interface WsClient {
  readonly protocol: string;
  readonly _socket: Socket;
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'unexpected-response', cb: (req: unknown, res: { statusCode: number }) => void): this;
  send(data: string | Uint8Array): void;
  close(): void;
}
type WsCtor = new (url: string, protocols?: string | string[]) => WsClient;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

interface Frame {
  op: string;
  id: string;
  sequence?: number;
  payload: Record<string, unknown>;
}

interface Conn {
  ws: WsClient;
  frames: Frame[];
  closed: Promise<number>;
  /** Next frame with this name (an op, or a session frame's kind); waits. */
  next(name: string): Promise<Frame>;
  send(op: ClientFrame['op'], payload: Record<string, unknown>, extra?: { id?: string; replay_from?: number }): string;
  outputBytes(): number;
}

const nameOf = (f: Frame): string => (f.op === 'pty.session_frame' ? String(f.payload['kind']) : f.op);

async function connect(url: string, protocols?: string[]): Promise<Conn> {
  const ws = new WebSocketClient(url, protocols);
  const frames: Frame[] = [];
  let read = 0;
  let outBytes = 0;
  ws.on('message', (d, isBinary) => {
    if (isBinary) {
      const b = decodeBinaryOutput(new Uint8Array(d));
      if (!b.ok) throw new Error(b.message);
      outBytes += b.value.bytes.byteLength;
      frames.push({ op: 'pty.session_frame', id: '', sequence: b.value.sequence, payload: { kind: 'Output', binary: true } });
      return;
    }
    const f = JSON.parse(d.toString('utf8')) as Frame;
    if (nameOf(f) === 'Output') outBytes += Buffer.from(f.payload['data'] as string, 'base64').byteLength;
    frames.push(f);
  });
  const closed = new Promise<number>((r) => ws.on('close', r));
  await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
  return {
    ws,
    frames,
    closed,
    outputBytes: () => outBytes,
    send: (op, payload, extra) => {
      const f = clientFrame(op, payload as never, extra);
      ws.send(toText(f));
      return f.id;
    },
    next(name) {
      return waitFor(
        `a ${name} frame`,
        () => {
          while (read < frames.length) {
            const f = frames[read++];
            if (f !== undefined && nameOf(f) === name) return f;
          }
          return undefined;
        },
        { deadlineMs: DEADLINE_MS.local, intervalMs: 5, lastState: () => `frames ${frames.map(nameOf).join(',')}` },
      );
    },
  };
}

function refusedStatus(url: string, protocols?: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocketClient(url, protocols);
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode));
    ws.on('open', () => reject(new Error('upgrade was accepted')));
    ws.on('error', () => undefined);
  });
}

const UUID = '0190f5c2-7a3b-7c4d-8e5f-123456789abc';

describe('session WebSocket routes over real sockets', { timeout: 120_000 }, () => {
  let listener: HttpListener;
  let base: string;
  const inputs: string[] = [];
  const hubs = new Map<string, SessionHub>();
  const screens = startScreenStates();
  const make = (over: Partial<SessionHubOptions> & { sessionId: string }, pair = true): SessionHub =>
    new SessionHub({
      agentId: 'a1',
      state: 'running',
      agentConnected: true,
      terminalSize: { cols: 80, rows: 24 },
      ...(pair && { sessionBackend: 'tmux', sessionClass: 'managed' }),
      host: () => TEST_HOST,
      screen: screens,
      maxQueuedBytes: 256 * 1024,
      pty: { input: (d) => inputs.push(Buffer.from(d).toString()), resize: () => undefined },
      ...over,
    });
  const hub = make({ sessionId: 's1' });
  hubs.set('s1', hub);
  const started: string[] = [];

  before(async () => {
    listener = await startHttpListener({
      host: '127.0.0.1',
      port: 0,
      router: new Router(),
      logger: pino({ level: 'silent' }),
      wsRoutes: sessionWsRoutes({
        hub: (id) => hubs.get(id),
        agentHub: (instanceId, sessionId, create) => {
          if (instanceId !== 'i1') throw new SvcError('agent.not_found', 'no agent');
          const known = hubs.get(sessionId);
          if (known !== undefined) return known;
          if (sessionId !== UUID) throw new SvcError('session.not_found', 'no session');
          if (!create) return undefined;
          const pending = make(
            {
              sessionId,
              state: 'pending',
              start: (sel) => {
                started.push(`${sel.backend}/${sel.class} ${JSON.stringify(sel.argv)}`);
                return Promise.resolve();
              },
            },
            false,
          );
          hubs.set(sessionId, pending);
          return pending;
        },
        params: TEST_BINDING_PARAMS,
      }),
    });
    base = `ws://127.0.0.1:${listener.port}`;
  });
  after(async () => {
    await listener.close();
    await screens.stop();
  });

  test('refused at the upgrade: unknown sessions (404, both URL patterns), no or an unknown subprotocol (400), a bad role (400)', async () => {
    assert.equal(await refusedStatus(`${base}/api/v1/sessions/nope/pty`, ['pty-ws.v1']), 404);
    assert.equal(await refusedStatus(`${base}/agents/i1/sessions/nope/attach`, ['pty-ws.v1']), 404);
    assert.equal(await refusedStatus(`${base}/agents/i9/sessions/s1/attach`, ['pty-ws.v1']), 404);
    assert.equal(await refusedStatus(`${base}/api/v1/sessions/s1/pty`), 400);
    assert.equal(await refusedStatus(`${base}/api/v1/sessions/s1/pty`, ['pty-ws.v2']), 400);
    assert.equal(await refusedStatus(`${base}/ws/sessions/s1/orchestrate?role=admin`), 400);
    assert.equal(await refusedStatus(`${base}/ws/sessions/nope/orchestrate`), 404);
    assert.throws(() => parseOrchestrateQuery(new URLSearchParams('replay_from=-1')));
  });

  test('pty-ws.v1: hello, join, controller input reaches the PTY, an orchestrate observer is refused input and sees output; a malformed frame closes that client only', async () => {
    const ctl = await connect(`${base}/api/v1/sessions/s1/pty`, ['pty-ws.v1']);
    assert.equal(ctl.ws.protocol, 'pty-ws.v1');
    assert.equal((await ctl.next('binding_hello')).payload['binding_uri'], 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1');
    const joinId = ctl.send('pty.join_session', { role: 'controller' });
    const role = await ctl.next('RoleAssigned');
    assert.deepEqual([role.payload['role'], role.id], ['controller', joinId]);
    await ctl.next('Keyframe');
    const orch = await connect(`${base}/ws/sessions/s1/orchestrate?role=controller`);
    const granted = await orch.next('RoleAssigned');
    assert.deepEqual([granted.payload['role'], granted.payload['downgraded']], ['observer', true]);
    await orch.next('Keyframe');
    ctl.send('pty.session_input', { data: Buffer.from('ls\r').toString('base64') });
    const refused = orch.send('pty.session_input', { data: Buffer.from('rm\r').toString('base64') });
    const err = await orch.next('Error');
    assert.deepEqual([err.payload['code'], err.id], ['PERMISSION_DENIED', refused]);
    await waitFor('the input', () => inputs.length > 0, { deadlineMs: DEADLINE_MS.local, intervalMs: 5 });
    assert.deepEqual(inputs, ['ls\r']);
    hub.output(1, new TextEncoder().encode('file.txt\r\n'));
    const out = await orch.next('Output');
    assert.equal(Buffer.from(out.payload['data'] as string, 'base64').toString(), 'file.txt\r\n');
    const pingId = orch.send('ping', { client_ts: new Date().toISOString() });
    assert.equal((await orch.next('pong')).id, pingId);
    const a2a = orch.send('SendMessage' as ClientFrame['op'], { message: {} });
    const unsupported = await orch.next('Error');
    assert.deepEqual([unsupported.payload['code'], unsupported.id], ['UNSUPPORTED_OPERATION', a2a]);
    ctl.ws.send('{"op":"pty.session_resize","cols":"wide"}');
    assert.equal(await ctl.closed, 4400);
    assert.equal(ctl.frames.at(-1)?.payload['code'], 'INVALID_REQUEST');
    hub.output(2, new TextEncoder().encode('after'));
    assert.equal(Buffer.from((await orch.next('Output')).payload['data'] as string, 'base64').toString(), 'after');
    orch.send('pty.request_role', { role: 'controller' });
    assert.equal((await orch.next('RoleAssigned')).payload['role'], 'controller', 'the closed controller freed the lease');
    orch.send('pty.leave_session', {});
    await orch.next('binding_goodbye');
    assert.equal(await orch.closed, 1000);
  });

  test('pty-ws.v1.binary is chosen when offered: output as PW1O, input as PW1I', async () => {
    const c = await connect(`${base}/api/v1/sessions/s1/pty`, ['pty-ws.v1', 'pty-ws.v1.binary']);
    assert.equal(c.ws.protocol, 'pty-ws.v1.binary');
    assert.equal(((await c.next('binding_hello')).payload['payload_modes'] as Record<string, unknown>)['binary'], true);
    c.send('pty.join_session', { role: 'controller' });
    await c.next('Keyframe');
    const before = inputs.length;
    c.ws.send(encodeBinaryInput(new TextEncoder().encode('bin\r')));
    await waitFor('the binary input', () => inputs.length > before, { deadlineMs: DEADLINE_MS.local, intervalMs: 5 });
    assert.equal(inputs.at(-1), 'bin\r');
    hub.output(3, new TextEncoder().encode('x'));
    assert.equal((await c.next('Output')).payload['binary'], true);
    c.ws.close();
    await c.closed;
  });

  test('the agent-scoped URL starts a session with a join that selects a backend', async () => {
    const c = await connect(`${base}/agents/i1/sessions/${UUID}/attach`, ['pty-ws.v1']);
    const hello = await c.next('binding_hello');
    assert.equal((hello.payload['session'] as Record<string, unknown>)['current_sequence'], 0);
    c.send('pty.join_session', { role: 'controller', session_backend: 'native', session_class: 'direct', argv: ['/bin/sh'] });
    assert.equal((await c.next('RoleAssigned')).payload['role'], 'controller');
    await c.next('Keyframe');
    assert.deepEqual(started, ['native/direct ["/bin/sh"]']);
    c.ws.close();
    await c.closed;
  });

  test('a client that stops reading is dropped (4413) while another receives everything and the producer never waits', async () => {
    const slow = await connect(`${base}/ws/sessions/s1/orchestrate?role=controller`);
    const fast = await connect(`${base}/ws/sessions/s1/orchestrate`);
    await slow.next('Keyframe');
    await fast.next('Keyframe');
    slow.ws._socket.pause();
    const chunk = new Uint8Array(16 * 1024).fill(0x41);
    const started = Date.now();
    const total = 1024;
    for (let i = 0; i < total; i++) {
      hub.output(100 + i, chunk);
      // Test pacing only (client and server share this event loop): let the fast reader keep up.
      while (i % 8 === 7 && fast.outputBytes() < (i + 1 - 8) * chunk.byteLength) await sleep(1);
    }
    const producerMs = Date.now() - started;
    await waitFor('the fast client to get every byte', () => fast.outputBytes() >= total * chunk.byteLength, {
      deadlineMs: DEADLINE_MS.process,
      intervalMs: 20,
      lastState: () => `${fast.outputBytes()} of ${total * chunk.byteLength} bytes`,
    });
    assert.equal(fast.outputBytes(), total * chunk.byteLength, 'the fast client got every byte');
    assert.ok(!hub.membership().controllers.includes(`c-${String(slow.frames.length)}`));
    slow.ws._socket.resume();
    assert.equal(await slow.closed, 4413);
    assert.ok(producerMs < 20_000, `producer took ${producerMs} ms`);
    fast.ws.close();
    await fast.closed;
  });
});
