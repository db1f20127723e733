/**
 * The dashboard WebSocket (spec 4.18, SVC_WS_ADDR): `output`, `metrics` and `agent_status`
 * messages, subscriptions by agent, `join_session`, and bounded per-connection backpressure.
 *
 * Messages from the server (JSON text): `server_hello` {conn_id, channels}, the spec's `output`
 * (plus `seq` and `cursor`, actors/protocol/chunk-events.ts), `metrics` and `agent_status`, and the replies below.
 *
 * Messages from the client:
 *
 * | message | effect | reply |
 * |---|---|---|
 * | {type:"subscribe", agent_id, channels?} | start receiving `channels` (default ["output","status"]) of agent_id; `*` = every agent | {type:"subscribed", agent_id, channels} |
 * | {type:"unsubscribe", agent_id, channels?} | stop (same defaults) | {type:"unsubscribed", agent_id, channels} |
 * | {type:"join_session", session_id, role} | role controller or observer; handled by the sessions hook when one is installed | its reply, else {type:"error", code:"session.not_found", session_id, message} |
 * | list_agents, list_sessions, start_shell, create_session, attach_session, send_input, pty_resize, … | the reference dashboard's fleet and session messages (ws-session-messages.ts; join_session too once the sessions component installed its hook) | see there |
 * | {type:"ping"} | | {type:"pong", timestamp} |
 *
 * Channel `output` carries `output` messages; channel `status` carries `agent_status` and
 * `metrics`. A new connection is subscribed to channel `status` of every agent (`*`) and to no
 * output. A `*` subscription supersedes the per-agent ones of the same channel (they are dropped,
 * so nothing arrives twice). Bad messages get {type:"error", code:"request.invalid", message}.
 *
 * Backpressure: every message is encoded once and published natively by uWS to the subscribed
 * connections. A connection that has more than `slowCloseBytes` queued (default 4 MiB) is closed
 * with code 1008 and reason `slow_consumer: …`. The check runs after output is published (at most
 * every 5 ms) and every 250 ms; uWS's own limit (maxBackpressure: 2 × slowCloseBytes + 8 MiB)
 * terminates, without a close frame, a connection that fills up faster than that.
 */
import type { Logger } from 'pino';
import type { AgentChange } from '../agent-link/agent-registry.js';
import type { WsConn, WsHandlers } from '../http/ws-server.js';
import { StatusMessages } from './ws-status.js';
import { WS_SESSION_MESSAGE_TYPES, WsSessionMessages, type WsSessionsHook } from './ws-session-messages.js';
import { errorMessage } from '../util/error-message.js';

export type WsChannel = 'output' | 'status';
const CHANNELS: readonly WsChannel[] = ['output', 'status'];

/** Default queued bytes above which a connection is closed as a slow consumer: 4 MiB. */
export const DEFAULT_WS_SLOW_CLOSE_BYTES = 4 * 1024 * 1024;
/** Most per-agent subscriptions one connection may hold (per channel). */
export const kMaxAgentSubscriptions = 1024;
const kSweepMs = 250;
const kCheckAfterPublishMs = 5;
const kIdPattern = /^\P{Cc}{1,256}$/u;

/** Where the hub publishes (the WS listener). */
export interface WsPublisher {
  publish(topic: string, bytes: Uint8Array | string, isBinary?: boolean): void;
  subscriberCount(topic: string): number;
}

/** A join_session request and the connection it came on. */
export interface JoinSessionRequest {
  readonly sessionId: string;
  readonly role: string;
  readonly conn: WsConn;
}

/** The sessions hook: returns the reply message (e.g. {type:"session_joined", …} or an error). */
export type JoinSessionHandler = (req: JoinSessionRequest) => Record<string, unknown> | Promise<Record<string, unknown>>;

/** The WS topic of one channel of one agent (`*` = all agents). */
export function wsTopic(channel: WsChannel, agentId: string): string {
  return `ws\u0000${channel}\u0000${agentId}`;
}

interface ConnState {
  readonly conn: WsConn;
  readonly agents: Record<WsChannel, Set<string>>;
  readonly all: Record<WsChannel, boolean>;
}

export interface WsHubOptions {
  readonly logger: Logger;
  readonly slowCloseBytes?: number;
  /** Called once per connection closed for being slow. */
  readonly onSlow?: () => void;
  readonly joinSession?: JoinSessionHandler;
}

export class WsHub {
  readonly handlers: WsHandlers;
  readonly slowCloseBytes: number;
  readonly #log: Logger;
  readonly #onSlow: () => void;
  readonly #conns = new Map<number, ConnState>();
  readonly #status = new StatusMessages({
    listening: (agentId) =>
      (this.#publisher?.subscriberCount(wsTopic('status', agentId)) ?? 0) +
        (this.#publisher?.subscriberCount(wsTopic('status', '*')) ?? 0) >
      0,
    publish: (agentId, bytes) => {
      this.#publisher?.publish(wsTopic('status', agentId), bytes);
      this.#publisher?.publish(wsTopic('status', '*'), bytes);
    },
  });
  /** Connections subscribed to each agent's output channel, and to every agent's: publishing to nobody is skipped. */
  readonly #outputListeners = new Map<string, number>();
  #publisher: WsPublisher | undefined;
  #joinSession: JoinSessionHandler | undefined;
  #sessionsHook: WsSessionsHook | undefined;
  readonly #sessions: WsSessionMessages;
  #sweep: NodeJS.Timeout | undefined;
  #lastCheckMs = 0;

