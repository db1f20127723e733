/**
 * WebSocket over real uWS: the dashboard listener (spec 4.18) and a WS route on the HTTP
 * listener. The client is the `ws` package (a dependency of the uWS package; Node 20 has no
 * global WebSocket without a flag).
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { SvcError } from '../../src/core/errors.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener } from '../../src/http/uws-server.js';
import { startWsListener, type WsConn, type WsHandlers, type WsListener } from '../../src/http/ws-server.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

/** The part of the `ws` client API these tests use (the package ships no types here). */
interface WsClient {
  readonly protocol: string;
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

const logger = pino({ level: 'silent' });

/** A connected client that queues incoming text messages. */
async function connect(
  url: string,
  protocols?: string[],
): Promise<{ ws: WsClient; next(): Promise<Record<string, unknown>>; closed: Promise<number> }> {
  const ws = new WebSocketClient(url, protocols);
  const queue: string[] = [];
  ws.on('message', (d) => queue.push(d.toString('utf8')));
  const closed = new Promise<number>((r) => ws.on('close', r));
  await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
  return {
    ws,
    closed,
    async next() {
      await waitFor('the next message', () => queue.length > 0, { deadlineMs: DEADLINE_MS.local, intervalMs: 10 });
      return JSON.parse(queue.shift() ?? '') as Record<string, unknown>;
    },
  };
}

/** Status of a refused upgrade. */
function refusedStatus(url: string, protocols?: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocketClient(url, protocols);
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode));
    ws.on('open', () => reject(new Error('upgrade was accepted')));
    ws.on('error', () => undefined);
  });
}

/** A WS listener on a free loopback port with `handlers`, closed after `fn`. */
async function withWsListener(handlers: WsHandlers | undefined, fn: (listener: WsListener, url: string) => Promise<void>): Promise<void> {
  const listener = await startWsListener({ host: '127.0.0.1', port: 0, logger, ...(handlers !== undefined && { handlers }) });
  try {
    await fn(listener, `ws://127.0.0.1:${listener.port}/`);
  } finally {
    await listener.close();
  }
}

void describe('WebSocket listener (spec 4.18)', () => {
  void test('greets with server_hello and answers unknown messages with an error frame', async () => {
    await withWsListener(undefined, async (listener, url) => {
      const c = await connect(url);
      const hello = await c.next();
      assert.equal(hello.type, 'server_hello');
      assert.equal(typeof hello.conn_id, 'number');
      c.ws.send(JSON.stringify({ type: 'dance' }));
      assert.deepEqual(await c.next(), { type: 'error', message: 'unknown message type: dance' });
      c.ws.send('not json');
      assert.equal((await c.next()).type, 'error');
      const res = await fetch(`http://127.0.0.1:${listener.port}/`);
      assert.equal(res.status, 404, 'plain HTTP gets an envelope');
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'route.not_found');
      c.ws.close();
    });
  });

  void test('publish reaches every subscriber of the topic and nobody else; close() sends 1001', async () => {
    const listener = await startWsListener({
      host: '127.0.0.1',
      port: 0,
      logger,
      handlers: {
        open: (conn) => {
          const topic = conn.request.query.get('topic');
          if (topic !== null) conn.subscribe(topic);
          conn.send(JSON.stringify({ type: 'server_hello' }));
        },
      },
    });
    const url = `ws://127.0.0.1:${listener.port}/`;
    const a = await connect(`${url}?topic=agent-1`);
    const b = await connect(`${url}?topic=agent-1`);
    const other = await connect(`${url}?topic=agent-2`);
    for (const c of [a, b, other]) assert.equal((await c.next()).type, 'server_hello');
    assert.equal(listener.subscriberCount('agent-1'), 2);
    const frame = new TextEncoder().encode(JSON.stringify({ type: 'output', agent_id: 'agent-1', data: 'aGk=' }));
    listener.publish('agent-1', frame);
    assert.equal((await a.next()).agent_id, 'agent-1');
    assert.equal((await b.next()).agent_id, 'agent-1');
    listener.publish('agent-2', JSON.stringify({ type: 'agent_status', agent_id: 'agent-2' }));
    assert.equal((await other.next()).type, 'agent_status', 'agent-2 subscriber sees only its topic');
    await listener.close();
    assert.deepEqual(await Promise.all([a.closed, b.closed, other.closed]), [1001, 1001, 1001]);
  });
});

