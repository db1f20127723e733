/**
 * The dashboard WebSocket's fleet and session messages (spec 4.18's join_session, and the ones the
 * reference dashboard sends; README "Compatibility with the reference dashboard" has the table).
 * The WS hub (ws-hub.ts) hands them here; what they need of the server comes through the
 * {@link WsSessionsHook} the sessions component installs (src/sessions/ws-sessions-hook.ts).
 *
 * | message | effect | reply |
 * |---|---|---|
 * | list_agents | | {type:"agent_list", agents} (GET /api/v1/agents's) |
 * | list_sessions {agent_id} | | {type:"session_list", agent_id, sessions} (GET …/sessions's entries, plus `running`) |
 * | start_shell {agent_id, cols?, rows?} | attaches (legacy, controller) to the agent's session `main`, created if need be | {type:"shell_started", agent_id, command_id, session_id, session_name, role} |
 * | create_session {agent_id, session_name, session_type, command, args, working_dir, cols, rows} | creates that session and attaches likewise; interactive only | {type:"session_created", agent_id, session_name, session_type, command_id, session_id, role} |
 * | attach_session {agent_id, session_name, cols?, rows?} | attaches (legacy, controller) or asks for control | {type:"session_attached", agent_id, session_name, command_id, session_id, role} |
 * | join_session {session_id, role?, replay_from?} | attaches (frames, role asked; observer by default) | {type:"session_joined", session_id, role, current_seq} |
 * | detach_session {agent_id, session_name} / leave_session {session_id} | detaches | session_detached / session_left |
 * | kill_session {agent_id, session_name, signal?} | kills (DELETE …/sessions/{id}) | {type:"session_killed", agent_id, session_name, session_id} |
 * | send_input {agent_id, command_id, data} / session_input {session_id, data} | types `data` (UTF-8) | none; an error when refused |
 * | pty_resize {agent_id, command_id, cols, rows} / session_resize {session_id, cols, rows} | resizes the PTY (controller only) | none |
 *
 * Roles are the session's (one controller lease, spec part 3): typing from an attachment that is
 * not the controller first asks for the lease (at most every 2 s); when another client holds it
 * the keystrokes are dropped and `{type:"error", code:"PERMISSION_DENIED"}` says why. An
 * observer's pty_resize is ignored (the reference sends one whenever its window changes).
 * Errors: `{type:"error", code, message}` plus the agent_id or session_id concerned.
 */
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import type { RequestView } from '../http/types.js';
import type { WsConn } from '../http/ws-server.js';
import type { SessionDialect } from '../sessions/session-dialect.js';
import type { SessionCreated, SessionCreateRequest, SessionList, SessionSignal } from '../wire/sessions.js';
import { errorMessage } from '../util/error-message.js';
import { wsSessionDialect, type WsSessionForm, type WsSessionIds } from './ws-session-dialect.js';
import { SessionAttachmentSink } from './ws-session-sink.js';
import { commandLine, field, isSvcError, optionalInt, signalOf, type Fields } from './ws-session-values.js';

type Role = 'controller' | 'observer';

/** The session hub operations an attachment uses (src/sessions/session-hub.ts's SessionHub). */
export interface WsSessionHub {
  readonly closed: boolean;
  open(conn: SessionAttachmentSink, dialect: SessionDialect): void;
  join(
    conn: SessionAttachmentSink,
    req: { role: Role; clientLabel?: string; replayFrom?: number | null; cols?: number; rows?: number },
  ): void;
  input(conn: SessionAttachmentSink, data: Uint8Array): void;
  resize(conn: SessionAttachmentSink, cols: number, rows: number): void;
  requestRole(conn: SessionAttachmentSink, role: Role): void;
  leave(conn: SessionAttachmentSink): void;
  alive(conn: SessionAttachmentSink): void;
  reply(conn: SessionAttachmentSink, frame: string): void;
  disconnect(conn: SessionAttachmentSink): void;
}

