import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { SvcError } from '../../../src/core/errors.js';
import { SessionRegistry, type SessionStateChange } from '../../../src/sessions/session-registry.js';
import { SessionCause, sessionTransitionsMarkdown } from '../../../src/sessions/session-state.js';
import { kSessionsSchemaVersion, SESSIONS_DB_FILE, SessionStore } from '../../../src/sessions/session-store.js';
import { createResponseOf, listEntryOf, sessionSeq, withCallerUrls } from '../../../src/sessions/session-types.js';

const URLS = { httpBaseUrl: 'http://127.0.0.1:8122', wsBaseUrl: 'ws://127.0.0.1:8121' };

describe('SessionRegistry', () => {
  let dir: string;
  let stores: SessionStore[];
  const open = (onStateChange?: (c: SessionStateChange) => void): SessionRegistry => {
    const store = new SessionStore(join(dir, 'sessions'));
    stores.push(store);
    return new SessionRegistry({ store, ...(onStateChange && { onStateChange }) });
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-reg-'));
    stores = [];
  });
  afterEach(() => {
    for (const s of stores) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('create names the session terminal-<8 hex> by default and indexes it by id, command and name', () => {
    const reg = open();
    const r = reg.create({ agentId: 'a1', instanceId: 'i1', command: 'bash', cols: 80, rows: 24 });
    assert.match(r.sessionName, /^terminal-[0-9a-f]{8}$/);
    assert.equal(r.sessionName, `terminal-${r.sessionId.replace(/-/g, '').slice(0, 8)}`);
    assert.equal(r.state, 'starting');
    assert.notEqual(r.commandId, r.sessionId);
    assert.equal(reg.get(r.sessionId), r);
    assert.equal(reg.byCommandId(r.commandId), r);
    assert.equal(reg.byName('a1', r.sessionName), r);
    assert.equal(reg.getForAgent('other', r.sessionId), undefined);
    assert.deepEqual(reg.listByAgent('a1'), [r]);
  });

  test('a session name is unique per agent among live sessions (409 session.name_in_use), free again once closed', () => {
    const reg = open();
    const a = reg.create({ agentId: 'a1', instanceId: 'a1', sessionName: 'build', command: 'bash', cols: 80, rows: 24 });
    assert.throws(
      () => reg.create({ agentId: 'a1', instanceId: 'a1', sessionName: 'build', command: 'bash', cols: 80, rows: 24 }),
      (e: unknown) => e instanceof SvcError && e.code === 'session.name_in_use' && e.httpStatus === 409,
    );
    reg.create({ agentId: 'a2', instanceId: 'a2', sessionName: 'build', command: 'bash', cols: 80, rows: 24 });
    assert.ok(reg.transition(a.sessionId, ['starting'], 'closed', SessionCause.startFailed));
    assert.equal(reg.get(a.sessionId), undefined);
    reg.create({ agentId: 'a1', instanceId: 'a1', sessionName: 'build', command: 'bash', cols: 80, rows: 24 });
  });

  test('transitions follow the table and report each move; a forbidden move is refused', () => {
    const changes: string[] = [];
    const reg = open((c) => changes.push(`${c.from}->${c.to}:${c.cause}`));
    const r = reg.create({ agentId: 'a', instanceId: 'a', command: 'bash', cols: 80, rows: 24 });
    assert.ok(reg.transition(r.sessionId, ['starting'], 'running', SessionCause.ptyStarted));
    assert.equal(reg.transition(r.sessionId, ['starting'], 'detached', SessionCause.agentDisconnected), false);
    assert.ok(reg.transition(r.sessionId, ['running'], 'detached', SessionCause.agentDisconnected));
    assert.ok(reg.transition(r.sessionId, ['detached'], 'running', SessionCause.reported));
    assert.ok(reg.transition(r.sessionId, ['running'], 'closed', SessionCause.exited));
    assert.equal(reg.transition(r.sessionId, ['closed'], 'running', SessionCause.reported), false);
    assert.deepEqual(changes, [
      'starting->running:pty_started',
      'running->detached:agent_disconnected',
      'detached->running:reported',
      'running->closed:exited',
    ]);
    assert.match(sessionTransitionsMarkdown(), /\| detached \| running \| reported, reattached \|/);
  });

  test('the registry survives a restart: a second registry on the same directory has every live session, detached', () => {
    const reg = open();
    const kept = reg.create({ agentId: 'a1', instanceId: 'inst-1', sessionName: 'keep', command: 'top', cols: 80, rows: 24 });
    reg.transition(kept.sessionId, ['starting'], 'running', SessionCause.ptyStarted);
    reg.setSize(kept.sessionId, 132, 43);
    const moved = reg.replaceCommand(kept.sessionId);
    const gone = reg.create({ agentId: 'a1', instanceId: 'inst-1', command: 'bash', cols: 80, rows: 24 });
    reg.transition(gone.sessionId, ['starting'], 'closed', SessionCause.startFailed);
    stores[0]?.close();

    const changes: SessionStateChange[] = [];
    const again = open((c) => changes.push(c));
    assert.equal(again.size, 1);
    const r = again.get(kept.sessionId);
    assert.deepEqual(r, { ...moved, cols: 132, rows: 43, state: 'detached' });
    assert.equal(r?.generation, 1);
    assert.equal(again.byCommandId(moved.commandId)?.sessionId, kept.sessionId);
    assert.equal(again.byName('a1', 'keep')?.sessionId, kept.sessionId);
    assert.equal(changes[0]?.cause, 'server_restarted');
  });

  test('the store is SQLite in WAL mode with synchronous=FULL, in a 0700 directory; corrupt rows are skipped', () => {
    const reg = open();
    reg.create({ agentId: 'a', instanceId: 'a', command: 'bash', cols: 80, rows: 24 });
    assert.equal(statSync(join(dir, 'sessions')).mode & 0o777, 0o700);
    const db = new Database(join(dir, 'sessions', SESSIONS_DB_FILE));
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    db.prepare(
      "INSERT INTO sessions (session_id, agent_id, record, updated_at_ms) VALUES ('bad1', 'a', '{not json', 0), ('bad2', 'a', '{\"v\":1,\"sessionId\":\"bad2\"}', 0)",
    ).run();
    db.close();
    stores[0]?.close();
    const corrupt: string[] = [];
    const store = new SessionStore(join(dir, 'sessions'), { onCorrupt: (_w, id, reason) => corrupt.push(`${id}: ${reason}`) });
    stores.push(store);
    assert.equal(new SessionRegistry({ store }).size, 1);
    assert.deepEqual(corrupt.map((c) => c.split(':')[0]).sort(), ['bad1', 'bad2']);
  });

  test('create response and list entry carry every spec field and the decided URLs', () => {
    const reg = open();
    const r = reg.create({ agentId: 'a1', instanceId: 'inst-1', command: 'claude -p --output-format stream-json', cols: 80, rows: 24 });
    const c = createResponseOf(r, URLS);
    assert.equal(c.pty_ws_url, `ws://127.0.0.1:8122/api/v1/sessions/${r.sessionId}/pty`);
    assert.equal(c.orchestrator_observer_url, `ws://127.0.0.1:8122/ws/sessions/${r.sessionId}/orchestrate?role=observer`);
    assert.equal(c.orchestrator_controller_url, `ws://127.0.0.1:8122/ws/sessions/${r.sessionId}/orchestrate?role=controller`);
    assert.equal(c.ws_endpoint, 'ws://127.0.0.1:8121/');
    assert.deepEqual(c.join_message, { type: 'join_session', session_id: r.sessionId, role: 'controller' });
    assert.equal(c.pty_ws_subprotocol, 'pty-ws.v1');
    assert.equal(c.default_role, 'observer');
    assert.deepEqual(
      [c.session_backend, c.session_class, c.supported_session_backends, c.supported_session_classes],
      ['tmux', 'managed', ['tmux'], ['managed']],
    );
    assert.deepEqual([c.observe_supported, c.drive_supported, c.reattach_supported], [true, true, true]);
    assert.equal(c.chat_source, 'stream-json');
    // Relative: same origin and scheme as the request, resolved by the client against the URL it called.
    assert.equal(c.chat_stream_url, `/api/v1/agent-output/chat?command_id=${r.commandId}&session_id=${r.sessionId}`);
    const other = withCallerUrls(c, { httpBaseUrl: 'https://box.example', wsBaseUrl: 'ws://box.example:8121' });
    assert.deepEqual(
      [other.pty_ws_url, other.orchestrator_observer_url, other.ws_endpoint, other.chat_stream_url, other.session_id],
      [
        `wss://box.example/api/v1/sessions/${r.sessionId}/pty`,
        `wss://box.example/ws/sessions/${r.sessionId}/orchestrate?role=observer`,
        'ws://box.example:8121/',
        c.chat_stream_url,
        r.sessionId,
      ],
    );
    const e = listEntryOf(
      r,
      {
        membership: { controllers: [], observers: ['c1'], attachment_count: 1 },
        agentConnected: true,
        hasScreen: true,
        newestSeq: 7,
        maxClientLagBytes: 0,
      },
      URLS,
    );
    assert.equal(e.session_type, 'interactive');
    assert.equal(e.created_at_secs, Math.floor(r.createdAtMs / 1000));
    assert.deepEqual(e.liveness, { agent_connected: true, has_screen: true, replay_newest_seq: 7, max_client_lag: 0 });
    const plain = createResponseOf(reg.create({ agentId: 'a1', instanceId: 'i', command: 'bash', cols: 80, rows: 24 }), URLS);
    assert.deepEqual([plain.chat_source, plain.chat_stream_url], ['none', null]);
  });

  test("a join's session: the client's id, its backend and class kept across a restart; a live id is not taken twice (409)", () => {
    const reg = open();
    const id = '0f1e2d3c-4b5a-4968-8776-655443322110';
    const r = reg.create({
      sessionId: id,
      agentId: 'a1',
      instanceId: 'i1',
      command: '',
      cols: 100,
      rows: 30,
      sessionBackend: 'screen',
      sessionClass: 'managed',
    });
    assert.deepEqual([r.sessionId, r.sessionBackend, r.sessionClass, r.sessionName], [id, 'screen', 'managed', 'terminal-0f1e2d3c']);
    assert.throws(
      () => reg.create({ sessionId: id, agentId: 'a2', instanceId: 'i2', command: 'x', cols: 80, rows: 24 }),
      (e: unknown) => e instanceof SvcError && e.code === 'session.id_in_use' && e.httpStatus === 409,
    );
    const n = reg.create({
      agentId: 'a1',
      instanceId: 'i1',
      command: 'top',
      cols: 80,
      rows: 24,
      sessionBackend: 'native',
      sessionClass: 'direct',
    });
    const plain = reg.create({ agentId: 'a1', instanceId: 'i1', command: 'bash', cols: 80, rows: 24 });
    assert.deepEqual([plain.sessionBackend, plain.sessionClass], ['tmux', 'managed']);
    stores[0]?.close();
    const again = open();
    assert.deepEqual(
      [id, n.sessionId, plain.sessionId].map((s) => `${again.get(s)?.sessionBackend}/${again.get(s)?.sessionClass}`),
      ['screen/managed', 'native/direct', 'tmux/managed'],
    );
    assert.equal(createResponseOf(again.get(n.sessionId) ?? n, URLS).reattach_supported, false);
    assert.equal(createResponseOf(again.get(id) ?? r, URLS).session_backend, 'screen');
  });

  test('a store written before backends were stored (schema 0) opens as tmux/managed sessions, migrated once', () => {
    mkdirSync(join(dir, 'sessions'), { recursive: true, mode: 0o700 });
    const old = new Database(join(dir, 'sessions', SESSIONS_DB_FILE));
    old.exec(
      'CREATE TABLE sessions (session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, record TEXT NOT NULL, updated_at_ms INTEGER NOT NULL)',
    );
    const rec = {
      v: 1,
      sessionId: 's-old',
      agentId: 'a1',
      instanceId: 'i1',
      commandId: 'c-old',
      generation: 2,
      sessionName: 'legacy',
      command: 'bash',
      sessionType: 'interactive',
      sessionBackend: 'tmux',
      sessionClass: 'managed',
      createdAtMs: 1,
      state: 'running',
      cols: 80,
      rows: 24,
    };
    old.prepare('INSERT INTO sessions VALUES (?, ?, ?, ?)').run('s-old', 'a1', JSON.stringify(rec), 1);
    old.close();
    const reg = open();
    assert.equal(stores[0]?.schemaVersion, kSessionsSchemaVersion);
    const r = reg.get('s-old');
    assert.deepEqual([r?.sessionBackend, r?.sessionClass, r?.generation, r?.state], ['tmux', 'managed', 2, 'detached']);
    stores[0]?.close();
    const columns = new Database(join(dir, 'sessions', SESSIONS_DB_FILE), { readonly: true });
    assert.deepEqual(columns.prepare('SELECT session_backend, session_class FROM sessions').all(), [
      { session_backend: 'tmux', session_class: 'managed' },
    ]);
    columns.close();
    assert.equal(open().get('s-old')?.sessionName, 'legacy');
  });

  test('session seqs stay ordered across generations', () => {
    assert.ok(sessionSeq(1, 1) > sessionSeq(0, 2 ** 31));
    assert.equal(sessionSeq(0, 5), 5);
    assert.ok(Number.isSafeInteger(sessionSeq(1_000_000, 2 ** 32 - 1)));
  });
});