  constructor(opts: WsHubOptions) {
    this.#log = opts.logger;
    this.slowCloseBytes = opts.slowCloseBytes ?? DEFAULT_WS_SLOW_CLOSE_BYTES;
    this.#onSlow = opts.onSlow ?? (() => undefined);
    this.#joinSession = opts.joinSession;
    this.#sessions = new WsSessionMessages({ hook: () => this.#sessionsHook, logger: opts.logger });
    this.handlers = {
      open: (conn) => this.#open(conn),
      message: (conn, data, isBinary) => this.#message(conn, data, isBinary),
      close: (conn) => this.#closed(conn),
    };
  }

  /** Open connections. */
  get connectionCount(): number {
    return this.#conns.size;
  }

  /** Where to publish (the listener started with `handlers`). */
  attach(publisher: WsPublisher): void {
    this.#publisher = publisher;
    this.#sweep ??= setInterval(() => this.#checkBackpressure(Date.now()), kSweepMs).unref();
  }

  /** Installs (or replaces) the join_session handler (the sessions component). */
  setJoinSessionHandler(handler: JoinSessionHandler | undefined): void {
    this.#joinSession = handler;
  }

  /** Installs (or removes) what the fleet and session messages need (the sessions component). */
  setSessionsHook(hook: WsSessionsHook | undefined): void {
    this.#sessionsHook = hook;
  }

  /** True when a connection subscribes to `agentId`'s output (or every agent's): encode for nobody otherwise. */
  listensToOutput(agentId: string): boolean {
    return this.#publisher !== undefined && (this.#outputListeners.has(agentId) || this.#outputListeners.has('*'));
  }