/** What the messages need of the server, installed by the sessions component. Throwing SvcError is fine. */
export interface WsSessionsHook {
  /** GET /api/v1/agents's agents. */
  agents(): readonly unknown[];
  /** GET /api/v1/agents/{id}/sessions, with URLs for the caller of `req` (the upgrade request). */
  list(agentId: string, req: RequestView): SessionList;
  /** POST /api/v1/agents/{id}/sessions; rejects with SvcError. */
  create(agentId: string, body: SessionCreateRequest, req: RequestView): Promise<SessionCreated>;
  /** DELETE /api/v1/agents/{id}/sessions/{session}. */
  kill(agentId: string, sessionId: string, signal: SessionSignal): Promise<unknown>;
  /** A live session by id, or an agent's by command id or name. */
  find(
    q: { sessionId: string } | { agentId: string; commandId: string } | { agentId: string; sessionName: string },
  ): WsSessionIds | undefined;
  hub(sessionId: string): WsSessionHub | undefined;
}

interface Attachment {
  readonly sink: SessionAttachmentSink;
  readonly hub: WsSessionHub;
  readonly form: WsSessionForm;
  role: Role | undefined;
  /** When this attachment last asked for the controller lease to type. */
  askedMs: number;
}

const kAskAgainMs = 2000;
/** The session start_shell attaches to or creates (the reference's shell is tmux session main). */
const kShellSessionName = 'main';
const kReadOnly = 'read-only: another client holds the controller lease of this session; your keystrokes were not sent';

export const WS_SESSION_MESSAGE_TYPES: ReadonlySet<string> = new Set([
  'list_agents',
  'list_sessions',
  'start_shell',
  'create_session',
  'attach_session',
  'join_session',
  'detach_session',
  'leave_session',
  'kill_session',
  'send_input',
  'session_input',
  'pty_resize',
  'session_resize',
  'trigger_reconciliation',
]);

export class WsSessionMessages {
  readonly #hook: () => WsSessionsHook | undefined;
  readonly #log: Logger;
  readonly #now: () => number;
  /** connection id → session id → attachment */
  readonly #conns = new Map<number, Map<string, Attachment>>();
  /** start_shell creates in flight, by agent and name. */
  readonly #creating = new Map<string, Promise<WsSessionIds>>();

  constructor(o: { hook: () => WsSessionsHook | undefined; logger: Logger; now?: () => number }) {
    this.#hook = o.hook;
    this.#log = o.logger;
    this.#now = o.now ?? Date.now;
  }

  /** Attachments open now (tests). */
  attachmentCount(conn: Pick<WsConn, 'id'>): number {
    return this.#conns.get(conn.id)?.size ?? 0;
  }

