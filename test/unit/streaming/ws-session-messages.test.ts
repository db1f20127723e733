/**
 * The dashboard WebSocket's fleet and session messages without sockets: a fake connection, fake
 * session hubs that grant one controller lease, and a fake sessions hook. What a reference
 * dashboard would notice: the replies it reads, its keystrokes reaching the PTY (or refused,
 * once, while someone else holds the lease), several sessions on one connection, one session's
 * end leaving the others and the connection alone.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { WsConn, WsSendStatus } from '../../../src/http/ws-server.js';
import type { RoleInfo, SessionDialect } from '../../../src/sessions/session-dialect.js';
import type { WsSessionIds } from '../../../src/streaming/ws-session-dialect.js';
import { WsSessionMessages, type WsSessionHub, type WsSessionsHook } from '../../../src/streaming/ws-session-messages.js';
import type { SessionAttachmentSink } from '../../../src/streaming/ws-session-sink.js';
import type { SessionCreated, SessionCreateRequest, SessionList } from '../../../src/wire/sessions.js';
import { LOCAL_PEER } from '../../../src/http/types.js';

let nextConnId = 1;

class FakeConn implements WsConn {
  readonly id = nextConnId++;
  readonly request = {
    method: 'GET',
    path: '/',
    query: new URLSearchParams(),
    headers: { host: '127.0.0.1:8121' },
    params: {},
    body: undefined,
    rawBody: null,
    remoteAddress: '127.0.0.1',
    peer: LOCAL_PEER,
  };
  readonly protocol = '';
  readonly got: Array<Record<string, unknown>> = [];
  closed = false;
  readonly drains: Array<() => void> = [];
  send(data: Uint8Array | string): WsSendStatus {
    this.got.push(JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString()) as Record<string, unknown>);
    return 'sent';
  }
  subscribe(): void {}
  unsubscribe(): void {}
  close(): void {
    this.closed = true;
  }
  bufferedAmount(): number {
    return 0;
  }
  onDrain(cb: () => void): void {
    this.drains.push(cb);
  }
  onClose(): void {}
  ping(): void {}
  onPong(): void {}
  /** Messages of `type` received so far. */
  of(type: string): Array<Record<string, unknown>> {
    return this.got.filter((m) => m['type'] === type);
  }
}

interface Client {
  readonly sink: SessionAttachmentSink;
  readonly dialect: SessionDialect;
}

/** A session hub with one controller lease and nothing else. */
class FakeHub implements WsSessionHub {
  closed = false;
  controller: number | undefined;
  readonly clients = new Map<number, Client>();
  readonly inputs: string[] = [];
  readonly resizes: Array<[number, number]> = [];
  readonly joins: unknown[] = [];
  disconnected = 0;
  open(sink: SessionAttachmentSink, dialect: SessionDialect): void {
    this.clients.set(sink.id, { sink, dialect });
  }
  #grant(sink: SessionAttachmentSink, requested: 'controller' | 'observer'): void {
    const c = this.clients.get(sink.id);
    if (c === undefined) return;
    if (requested === 'controller' && this.controller === undefined) this.controller = sink.id;
    const role = this.controller === sink.id ? 'controller' : 'observer';
    const info: RoleInfo = { role, clientId: `c-${sink.id}`, requested, downgraded: requested !== role, reason: undefined };
    const out = c.dialect.role(info, 0, undefined);
    if (out !== undefined) sink.send(out);
  }
  join(sink: SessionAttachmentSink, req: { role: 'controller' | 'observer' }): void {
    this.joins.push(req);
    this.#grant(sink, req.role);
  }
  requestRole(sink: SessionAttachmentSink, role: 'controller' | 'observer'): void {
    this.#grant(sink, role);
  }
  input(sink: SessionAttachmentSink, data: Uint8Array): void {
    if (this.controller !== sink.id) throw new Error('the messages must not type as an observer');
    this.inputs.push(Buffer.from(data).toString());
  }
  resize(_sink: SessionAttachmentSink, cols: number, rows: number): void {
    this.resizes.push([cols, rows]);
  }
  #remove(sink: SessionAttachmentSink): void {
    this.clients.delete(sink.id);
    if (this.controller === sink.id) this.controller = undefined;
  }
  leave(sink: SessionAttachmentSink): void {
    this.#remove(sink);
    sink.close(1000, 'left');
  }
  alive(): void {}
  reply(sink: SessionAttachmentSink, frame: string): void {
    sink.send(frame);
  }
  disconnect(sink: SessionAttachmentSink): void {
    this.disconnected++;
    this.#remove(sink);
  }
  /** What the hub does to a client that stopped reading. */
  cutOff(sink: SessionAttachmentSink): void {
    const c = this.clients.get(sink.id);
    this.#remove(sink);
    sink.send(c?.dialect.error('SLOW_CONSUMER', 'too slow', 0, undefined) ?? '');
    sink.close(4413, 'slow consumer');
  }
}