void describe('WebSocket sends are batched per synchronous run (ws-route.ts)', () => {
  void test('frames sent in one run arrive all and in order; a close right after them comes after them', async () => {
    const handlers: WsHandlers = {
      open: (conn) => {
        // 2,000 frames of about 100 bytes: several batches handed over at their size bound, and a tail
        for (let i = 0; i < 2000; i++) conn.send(JSON.stringify({ i, pad: 'x'.repeat(80) }));
        conn.close(1000, 'done');
      },
    };
    await withWsListener(handlers, async (_listener, url) => {
      const ws = new WebSocketClient(url);
      const got: number[] = [];
      ws.on('message', (d) => got.push((JSON.parse(d.toString('utf8')) as { i: number }).i));
      const code = await new Promise<number>((resolve, reject) => ws.on('close', resolve).on('error', reject));
      assert.equal(code, 1000);
      assert.deepEqual(
        got,
        Array.from({ length: 2000 }, (_, i) => i),
      );
    });
  });

  void test('a frame sent before subscribing arrives before what is then published to the topic', async () => {
    let publish: (topic: string, frame: string) => void = () => undefined;
    const handlers: WsHandlers = {
      message: (conn) => {
        conn.send(JSON.stringify({ type: 'subscribed' }));
        conn.subscribe('t');
        publish('t', JSON.stringify({ type: 'published' }));
      },
    };
    await withWsListener(handlers, async (listener, url) => {
      publish = (topic, frame) => listener.publish(topic, frame);
      const c = await connect(url);
      c.ws.send('{"type":"subscribe"}');
      assert.equal((await c.next()).type, 'subscribed');
      assert.equal((await c.next()).type, 'published');
      c.ws.close();
    });
  });
});

void describe('WS route on the HTTP listener', () => {
  void test('params, subprotocol selection and authorization; HTTP routes keep working', async () => {
    const router = new Router();
    router.add({ method: 'GET', path: '/healthz', handler: () => ({ status: 200, json: { status: 'ok' } }) });
    const opened: WsConn[] = [];
    const listener = await startHttpListener({
      host: '127.0.0.1',
      port: 0,
      router,
      logger,
      wsRoutes: [
        {
          path: '/api/v1/pty/:id',
          protocols: ['pty-ws.v1'],
          authorize: async (req) => {
            // An authorizer that answers later, as a real one (a lookup) does.
            await sleep(5);
            if (req.params.id === 'forbidden') throw new SvcError('route.forbidden', 'not yours');
          },
          handlers: {
            open: (conn) => {
              opened.push(conn);
              conn.send(JSON.stringify({ id: conn.request.params.id, protocol: conn.protocol }));
            },
            message: (conn, data) => void conn.send(Buffer.from(data).toString('utf8')),
          },
        },
      ],
    });
    try {
      const base = `ws://127.0.0.1:${listener.port}/api/v1/pty`;
      const c = await connect(`${base}/s%201`, ['pty-ws.v1']);
      assert.equal(c.ws.protocol, 'pty-ws.v1');
      assert.deepEqual(await c.next(), { id: 's 1', protocol: 'pty-ws.v1' });
      c.ws.send('{"echo":true}');
      assert.deepEqual(await c.next(), { echo: true });
      assert.equal(listener.openStreams().ws, 1);
      assert.equal(await refusedStatus(`${base}/forbidden`, ['pty-ws.v1']), 403);
      assert.equal(await refusedStatus(`${base}/x`, ['other.v9']), 400);
      assert.equal((await fetch(`http://127.0.0.1:${listener.port}/healthz`)).status, 200);
      const closed = c.closed;
      await listener.close();
      assert.equal(await closed, 1001);
      assert.equal(opened[0]?.closed, true);
    } finally {
      await listener.close();
    }
  });
});