  /** An encoded `output` message of `agentId`, to its output subscribers. `bytes` may be a view valid only during the call. */
  publishOutput(agentId: string, bytes: Uint8Array): void {
    const p = this.#publisher;
    if (p === undefined) return;
    const one = this.#outputListeners.get(agentId) ?? 0;
    const all = this.#outputListeners.get('*') ?? 0;
    if (one > 0) p.publish(wsTopic('output', agentId), bytes);
    if (all > 0) p.publish(wsTopic('output', '*'), bytes);
    const now = Date.now();
    if (now - this.#lastCheckMs >= kCheckAfterPublishMs) this.#checkBackpressure(now);
  }

  /** uWS maxBackpressure for the listener: the hard bound behind the slow-consumer check. */
  get maxBackpressureBytes(): number {
    return 2 * this.slowCloseBytes + 8 * 1024 * 1024;
  }

  /** A registry change → agent_status and metrics messages (ws-status.ts). */
  onAgentChange(change: AgentChange): void {
    this.#status.onAgentChange(change);
  }

  stop(): void {
    clearInterval(this.#sweep);
    this.#sweep = undefined;
  }

  #open(conn: WsConn): void {
    const st: ConnState = { conn, agents: { output: new Set(), status: new Set() }, all: { output: false, status: true } };
    this.#conns.set(conn.id, st);
    conn.subscribe(wsTopic('status', '*'));
    conn.send(JSON.stringify({ type: 'server_hello', conn_id: conn.id, timestamp: Date.now(), channels: { output: [], status: ['*'] } }));
  }

  #message(conn: WsConn, data: ArrayBuffer, isBinary: boolean): void {
    const st = this.#conns.get(conn.id);
    if (st === undefined) return;
    if (isBinary) return this.#error(conn, 'binary messages are not accepted');
    let msg: unknown;
    try {
      msg = JSON.parse(Buffer.from(data).toString('utf8'));
    } catch {
      return this.#error(conn, 'expected a JSON object with a string type field');
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg))
      return this.#error(conn, 'expected a JSON object with a string type field');
    const m = msg as Record<string, unknown>;
    switch (m['type']) {
      case 'subscribe':
      case 'unsubscribe':
        return this.#subscription(st, m, m['type']);
      case 'join_session':
        return this.#sessionsHook === undefined ? this.#join(conn, m) : this.#sessions.message(conn, m);
      case 'ping':
        conn.send(JSON.stringify({ type: 'pong', timestamp: Date.now() }));
        return;
      default:
        if (typeof m['type'] === 'string' && WS_SESSION_MESSAGE_TYPES.has(m['type'])) return this.#sessions.message(conn, m);
        return this.#error(
          conn,
          typeof m['type'] === 'string'
            ? `unknown message type: ${m['type'].slice(0, 100)}`
            : 'expected a JSON object with a string type field',
        );
    }
  }

  #subscription(st: ConnState, m: Record<string, unknown>, type: 'subscribe' | 'unsubscribe'): void {
    const agentId = m['agent_id'];
    if (typeof agentId !== 'string' || !kIdPattern.test(agentId))
      return this.#error(st.conn, 'agent_id must be an agent id (1-256 characters) or *');
    let channels: WsChannel[] = [...CHANNELS];
    if (m['channels'] !== undefined) {
      const c = m['channels'];
      if (!Array.isArray(c) || c.length === 0 || !c.every((x) => CHANNELS.includes(x as WsChannel)))
        return this.#error(st.conn, 'channels must be a non-empty array of output, status');
      channels = [...new Set(c as WsChannel[])];
    }
    for (const ch of channels) {
      if (
        type === 'subscribe' &&
        agentId !== '*' &&
        !st.all[ch] &&
        st.agents[ch].size >= kMaxAgentSubscriptions &&
        !st.agents[ch].has(agentId)
      ) {
        return this.#error(st.conn, `at most ${kMaxAgentSubscriptions} agents per channel; subscribe to * instead`);
      }
    }
    for (const ch of channels) (type === 'subscribe' ? this.#subscribe : this.#unsubscribe).call(this, st, ch, agentId);
    st.conn.send(JSON.stringify({ type: type === 'subscribe' ? 'subscribed' : 'unsubscribed', agent_id: agentId, channels }));
  }

  #subscribe(st: ConnState, ch: WsChannel, agentId: string): void {
    if (st.all[ch]) return;
    if (agentId === '*') {
      for (const id of [...st.agents[ch]]) this.#dropTopic(st, ch, id);
      st.all[ch] = true;
      this.#addTopic(st, ch, '*');
      return;
    }
    if (!st.agents[ch].has(agentId)) {
      st.agents[ch].add(agentId);
      this.#addTopic(st, ch, agentId);
    }
  }

  #unsubscribe(st: ConnState, ch: WsChannel, agentId: string): void {
    if (agentId === '*') {
      if (st.all[ch]) this.#dropTopic(st, ch, '*');
      st.all[ch] = false;
      for (const id of [...st.agents[ch]]) this.#dropTopic(st, ch, id);
      return;
    }
    if (st.agents[ch].has(agentId)) this.#dropTopic(st, ch, agentId);
  }

  #addTopic(st: ConnState, ch: WsChannel, agentId: string): void {
    st.conn.subscribe(wsTopic(ch, agentId));
    if (ch === 'output') this.#outputListeners.set(agentId, (this.#outputListeners.get(agentId) ?? 0) + 1);
  }

  #dropTopic(st: ConnState, ch: WsChannel, agentId: string): void {
    if (agentId !== '*') st.agents[ch].delete(agentId);
    if (!st.conn.closed) st.conn.unsubscribe(wsTopic(ch, agentId));
    if (ch !== 'output') return;
    const n = (this.#outputListeners.get(agentId) ?? 1) - 1;
    if (n > 0) this.#outputListeners.set(agentId, n);
    else this.#outputListeners.delete(agentId);
  }

  /** A connection ended (or was closed as slow): its output subscriptions stop counting. */
  #closed(conn: WsConn): void {
    const st = this.#conns.get(conn.id);
    if (st === undefined) return;
    this.#conns.delete(conn.id);
    this.#unsubscribe(st, 'output', '*');
    this.#sessions.closed(conn);
  }

  #join(conn: WsConn, m: Record<string, unknown>): void {
    const sessionId = m['session_id'];
    const role = m['role'];
    if (typeof sessionId !== 'string' || !kIdPattern.test(sessionId)) return this.#error(conn, 'join_session needs session_id');
    if (role !== 'controller' && role !== 'observer') return this.#error(conn, 'join_session role must be controller or observer');
    const handler = this.#joinSession;
    if (handler === undefined) {
      conn.send(
        JSON.stringify({
          type: 'error',
          code: 'session.not_found',
          session_id: sessionId,
          message: `no session ${sessionId} on this listener; interactive terminals are served over pty-ws.v1 (pty_ws_url of the session)`,
        }),
      );
      return;
    }
    Promise.resolve()
      .then(() => handler({ sessionId, role, conn }))
      .then(
        (reply) => {
          if (!conn.closed) conn.send(JSON.stringify(reply));
        },
        (err: unknown) => {
          this.#log.warn({ err: errorMessage(err), sessionId }, 'join_session failed');
          if (!conn.closed)
            conn.send(JSON.stringify({ type: 'error', code: 'server.internal', session_id: sessionId, message: 'join_session failed' }));
        },
      );
  }

  #error(conn: WsConn, message: string): void {
    conn.send(JSON.stringify({ type: 'error', code: 'request.invalid', message }));
  }

  #checkBackpressure(nowMs: number): void {
    this.#lastCheckMs = nowMs;
    for (const st of this.#conns.values()) {
      const queued = st.conn.bufferedAmount();
      if (queued <= this.slowCloseBytes) continue;
      this.#closed(st.conn);
      this.#onSlow();
      this.#log.warn({ conn: st.conn.id, queuedBytes: queued }, 'closing a slow WebSocket consumer');
      st.conn.close(1008, `slow_consumer: ${queued} bytes queued (limit ${this.slowCloseBytes}); reconnect and resubscribe`);
    }
  }
}
