/**
 * PtyConnection's side of pty-ws.v1, over a scripted socket with the browser WebSocket API
 * (the constructor is what the client takes as a parameter; the real server is covered by the
 * session attach integration test).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { base64ToBytes, bytesToBase64 } from '../../../src/client/base64.js';
import type { WebSocketLike } from '../../../src/client/http-transport.js';
import { PTY_WS_SUBPROTOCOL, PtyConnection } from '../../../src/client/pty-ws.js';

class ScriptedSocket implements WebSocketLike {
  static last: ScriptedSocket | undefined;
  readyState = 0;
  protocol = '';
  binaryType = 'blob';
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  readonly sent: Record<string, unknown>[] = [];
  constructor(
    readonly url: string,
    readonly protocols?: string | string[],
  ) {
    ScriptedSocket.last = this;
  }
  send(data: string | Uint8Array | ArrayBuffer): void {
    this.sent.push(JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data)) as Record<string, unknown>);
  }
  close(code = 1000, reason = ''): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
  // Server side of the script.
  open(): void {
    this.readyState = 1;
    this.protocol = PTY_WS_SUBPROTOCOL;
    this.onopen?.({});
  }
  serverSends(frame: Record<string, unknown>): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
}

describe('PtyConnection', () => {
  test('joins after binding_hello with the requested role and size, then forwards output and input', () => {
    const out: string[] = [];
    const roles: string[] = [];
    const conn = new PtyConnection(ScriptedSocket, 'ws://h/api/v1/sessions/s1/pty', {
      role: 'controller',
      cols: 100,
      rows: 30,
      clientLabel: 'sbx alice',
      onRole: (granted, info) => roles.push(`${info.requested}->${granted}`),
      onOutput: (bytes, seq) => out.push(`${seq}:${new TextDecoder().decode(bytes)}`),
    });
    const ws = ScriptedSocket.last as ScriptedSocket;
    assert.equal(ws.protocols, 'pty-ws.v1');
    ws.open();
    ws.serverSends({ op: 'binding_hello', binding: 'pty-ws.v1', version: 1 });
    assert.deepEqual(ws.sent[0], {
      op: 'pty.join_session',
      role: 'controller',
      terminal_size: { cols: 100, rows: 30 },
      client_label: 'sbx alice',
    });
    ws.serverSends({ op: 'pty.role_assigned', role: 'controller', requested_role: 'controller' });
    assert.equal(conn.role, 'controller');
    assert.deepEqual(roles, ['controller->controller']);
    // A granted controller reports its size.
    assert.deepEqual(ws.sent[1], { op: 'pty.session_resize', cols: 100, rows: 30 });
    ws.serverSends({ op: 'pty.output', seq: 7, data: bytesToBase64(new TextEncoder().encode('héllo')) });
    assert.deepEqual(out, ['7:héllo']);
    assert.equal(conn.lastSeq, 7);
    assert.equal(conn.input('ls\r'), true);
    const input = ws.sent.find((f) => f['op'] === 'pty.session_input') as { data: string };
    assert.equal(new TextDecoder().decode(base64ToBytes(input.data)), 'ls\r');
  });

  test('answers pings, resumes from replayFrom, and reports replay resets and the end of the session', () => {
    const events: string[] = [];
    new PtyConnection(ScriptedSocket, 'ws://h/x', {
      role: 'observer',
      cols: 80,
      rows: 24,
      replayFrom: 42,
      onReplay: (r) => events.push(`replay ${r.fromSeq}-${r.toSeq} reset=${r.reset}`),
      onExit: (e) => events.push(`exit ${e.exitCode} ${e.reason}`),
    });
    const ws = ScriptedSocket.last as ScriptedSocket;
    ws.open();
    ws.serverSends({ op: 'binding_hello' });
    assert.equal(ws.sent[0]?.['replay_from'], 42);
    ws.serverSends({ op: 'ping', id: 5 });
    assert.deepEqual(ws.sent.at(-1), { op: 'pong', id: 5 });
    ws.serverSends({ op: 'pty.replay', from_seq: 42, to_seq: 50, reset: false });
    ws.serverSends({ op: 'pty.closed', exit_code: 0, reason: 'exited' });
    assert.deepEqual(events, ['replay 42-50 reset=false', 'exit 0 exited']);
  });

  test('a downgraded controller request is reported, and an observer cannot type or resize', async () => {
    const roles: string[] = [];
    const conn = new PtyConnection(ScriptedSocket, 'ws://h/x', {
      role: 'controller',
      cols: 80,
      rows: 24,
      onRole: (g, i) => roles.push(`${i.requested}->${g}:${i.reason ?? ''}`),
    });
    const ws = ScriptedSocket.last as ScriptedSocket;
    ws.open();
    ws.serverSends({ op: 'binding_hello' });
    ws.serverSends({ op: 'pty.role_assigned', role: 'observer', requested_role: 'controller', reason: 'lease_held' });
    assert.deepEqual(roles, ['controller->observer:lease_held']);
    assert.equal(conn.input('x'), false);
    assert.equal(conn.resize(120, 40), false);
    assert.equal(ws.sent.filter((f) => f['op'] !== 'pty.join_session').length, 0);
    assert.equal(conn.requestRole('controller'), true);
    assert.deepEqual(ws.sent.at(-1), { op: 'pty.request_role', role: 'controller' });
    conn.close();
    assert.deepEqual(await conn.closed(), { code: 1000, reason: 'client closed' });
  });

  test('ignores frames that are not JSON objects and reports error frames', () => {
    const errors: string[] = [];
    new PtyConnection(ScriptedSocket, 'ws://h/x', {
      role: 'observer',
      cols: 80,
      rows: 24,
      onError: (c, m, fatal) => errors.push(`${c}: ${m} ${fatal}`),
    });
    const ws = ScriptedSocket.last as ScriptedSocket;
    ws.open();
    ws.onmessage?.({ data: 'not json' });
    ws.onmessage?.({ data: '[1,2]' });
    ws.serverSends({ op: 'error', code: 'session_closed', message: 'gone', fatal: true });
    assert.deepEqual(errors, ['session_closed: gone true']);
  });
});