function setup(now: { ms: number } = { ms: 0 }) {
  const sessions = new Map<string, WsSessionIds>();
  const hubs = new Map<string, FakeHub>();
  const created: SessionCreateRequest[] = [];
  const killed: string[] = [];
  const add = (ids: WsSessionIds): FakeHub => {
    sessions.set(ids.sessionId, ids);
    const hub = new FakeHub();
    hubs.set(ids.sessionId, hub);
    return hub;
  };
  const hook: WsSessionsHook = {
    agents: () => [{ id: 'agent-a', status: 'Ready', hostname: 'agent-a' }],
    list: (agentId) =>
      ({
        agent_id: agentId,
        sessions: [...sessions.values()]
          .filter((s) => s.agentId === agentId)
          .map((s) => ({
            session_id: s.sessionId,
            command_id: s.commandId,
            session_name: s.sessionName,
            session_type: 'interactive',
            state: 'running',
          })),
      }) as unknown as SessionList,
    create: (agentId, body) => {
      created.push(body);
      const n = sessions.size + 1;
      const ids = { sessionId: `s-${n}`, agentId, commandId: `cmd-${n}`, sessionName: body.session_name ?? `terminal-${n}` };
      add(ids);
      return Promise.resolve({ session_id: ids.sessionId, command_id: ids.commandId, session_name: ids.sessionName } as SessionCreated);
    },
    kill: (_agentId, sessionId) => {
      killed.push(sessionId);
      return Promise.resolve({ killed: true });
    },
    find(q) {
      for (const s of sessions.values()) {
        if (
          'sessionId' in q
            ? s.sessionId === q.sessionId
            : s.agentId === q.agentId && ('commandId' in q ? s.commandId === q.commandId : s.sessionName === q.sessionName)
        )
          return s;
      }
      return undefined;
    },
    hub: (id) => hubs.get(id),
  };
  const messages = new WsSessionMessages({ hook: () => hook, logger: pino({ level: 'silent' }), now: () => now.ms });
  return { messages, hubs, add, created, killed };
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('dashboard WebSocket session messages', () => {
  test('list_agents and list_sessions answer with the REST shapes the reference reads', () => {
    const { messages, add } = setup();
    add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'main' });
    const conn = new FakeConn();
    messages.message(conn, { type: 'list_agents' });
    messages.message(conn, { type: 'list_sessions', agent_id: 'agent-a' });
    assert.deepEqual(conn.of('agent_list')[0]?.['agents'], [{ id: 'agent-a', status: 'Ready', hostname: 'agent-a' }]);
    const list = conn.of('session_list')[0];
    assert.equal(list?.['agent_id'], 'agent-a');
    assert.deepEqual(list?.['sessions'], [
      { session_id: 's-1', command_id: 'cmd-1', session_name: 'main', session_type: 'interactive', state: 'running', running: true },
    ]);
  });

  test('start_shell creates a session, attaches as controller and answers shell_started; output and input use its command id', async () => {
    const { messages, hubs, created } = setup();
    const conn = new FakeConn();
    messages.message(conn, { type: 'start_shell', agent_id: 'agent-a', cols: 100, rows: 30 });
    await settle();
    assert.deepEqual(created, [{ session_name: 'main' }], 'the default command, in the session main');
    const started = conn.of('shell_started')[0];
    assert.deepEqual(started, {
      type: 'shell_started',
      agent_id: 'agent-a',
      command_id: 'cmd-1',
      session_id: 's-1',
      session_name: 'main',
      role: 'controller',
    });
    const hub = hubs.get('s-1')!;
    assert.deepEqual(hub.joins, [{ role: 'controller', cols: 100, rows: 30 }], "the page's size goes with the join");
    messages.message(conn, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 'echo hi\r' });
    messages.message(conn, { type: 'pty_resize', agent_id: 'agent-a', command_id: 'cmd-1', cols: 120, rows: 40 });
    assert.deepEqual(hub.inputs, ['echo hi\r']);
    assert.deepEqual(hub.resizes, [[120, 40]]);
    assert.equal(conn.of('error').length, 0, JSON.stringify(conn.of('error')));
  });

  test('start_shell twice at once (the reference does on a fresh pane), and from a second page: one session main', async () => {
    const { messages, hubs, created } = setup();
    const a = new FakeConn();
    const b = new FakeConn();
    messages.message(a, { type: 'start_shell', agent_id: 'agent-a', cols: 80, rows: 24 });
    messages.message(a, { type: 'start_shell', agent_id: 'agent-a', cols: 80, rows: 24 });
    await settle();
    messages.message(b, { type: 'start_shell', agent_id: 'agent-a', cols: 80, rows: 24 });
    assert.equal(created.length, 1, 'one create');
    assert.deepEqual(
      [...a.of('shell_started'), ...b.of('shell_started')].map((m) => [m['session_id'], m['role']]),
      [
        ['s-1', 'controller'],
        ['s-1', 'controller'],
        ['s-1', 'observer'],
      ],
    );
    assert.equal(hubs.get('s-1')!.clients.size, 2, 'one attachment per connection');
    assert.deepEqual(
      b.of('error').map((e) => e['code']),
      ['PERMISSION_DENIED'],
      'the second page is told it watches',
    );
  });

  test('create_session: interactive only; command, args and working_dir become one quoted command line', async () => {
    const { messages, created } = setup();
    const conn = new FakeConn();
    messages.message(conn, {
      type: 'create_session',
      agent_id: 'agent-a',
      session_name: 'bg',
      session_type: 'background',
      command: 'sleep',
      args: ['9'],
    });
    assert.match(String(conn.of('error')[0]?.['message']), /session_type "background" is not supported/);
    messages.message(conn, {
      type: 'create_session',
      agent_id: 'agent-a',
      session_name: 'work',
      session_type: 'interactive',
      command: 'grep',
      args: ["it's", 'x'],
      working_dir: '/srv/my dir',
      cols: 80,
      rows: 24,
    });
    await settle();
    assert.deepEqual(created, [{ session_name: 'work', command: `cd -- '/srv/my dir' && exec grep 'it'\\''s' x` }]);
    assert.deepEqual(conn.of('session_created')[0], {
      type: 'session_created',
      agent_id: 'agent-a',
      session_name: 'work',
      session_type: 'interactive',
      command_id: 'cmd-1',
      session_id: 's-1',
      role: 'controller',
    });
  });

  test('join_session attaches in the frames form with the role asked; replay_from is the first seq wanted', () => {
    const { messages, hubs, add } = setup();
    add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'main' });
    const conn = new FakeConn();
    messages.message(conn, { type: 'join_session', session_id: 's-1', role: 'observer', replay_from: 5 });
    messages.message(conn, { type: 'join_session', session_id: 'nope', role: 'observer' });
    assert.deepEqual(hubs.get('s-1')!.joins, [{ role: 'observer', replayFrom: 4, clientLabel: `dashboard-ws-${conn.id}` }]);
    assert.deepEqual(conn.of('session_joined')[0], { type: 'session_joined', session_id: 's-1', role: 'observer', current_seq: 0 });
    assert.deepEqual(
      conn.of('error').map((e) => e['code']),
      ['session.not_found'],
    );
  });

  test('an observer that types asks for the lease: granted when free, else refused once per 2 s and nothing typed', () => {
    const now = { ms: 10_000 };
    const { messages, hubs, add } = setup(now);
    const hub = add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'main' });
    const a = new FakeConn();
    const b = new FakeConn();
    messages.message(a, { type: 'join_session', session_id: 's-1', role: 'observer' });
    messages.message(b, { type: 'join_session', session_id: 's-1', role: 'observer' });
    messages.message(a, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 'ls\r' });
    assert.deepEqual(hub.inputs, ['ls\r'], 'the lease was free: a got it and typed');
    assert.deepEqual(a.of('session_frame').at(-1)?.['role'], 'controller');
    for (const key of 'pwd') messages.message(b, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: key });
    messages.message(b, { type: 'pty_resize', agent_id: 'agent-a', command_id: 'cmd-1', cols: 90, rows: 20 });
    assert.deepEqual(hub.inputs, ['ls\r'], "b's keystrokes did not reach the PTY");
    assert.deepEqual(hub.resizes, [], "an observer's resize is ignored");
    assert.deepEqual(
      b.of('error').map((e) => e['code']),
      ['PERMISSION_DENIED'],
      'said once',
    );
    now.ms += 2000;
    messages.message(b, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 'x' });
    assert.equal(b.of('error').length, 2, 'and again after 2 s');
    messages.closed(a);
    now.ms += 2000;
    messages.message(b, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 'y' });
    assert.deepEqual(hub.inputs, ['ls\r', 'y'], 'once a left, b got the lease');
    assert.equal(hubs.get('s-1')!.controller !== undefined, true);
  });

  test('input for a session this connection is not attached to is an error', () => {
    const { messages, add } = setup();
    add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'main' });
    const conn = new FakeConn();
    messages.message(conn, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 'x' });
    messages.message(conn, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-404', data: 'x' });
    assert.deepEqual(
      conn.of('error').map((e) => e['code']),
      ['request.invalid', 'session.not_found'],
    );
  });

  test('one connection, two sessions: the hub cutting one off leaves the other and the connection', () => {
    const { messages, add } = setup();
    const one = add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'one' });
    const two = add({ sessionId: 's-2', agentId: 'agent-a', commandId: 'cmd-2', sessionName: 'two' });
    const conn = new FakeConn();
    messages.message(conn, { type: 'attach_session', agent_id: 'agent-a', session_name: 'one', cols: 80, rows: 24 });
    messages.message(conn, { type: 'attach_session', agent_id: 'agent-a', session_name: 'two', cols: 80, rows: 24 });
    assert.deepEqual(
      conn.of('session_attached').map((m) => [m['session_name'], m['command_id'], m['role']]),
      [
        ['one', 'cmd-1', 'controller'],
        ['two', 'cmd-2', 'controller'],
      ],
    );
    assert.equal(messages.attachmentCount(conn), 2);
    const sinkOne = [...one.clients.values()][0]!.sink;
    one.cutOff(sinkOne);
    assert.equal(conn.closed, false, 'the connection stays');
    assert.equal(messages.attachmentCount(conn), 1);
    assert.deepEqual(conn.of('session_left')[0], { type: 'session_left', session_id: 's-1', code: 4413, reason: 'slow consumer' });
    assert.equal(conn.of('error').at(-1)?.['code'], 'SLOW_CONSUMER');
    messages.message(conn, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-2', data: 'still here\r' });
    assert.deepEqual(two.inputs, ['still here\r']);
    for (const cb of conn.drains) cb();
    messages.closed(conn);
    assert.equal(two.disconnected, 1, 'the connection closing leaves the remaining session');
    assert.equal(one.disconnected, 0, 'not twice');
  });

  test('detach, leave, kill; trigger_reconciliation and an unavailable server are errors', async () => {
    const { messages, add, killed } = setup();
    const hub = add({ sessionId: 's-1', agentId: 'agent-a', commandId: 'cmd-1', sessionName: 'main' });
    const conn = new FakeConn();
    messages.message(conn, { type: 'attach_session', agent_id: 'agent-a', session_name: 'main' });
    messages.message(conn, { type: 'detach_session', agent_id: 'agent-a', session_name: 'main' });
    assert.equal(hub.clients.size, 0);
    assert.deepEqual(conn.of('session_detached')[0], {
      type: 'session_detached',
      agent_id: 'agent-a',
      session_name: 'main',
      session_id: 's-1',
    });
    messages.message(conn, { type: 'kill_session', agent_id: 'agent-a', session_name: 'main', signal: 9 });
    await settle();
    assert.deepEqual(killed, ['s-1']);
    assert.deepEqual(conn.of('session_killed')[0], {
      type: 'session_killed',
      agent_id: 'agent-a',
      session_name: 'main',
      session_id: 's-1',
    });
    messages.message(conn, { type: 'trigger_reconciliation', agent_id: 'agent-a' });
    assert.match(String(conn.of('error').at(-1)?.['message']), /reconciles .* each time the agent registers/);
    const none = new WsSessionMessages({ hook: () => undefined, logger: pino({ level: 'silent' }) });
    none.message(conn, { type: 'list_agents' });
    assert.equal(conn.of('error').at(-1)?.['code'], 'server.unavailable');
    messages.message(conn, { type: 'join_session', session_id: 's-1' });
    messages.message(conn, { type: 'send_input', agent_id: 'agent-a', command_id: 'cmd-1', data: 42 });
    assert.deepEqual(conn.of('error').at(-1), {
      type: 'error',
      code: 'request.invalid',
      message: 'data must be a string',
      agent_id: 'agent-a',
    });
  });
});