  /** A message whose type is in {@link WS_SESSION_MESSAGE_TYPES}. */
  message(conn: WsConn, m: Fields): void {
    const type = m['type'] as string;
    const hook = this.#hook();
    for (const a of this.#conns.get(conn.id)?.values() ?? []) a.hub.alive(a.sink);
    try {
      if (hook === undefined) throw new SvcError('server.unavailable', 'sessions are not available on this server');
      this.#dispatch(conn, hook, type, m);
    } catch (err) {
      this.#fail(conn, err, m);
    }
  }

  /** The connection closed: its attachments leave their sessions. */
  closed(conn: Pick<WsConn, 'id'>): void {
    const atts = this.#conns.get(conn.id);
    if (atts === undefined) return;
    this.#conns.delete(conn.id);
    for (const a of atts.values()) {
      a.hub.disconnect(a.sink);
      a.sink.end();
    }
  }

  #dispatch(conn: WsConn, hook: WsSessionsHook, type: string, m: Fields): void {
    const send = (msg: Record<string, unknown>): void => void conn.send(JSON.stringify(msg));
    switch (type) {
      case 'list_agents':
        return send({ type: 'agent_list', agents: hook.agents() });
      case 'list_sessions': {
        const list = hook.list(field(m, 'agent_id'), conn.request);
        return send({
          type: 'session_list',
          agent_id: list.agent_id,
          sessions: list.sessions.map((s) => ({ ...s, running: s.state === 'running' })),
        });
      }
      case 'start_shell':
      case 'create_session':
        return this.#create(conn, hook, type, m);
      case 'attach_session': {
        const agentId = field(m, 'agent_id');
        const ids = this.#found(hook.find({ agentId, sessionName: field(m, 'session_name') }), agentId);
        return this.#drive(conn, hook, ids, this.#size(m), (role) => ({
          type: 'session_attached',
          agent_id: ids.agentId,
          session_name: ids.sessionName,
          command_id: ids.commandId,
          session_id: ids.sessionId,
          role,
        }));
      }
      case 'join_session': {
        const sessionId = field(m, 'session_id');
        const role = m['role'] ?? 'observer';
        if (role !== 'controller' && role !== 'observer')
          throw new SvcError('request.invalid', 'join_session role must be controller or observer');
        const from = m['replay_from'] === null ? undefined : optionalInt(m, 'replay_from', 0, Number.MAX_SAFE_INTEGER);
        const ids = hook.find({ sessionId });
        if (ids === undefined) throw new SvcError('session.not_found', `no live session ${sessionId}`);
        // The reference's replay_from is the first seq wanted; the hub's is the last one seen.
        const replayFrom = from === undefined ? null : Math.max(0, from - 1);
        this.#attach(conn, hook, ids, 'frames', { role, replayFrom, clientLabel: `dashboard-ws-${conn.id}` });
        return;
      }
      case 'detach_session': {
        const agentId = field(m, 'agent_id');
        const sessionName = field(m, 'session_name');
        const ids = hook.find({ agentId, sessionName });
        if (ids !== undefined) this.#leave(conn, ids.sessionId);
        return send({ type: 'session_detached', agent_id: agentId, session_name: sessionName, session_id: ids?.sessionId });
      }
      case 'leave_session': {
        const sessionId = field(m, 'session_id');
        this.#leave(conn, sessionId);
        return send({ type: 'session_left', session_id: sessionId });
      }
      case 'kill_session': {
        const agentId = field(m, 'agent_id');
        const ids = this.#found(hook.find({ agentId, sessionName: field(m, 'session_name') }), agentId);
        hook.kill(agentId, ids.sessionId, signalOf(m['signal'])).then(
          () => send({ type: 'session_killed', agent_id: agentId, session_name: ids.sessionName, session_id: ids.sessionId }),
          (err: unknown) => this.#fail(conn, err, m),
        );
        return;
      }
      case 'send_input':
      case 'session_input': {
        const a = this.#attachmentOf(conn, hook, m);
        const data = new TextEncoder().encode(field(m, 'data', { allowEmpty: true, maxLength: 64 * 1024 }));
        if (this.#mayDrive(a)) a.hub.input(a.sink, data);
        return;
      }
      case 'pty_resize':
      case 'session_resize': {
        const a = this.#attachmentOf(conn, hook, m);
        const size = this.#size(m);
        if (size.cols === undefined || size.rows === undefined) throw new SvcError('request.invalid', `${type} needs cols and rows`);
        if (a.role === 'controller' || type === 'session_resize') a.hub.resize(a.sink, size.cols, size.rows);
        return;
      }
      case 'trigger_reconciliation':
        throw new SvcError(
          'request.invalid',
          "sandboxd reconciles an agent's sessions each time the agent registers; there is nothing to trigger",
        );
    }
  }

  /**
   * start_shell: the agent's `main` session, created when it has none (one create at a time per
   * agent, so the reference's double start_shell on a fresh pane ends in one session, as its
   * attach-or-create shell did); create_session: a new session of that name.
   */
  #create(conn: WsConn, hook: WsSessionsHook, type: 'start_shell' | 'create_session', m: Fields): void {
    const agentId = field(m, 'agent_id');
    const size = this.#size(m);
    const body: SessionCreateRequest = {};
    if (type === 'create_session') {
      const kind = m['session_type'] ?? 'interactive';
      if (kind !== 'interactive') {
        throw new SvcError(
          'request.invalid',
          `session_type ${JSON.stringify(kind)} is not supported: sandboxd runs interactive tmux sessions; run headless or background work as a task (POST /api/v1/tasks)`,
        );
      }
      body.session_name = field(m, 'session_name');
      const command = commandLine(m);
      if (command !== undefined) body.command = command;
    } else body.session_name = kShellSessionName;
    const reply =
      (ids: WsSessionIds) =>
      (role: Role | undefined): Record<string, unknown> =>
        type === 'start_shell'
          ? {
              type: 'shell_started',
              agent_id: agentId,
              command_id: ids.commandId,
              session_id: ids.sessionId,
              session_name: ids.sessionName,
              role,
            }
          : {
              type: 'session_created',
              agent_id: agentId,
              session_name: ids.sessionName,
              session_type: 'interactive',
              command_id: ids.commandId,
              session_id: ids.sessionId,
              role,
            };
    const existing = type === 'start_shell' ? hook.find({ agentId, sessionName: kShellSessionName }) : undefined;
    if (existing !== undefined) return this.#drive(conn, hook, existing, size, reply(existing));
    const key = `${agentId}\u0000${body.session_name ?? ''}`;
    let creating = type === 'start_shell' ? this.#creating.get(key) : undefined;
    if (creating === undefined) {
      creating = hook.create(agentId, body, conn.request).then((c) => ({
        sessionId: c.session_id,
        agentId,
        commandId: c.command_id,
        sessionName: c.session_name,
      }));
      if (type === 'start_shell') {
        const mine = creating;
        this.#creating.set(key, mine);
        const forget = (): void => {
          if (this.#creating.get(key) === mine) this.#creating.delete(key);
        };
        mine.then(forget, forget);
      }
    }
    creating.then(
      (ids) => {
        if (conn.closed) return;
        try {
          this.#drive(conn, hook, ids, size, reply(ids));
        } catch (err) {
          this.#fail(conn, err, m);
        }
      },
      (err: unknown) => this.#fail(conn, err, m),
    );
  }

  /**
   * Attaches `conn` to drive the session (legacy form, controller), or, when it is attached
   * already (in either form, which it keeps), asks for the controller role; answers `reply`, and
   * says so when another client holds the lease. The page's size goes with the join (the agent
   * keeps a resize that reaches a PTY command still starting).
   */
  #drive(
    conn: WsConn,
    hook: WsSessionsHook,
    ids: WsSessionIds,
    size: { cols?: number; rows?: number },
    reply: (role: Role | undefined) => Record<string, unknown>,
  ): void {
    const a = this.#conns.get(conn.id)?.get(ids.sessionId);
    if (a === undefined) {
      this.#attach(conn, hook, ids, 'legacy', { role: 'controller', ...size }, reply);
      return;
    }
    if (a.role !== 'controller') a.hub.requestRole(a.sink, 'controller');
    if (a.role === 'controller' && size.cols !== undefined && size.rows !== undefined) a.hub.resize(a.sink, size.cols, size.rows);
    a.hub.reply(a.sink, JSON.stringify(reply(a.role)));
    if (a.role !== 'controller') a.hub.reply(a.sink, this.#readOnly(ids.sessionId));
  }

  /** A new attachment of `conn` to the session (an earlier one of the same pair is dropped first); its sink. */
  #attach(
    conn: WsConn,
    hook: WsSessionsHook,
    ids: WsSessionIds,
    form: WsSessionForm,
    join: { role: Role; replayFrom?: number | null; clientLabel?: string; cols?: number; rows?: number },
    reply?: (role: Role | undefined) => Record<string, unknown>,
  ): SessionAttachmentSink {
    const hub = hook.hub(ids.sessionId);
    if (hub === undefined || hub.closed) throw new SvcError('session.not_found', `no live session ${ids.sessionId}`);
    let atts = this.#conns.get(conn.id);
    if (atts === undefined) {
      const created = new Map<string, Attachment>();
      atts = created;
      this.#conns.set(conn.id, created);
      conn.onDrain(() => {
        for (const a of created.values()) a.sink.drained();
      });
      conn.onPong(() => {
        for (const a of created.values()) a.sink.ponged();
      });
    }
    const old = atts.get(ids.sessionId);
    if (old !== undefined) {
      atts.delete(ids.sessionId);
      old.hub.disconnect(old.sink);
      old.sink.end();
    }
    const sink = new SessionAttachmentSink(conn, ids.sessionId, (s, code, reason) => this.#detached(conn, s, code, reason));
    const a: Attachment = { sink, hub, form, role: undefined, askedMs: 0 };
    atts.set(ids.sessionId, a);
    const current = (): WsSessionIds => hook.find({ sessionId: ids.sessionId }) ?? ids;
    const dialect = wsSessionDialect({
      form,
      ids: current,
      onRole: (r) => {
        a.role = r.role;
      },
      ...(reply !== undefined && { firstRole: (r) => reply(r.role) }),
    });
    hub.open(sink, dialect);
    const { cols, rows, ...rest } = join;
    hub.join(sink, { ...rest, ...(cols !== undefined && rows !== undefined && { cols, rows }) });
    if (join.role === 'controller' && a.role === 'observer') hub.reply(sink, this.#readOnly(ids.sessionId));
    return sink;
  }

  /** The hub ended an attachment (fatal error, slow consumer, leave, the session's end). */
  #detached(conn: WsConn, sink: SessionAttachmentSink, code: number, reason: string): void {
    const atts = this.#conns.get(conn.id);
    if (atts?.get(sink.sessionId)?.sink === sink) atts.delete(sink.sessionId);
    if (!conn.closed) conn.send(JSON.stringify({ type: 'session_left', session_id: sink.sessionId, code, reason }));
  }

  #leave(conn: WsConn, sessionId: string): void {
    const a = this.#conns.get(conn.id)?.get(sessionId);
    if (a !== undefined) a.hub.leave(a.sink);
  }

  /** May `a` type now? Asks for the lease when it is not the controller (rate-limited). */
  #mayDrive(a: Attachment): boolean {
    if (a.role === 'controller') return true;
    const now = this.#now();
    if (now - a.askedMs < kAskAgainMs) return false;
    a.askedMs = now;
    a.hub.requestRole(a.sink, 'controller');
    if ((a.role as Role | undefined) === 'controller') return true;
    a.hub.reply(a.sink, this.#readOnly(a.sink.sessionId));
    return false;
  }

  #readOnly(sessionId: string): string {
    return JSON.stringify({ type: 'error', code: 'PERMISSION_DENIED', message: kReadOnly, session_id: sessionId });
  }

  /** The attachment a send_input/pty_resize (agent_id + command_id) or session_* (session_id) names. */
  #attachmentOf(conn: WsConn, hook: WsSessionsHook, m: Fields): Attachment {
    const ids =
      m['session_id'] !== undefined
        ? hook.find({ sessionId: field(m, 'session_id') })
        : hook.find({ agentId: field(m, 'agent_id'), commandId: field(m, 'command_id') });
    if (ids === undefined) throw new SvcError('session.not_found', 'no live session has this id or command id');
    const a = this.#conns.get(conn.id)?.get(ids.sessionId);
    if (a === undefined) {
      throw new SvcError(
        'request.invalid',
        `this connection is not attached to session ${ids.sessionId}: attach_session or join_session first`,
      );
    }
    return a;
  }

  #found(ids: WsSessionIds | undefined, agentId: string): WsSessionIds {
    if (ids === undefined) throw new SvcError('session.not_found', `no live session of that name on agent ${agentId}`);
    return ids;
  }

  #size(m: Fields): { cols?: number; rows?: number } {
    const cols = optionalInt(m, 'cols', 1, 1024);
    const rows = optionalInt(m, 'rows', 1, 1024);
    return { ...(cols !== undefined && { cols }), ...(rows !== undefined && { rows }) };
  }

  #fail(conn: WsConn, err: unknown, m: Fields): void {
    if (conn.closed) return;
    const context = {
      ...(typeof m['agent_id'] === 'string' && { agent_id: m['agent_id'] }),
      ...(typeof m['session_id'] === 'string' && { session_id: m['session_id'] }),
    };
    if (isSvcError(err)) {
      conn.send(JSON.stringify({ type: 'error', code: err.code, message: err.message, ...context }));
      return;
    }
    this.#log.warn({ err: errorMessage(err), type: m['type'] }, 'dashboard WebSocket session message failed');
    conn.send(JSON.stringify({ type: 'error', code: 'server.internal', message: `${String(m['type'])} failed`, ...context }));
  }
}
