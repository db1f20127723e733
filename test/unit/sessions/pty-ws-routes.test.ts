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
import { Router } from '../../../src/http/router.js';
import { startHttpListener, type HttpListener } from '../../../src/http/uws-server.js';
import { encodeClientFrame } from '../../../src/sessions/pty-ws-frames.js';
import { join } from './fake-sink.js';
import { parseOrchestrateQuery, sessionWsRoutes } from '../../../src/sessions/pty-ws-routes.js';
import { SessionHub } from '../../../src/sessions/session-hub.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

interface WsClient {
  readonly protocol: string;
  readonly _socket: Socket;
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'unexpected-response', cb: (req: unknown, res: { statusCode: number }) => void): this;
  send(data: string): void;
  close(): void;
}
type WsCtor = new (url: string, protocols?: string | string[]) => WsClient;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

interface Conn {
  ws: WsClient;
  frames: Record<string, unknown>[];
  closed: Promise<number>;
  /** Next frame with this op (waits). */
  next(op: string): Promise<Record<string, unknown>>;
  send(frame: Parameters<typeof encodeClientFrame>[0]): void;
  outputBytes(): number;
}

async function connect(url: string, protocols?: string[]): Promise<Conn> {
  const ws = new WebSocketClient(url, protocols);
  const frames: Record<string, unknown>[] = [];
  let read = 0;
  let outBytes = 0;
  ws.on('message', (d, isBinary) => {
    if (isBinary) return;
    const f = JSON.parse(d.toString('utf8')) as Record<string, unknown>;
    if (f['op'] === 'pty.output') outBytes += Buffer.from(f['data'] as string, 'base64').byteLength;
    frames.push(f);
  });
  const closed = new Promise<number>((r) => ws.on('close', r));
  await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
  return {
    ws,
    frames,
    closed,
    outputBytes: () => outBytes,
    send: (f) => ws.send(encodeClientFrame(f)),
    next(op) {
      return waitFor(
        `a ${op} frame`,
        () => {
          while (read < frames.length) {
            const f = frames[read++];
            if (f?.['op'] === op) return f;
          }
          return undefined;
        },
        { deadlineMs: DEADLINE_MS.local, intervalMs: 5, lastState: () => `frames ${frames.map((x) => String(x['op'])).join(',')}` },
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

describe('session WebSocket routes over real sockets', { timeout: 120_000 }, () => {
  let listener: HttpListener;
  let base: string;
  const inputs: string[] = [];
  const hubs = new Map<string, SessionHub>();
  const hub = new SessionHub({
    sessionId: 's1',
    state: 'running',
    agentConnected: true,
    terminalSize: { cols: 80, rows: 24 },
    maxQueuedBytes: 256 * 1024,
    replayBytes: 64 * 1024,
    pty: { input: (d) => inputs.push(Buffer.from(d).toString()), resize: () => undefined },
  });
  hubs.set('s1', hub);

  before(async () => {
    listener = await startHttpListener({
      host: '127.0.0.1',
      port: 0,
      router: new Router(),
      logger: pino({ level: 'silent' }),
      wsRoutes: sessionWsRoutes({ hub: (id) => hubs.get(id) }),
    });
    base = `ws://127.0.0.1:${listener.port}`;
  });
  after(async () => {
    await listener.close();
  });

  test('unknown sessions, a missing subprotocol and a bad role are refused at the upgrade', async () => {
    assert.equal(await refusedStatus(`${base}/api/v1/sessions/nope/pty`, ['pty-ws.v1']), 404);
    assert.equal(await refusedStatus(`${base}/api/v1/sessions/s1/pty`), 400);
    assert.equal(await refusedStatus(`${base}/ws/sessions/s1/orchestrate?role=admin`), 400);
    assert.equal(await refusedStatus(`${base}/ws/sessions/nope/orchestrate`), 404);
    assert.throws(() => parseOrchestrateQuery(new URLSearchParams('replay_from=-1')));
  });

  test('pty-ws.v1: hello, join, controller input reaches the PTY, output reaches an orchestrate observer; malformed frame closes that client only', async () => {
    const ctl = await connect(`${base}/api/v1/sessions/s1/pty`, ['pty-ws.v1']);
    assert.equal(ctl.ws.protocol, 'pty-ws.v1');
    assert.equal((await ctl.next('binding_hello'))['binding'], 'pty-ws.v1');
    ctl.send(join({ role: 'controller' }));
    assert.equal((await ctl.next('pty.role_assigned'))['role'], 'controller');
    const orch = await connect(`${base}/ws/sessions/s1/orchestrate?role=controller`);
    const granted = await orch.next('pty.role_assigned');
    assert.deepEqual([granted['role'], granted['requested_role'], granted['reason']], ['observer', 'controller', 'lease_held']);
    ctl.send({ op: 'pty.session_input', data: new TextEncoder().encode('ls\r') });
    orch.send({ op: 'pty.session_input', data: new TextEncoder().encode('rm\r') });
    assert.equal((await orch.next('error'))['code'], 'input_not_permitted');
    assert.deepEqual(inputs, ['ls\r']);
    hub.output(1, new TextEncoder().encode('file.txt\r\n'));
    const out = await orch.next('pty.output');
    assert.equal(Buffer.from(out['data'] as string, 'base64').toString(), 'file.txt\r\n');
    ctl.ws.send('{"op":"pty.session_resize","cols":"wide"}');
    assert.equal(await ctl.closed, 4400);
    hub.output(2, new TextEncoder().encode('after'));
    assert.equal(Buffer.from((await orch.next('pty.output'))['data'] as string, 'base64').toString(), 'after');
    orch.send({ op: 'pty.request_role', role: 'controller' });
    const second = await orch.next('pty.role_assigned');
    assert.equal(second['role'], 'controller', 'the closed controller freed the lease');
    orch.send({ op: 'pty.leave_session' });
    assert.equal(await orch.closed, 1000);
  });

  test('a client that stops reading is dropped (4413) while another receives everything and the producer never waits', async () => {
    const slow = await connect(`${base}/ws/sessions/s1/orchestrate?role=controller`);
    const fast = await connect(`${base}/ws/sessions/s1/orchestrate?replay_from=100`);
    await slow.next('pty.role_assigned');
    await fast.next('pty.role_assigned');
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
    assert.deepEqual(hub.membership().controllers, [], 'the slow controller was dropped and its lease freed');
    slow.ws._socket.resume();
    assert.equal(await slow.closed, 4413);
    assert.ok(producerMs < 20_000, `producer took ${producerMs} ms`);
    fast.ws.close();
    await fast.closed;
  });
});
