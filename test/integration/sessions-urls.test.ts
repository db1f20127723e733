/**
 * The URLs of the session create record and list entry are the caller's (README "Decisions where
 * the spec is silent"): built from the request's Host (a proxy or tunnel keeps working), from the
 * forwarded headers of a trusted peer (loopback by default), and `ws_endpoint` is the WebSocket
 * listener, which a client reaches with exactly the URL the response gives.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import type { SessionCreated, SessionList } from '../../src/wire/sessions.js';
import { DEADLINE_MS } from '../support/wait.js';
import { useSessionsBed } from './sessions-harness.js';

const AGENT = 'sess-urls-1';

interface WsLike {
  on(event: 'message', cb: (data: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  on(event: 'unexpected-response', cb: (req: unknown, res: { statusCode: number }) => void): this;
  terminate(): void;
}
const WebSocketClient = createRequire(import.meta.url)('ws') as new (url: string, protocols?: string | string[]) => WsLike;

/** An HTTP request whose Host (and other headers) we choose: fetch does not let a caller set Host. */
function call<T>(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: T }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port: bed.srv.http,
        method,
        path,
        headers: {
          ...headers,
          ...(data !== undefined && { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as T }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** The first text message on `url`, or the reason there was none. */
function firstMessage(url: string, protocol?: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocketClient(url, protocol);
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no message on ${url} within ${DEADLINE_MS.process} ms`));
    }, DEADLINE_MS.process);
    const done = (f: () => void): void => {
      clearTimeout(timer);
      ws.terminate();
      f();
    };
    ws.on('message', (d) => done(() => resolve(JSON.parse(d.toString('utf8')) as Record<string, unknown>)));
    ws.on('unexpected-response', (_req, res) => done(() => reject(new Error(`${url}: HTTP ${res.statusCode} instead of an upgrade`))));
    ws.on('error', (err) => done(() => reject(err)));
    ws.on('close', (code) => done(() => reject(new Error(`${url}: closed ${code} before any message`))));
  });
}

const bed = useSessionsBed(AGENT);

void describe('session URLs are the caller’s', () => {
  test('a custom Host header: every URL of the create record and the list entry uses it', async () => {
    const host = { host: 'sandbox.tunnel.test:18122' };
    const created = await call<SessionCreated>('POST', `/api/v1/agents/${AGENT}/sessions`, host, {
      command: 'sleep 600 # --output-format stream-json',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.session_id;
    assert.equal(created.body.pty_ws_url, `ws://sandbox.tunnel.test:18122/api/v1/sessions/${id}/pty`);
    assert.equal(created.body.orchestrator_observer_url, `ws://sandbox.tunnel.test:18122/ws/sessions/${id}/orchestrate?role=observer`);
    assert.equal(created.body.orchestrator_controller_url, `ws://sandbox.tunnel.test:18122/ws/sessions/${id}/orchestrate?role=controller`);
    assert.equal(
      created.body.ws_endpoint,
      `ws://sandbox.tunnel.test:${bed.srv.ws}/`,
      'the WebSocket listener: the same host name, its own port',
    );
    assert.deepEqual(created.body.join_message, { type: 'join_session', session_id: id, role: 'controller' });
    assert.equal(created.body.chat_source, 'stream-json');
    assert.equal(created.body.chat_stream_url, `/api/v1/agent-output/chat?command_id=${created.body.command_id}&session_id=${id}`);

    const listed = await call<SessionList>('GET', `/api/v1/agents/${AGENT}/sessions`, { host: '[::1]:9' });
    const entry = listed.body.sessions.find((s) => s.session_id === id);
    assert.equal(entry?.pty_ws_url, `ws://[::1]:9/api/v1/sessions/${id}/pty`);
    assert.equal(entry?.ws_endpoint, `ws://[::1]:${bed.srv.ws}/`);

    // A loopback peer is a trusted proxy by default: its forwarded scheme and host count.
    const proxied = await call<SessionList>('GET', `/api/v1/agents/${AGENT}/sessions`, {
      host: '127.0.0.1:8122',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'sandbox.example.com',
    });
    const viaProxy = proxied.body.sessions.find((s) => s.session_id === id);
    assert.equal(viaProxy?.pty_ws_url, `wss://sandbox.example.com/api/v1/sessions/${id}/pty`);
    assert.equal(viaProxy?.ws_endpoint, `ws://sandbox.example.com:${bed.srv.ws}/`);

    // A Host that is not a host is never echoed: the listener's own address instead.
    const bad = await call<SessionList>('GET', `/api/v1/agents/${AGENT}/sessions`, { host: 'evil.example/x?y' });
    assert.equal(
      bad.body.sessions.find((s) => s.session_id === id)?.pty_ws_url,
      `ws://127.0.0.1:${bed.srv.http}/api/v1/sessions/${id}/pty`,
    );

    assert.equal((await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${id}?signal=KILL`)).status, 200);
  });

  test('ws_endpoint and pty_ws_url, exactly as returned, accept a WebSocket', async () => {
    const created = await bed.srv.json<SessionCreated>('POST', `/api/v1/agents/${AGENT}/sessions`, { command: 'sleep 600' });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const hello = await firstMessage(created.body.ws_endpoint);
    assert.equal(hello['type'], 'server_hello', JSON.stringify(hello));
    const binding = await firstMessage(created.body.pty_ws_url, created.body.pty_ws_subprotocol);
    assert.equal(binding['op'], 'binding_hello', JSON.stringify(binding));
    assert.equal((await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${created.body.session_id}?signal=KILL`)).status, 200);
  });
});
