/**
 * One interactive session's fan-out point on the main thread: the WebSocket clients attached to
 * it (pty-ws.v1, pty-ws-protocol.ts), their roles (lease.ts), their bounded queues (the one
 * live-subscriber mechanism, src/http/live-subscriber.ts), its hot replay (replay-buffer.ts) and the way to its PTY ({@link
 * SessionPtyPort}). Everything is synchronous: a join reads the replay and joins the live fan-out
 * in one step, so no frame is lost or repeated between them.
 *
 * Output is encoded once per frame (JSON text, and binary only if some client asked for it) and
 * the same bytes go to every client. Liveness: one interval per hub (only while clients are
 * attached) pings every client and closes those silent for `pongTimeoutMs` (4408); any frame from
 * a client counts as life. A dead, dropped or departed controller frees the lease at once.
 */
import type { TransitionLogger } from '../core/state-machine.js';
import { DEFAULT_LIVE_QUEUE_BYTES, LiveSubscriber } from '../http/live-subscriber.js';
import { wsLiveSink, type WsConn } from '../http/ws-route.js';
import { Membership, type MembershipSnapshot, type RoleGrant } from './lease.js';
import { encodeError, encodeHello, encodeOutputBinary, encodeOutputJson, encodeServerFrame } from './pty-ws-frames.js';
import { CloseCode, type ClientFrame, type FrameErrorCode, type JoinFrame, type TerminalSize } from './pty-ws-protocol.js';
import { DEFAULT_SESSION_REPLAY_BYTES, ReplayBuffer } from './replay-buffer.js';
import type { SessionState } from './session-types.js';

export const DEFAULT_PING_INTERVAL_MS = 30_000;
export const DEFAULT_PONG_TIMEOUT_MS = 90_000;

/** Where controller input and resizes go (the wiring sends StdinChunk / PtyControl). */
export interface SessionPtyPort {
  input(data: Uint8Array): void;
  resize(cols: number, rows: number): void;
}

/** What a session client writes to: a WsConn (src/http/ws-route.ts), or a test's stand-in. */
export type FrameSink = Pick<WsConn, 'id' | 'closed' | 'send' | 'close' | 'bufferedAmount' | 'onDrain' | 'onClose'>;

/** A client cut off for falling behind: this fatal error frame, then close 4413; it rejoins with replay_from. */
function slowConsumerFrame(_cursor: string | undefined, maxQueuedBytes: number): string {
  return encodeError('slow_consumer', `more than ${maxQueuedBytes} bytes were queued for this client; rejoin with replay_from`, true);
}

export interface SessionHubOptions {
  readonly sessionId: string;
  readonly pty: SessionPtyPort;
  readonly state: SessionState;
  readonly agentConnected: boolean;
  readonly terminalSize: TerminalSize;
  /** Per-client queue bound. Default {@link DEFAULT_LIVE_QUEUE_BYTES}. */
  readonly maxQueuedBytes?: number;
  /** Replay window. Default {@link DEFAULT_SESSION_REPLAY_BYTES}. Keep it under maxQueuedBytes / 1.4 (base64). */
  readonly replayBytes?: number;
  /** 0 disables the hub's own timer (call tick()). Default {@link DEFAULT_PING_INTERVAL_MS}. */
  readonly pingIntervalMs?: number;
  /** Default {@link DEFAULT_PONG_TIMEOUT_MS}. */
  readonly pongTimeoutMs?: number;
  readonly logger?: TransitionLogger;
  /** Output seen (for HITL): raw bytes in order. */
  readonly onOutput?: (data: Uint8Array) => void;
  /** The controller resized the PTY (persist it). */
  readonly onResize?: (size: TerminalSize) => void;
  /** A client was dropped for not reading (count it). */
  readonly onSlowClient?: () => void;
  readonly now?: () => number;
}

interface Client {
  readonly conn: FrameSink;
  readonly sender: LiveSubscriber;
  readonly clientId: string;
  joined: boolean;
  binaryOutput: boolean;
  lastSeenMs: number;
}

export class SessionHub {
  readonly sessionId: string;
  readonly #opts: SessionHubOptions;
  readonly #now: () => number;
  readonly #clients = new Map<number, Client>();
  readonly #membership: Membership;
  readonly #replay: ReplayBuffer;
  readonly #pongTimeoutMs: number;
  #state: SessionState;
  #agentConnected: boolean;
  #size: TerminalSize;
  #timer: NodeJS.Timeout | undefined;
  #pingId = 0;
  #closed = false;

  constructor(opts: SessionHubOptions) {
    this.sessionId = opts.sessionId;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    this.#state = opts.state;
    this.#agentConnected = opts.agentConnected;
    this.#size = opts.terminalSize;
    this.#pongTimeoutMs = opts.pongTimeoutMs ?? DEFAULT_PONG_TIMEOUT_MS;
    this.#replay = new ReplayBuffer(opts.replayBytes ?? DEFAULT_SESSION_REPLAY_BYTES);
    this.#membership = new Membership({
      isLive: (id) => this.#isLive(id),
      logFields: { session: opts.sessionId },
      ...(opts.logger !== undefined && { logger: opts.logger }),
    });
  }

  get closed(): boolean {
    return this.#closed;
  }
  get clientCount(): number {
    return this.#clients.size;
  }
  get terminalSize(): TerminalSize {
    return this.#size;
  }

  membership(): MembershipSnapshot {
    return this.#membership.snapshot();
  }

  /** Numbers for the list entry's liveness. */
  stats(): { hasScreen: boolean; newestSeq: number; maxClientLagBytes: number } {
    let lag = 0;
    for (const c of this.#clients.values()) lag = Math.max(lag, c.sender.lagBytes());
    return { hasScreen: !this.#replay.isEmpty, newestSeq: this.#replay.newestSeq, maxClientLagBytes: lag };
  }

  /** A connection opened: greet it with binding_hello. */
  open(conn: FrameSink): void {
    if (this.#closed) {
      conn.send(encodeError('session_closed', 'the session has ended', true));
      conn.close(CloseCode.sessionNotFound, 'session closed');
      return;
    }
    const client: Client = {
      conn,
      clientId: `c${conn.id}`,
      joined: false,
      binaryOutput: false,
      lastSeenMs: this.#now(),
      sender: new LiveSubscriber(wsLiveSink(conn, { code: CloseCode.slowConsumer, reason: 'slow consumer' }), {
        maxQueuedBytes: this.#opts.maxQueuedBytes ?? DEFAULT_LIVE_QUEUE_BYTES,
        slowFrame: slowConsumerFrame,
        onSlow: () => {
          this.#opts.onSlowClient?.();
          this.#drop(client);
        },
      }),
    };
    this.#clients.set(conn.id, client);
    this.#startTimer();
    client.sender.send(
      encodeHello({
        sessionId: this.sessionId,
        currentSeq: this.#replay.newestSeq,
        state: this.#state,
        terminalSize: this.#size,
        pingIntervalMs: this.#opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
        pongTimeoutMs: this.#pongTimeoutMs,
        maxQueuedBytes: client.sender.maxQueuedBytes,
        replayBytes: this.#replay.maxBytes,
      }),
    );
  }

  /** A decoded frame from a connection. */
  handle(conn: FrameSink, frame: ClientFrame): void {
    const c = this.#clients.get(conn.id);
    if (c === undefined || c.sender.closed) return;
    c.lastSeenMs = this.#now();
    if (frame.op === 'ping') return void c.sender.send(encodeServerFrame('pong', frame.id === undefined ? {} : { id: frame.id }));
    if (frame.op === 'pong') return;
    if (frame.op === 'pty.join_session') return this.#join(c, frame);
    if (!c.joined) return this.#fatal(c, 'not_joined', `${frame.op} before pty.join_session`, CloseCode.protocolError);
    switch (frame.op) {
      case 'pty.session_input':
        if (!this.#membership.mayDrive(c.clientId))
          return this.#error(c, 'input_not_permitted', 'input ignored: only the controller may type (request the controller role)');
        if (frame.data.byteLength > 0) this.#opts.pty.input(frame.data);
        return;
      case 'pty.session_resize':
        if (!this.#membership.mayDrive(c.clientId))
          return this.#error(c, 'input_not_permitted', 'resize ignored: only the controller may resize');
        return this.#resize({ cols: frame.cols, rows: frame.rows });
      case 'pty.request_role':
        this.#assigned(c, this.#membership.requestRole(c.clientId, frame.role));
        return this.#broadcastMembership();
      case 'pty.leave_session':
        this.#remove(c);
        c.sender.close(encodeServerFrame('pty.left', { session_id: this.sessionId }), () => c.conn.close(CloseCode.normal, 'left'));
        return;
    }
  }

  /** A frame that failed to decode: error + close, for this client only. */
  protocolError(conn: FrameSink, code: FrameErrorCode, message: string): void {
    const c = this.#clients.get(conn.id);
    if (c !== undefined) this.#fatal(c, code, message, CloseCode.protocolError);
    else {
      conn.send(encodeError(code, message, true));
      conn.close(CloseCode.protocolError, code);
    }
  }

  /** The connection closed (any reason). */
  disconnect(conn: FrameSink): void {
    const c = this.#clients.get(conn.id);
    if (c !== undefined) this.#remove(c);
  }

  /** PTY output with its session seq; duplicates (seq ≤ newest) are ignored. */
  output(seq: number, data: Uint8Array): void {
    if (this.#closed || !this.#replay.append(seq, data)) return;
    this.#opts.onOutput?.(data);
    let json: string | undefined;
    let binary: Uint8Array | undefined;
    for (const c of this.#clients.values()) {
      if (!c.joined) continue;
      if (c.binaryOutput) c.sender.send((binary ??= encodeOutputBinary(seq, data)));
      else c.sender.send((json ??= encodeOutputJson(seq, data)));
    }
  }

  /** Lifecycle news (detached, running again, agent away/back) for the clients. */
  setStatus(state: SessionState, agentConnected: boolean): void {
    if (this.#state === state && this.#agentConnected === agentConnected) return;
    this.#state = state;
    this.#agentConnected = agentConnected;
    this.#broadcast(encodeServerFrame('pty.session_status', { session_id: this.sessionId, state, agent_connected: agentConnected }));
  }

  /** The session ended: pty.closed to everyone, close 1000, refuse later joins. Idempotent. */
  close(exitCode: number | null, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    const frame = encodeServerFrame('pty.closed', { session_id: this.sessionId, exit_code: exitCode, reason });
    for (const c of [...this.#clients.values()]) {
      this.#clients.delete(c.conn.id);
      c.sender.close(frame, () => c.conn.close(CloseCode.normal, 'session closed'));
    }
    this.#stopTimer();
  }

  /** Pings everyone and closes clients silent for longer than pongTimeoutMs. */
  tick(nowMs: number = this.#now()): void {
    const ping = encodeServerFrame('ping', { id: ++this.#pingId });
    for (const c of [...this.#clients.values()]) {
      if (nowMs - c.lastSeenMs > this.#pongTimeoutMs)
        this.#fatal(c, 'ping_timeout', `no frame for ${this.#pongTimeoutMs} ms`, CloseCode.pongTimeout);
      else c.sender.send(ping);
    }
  }

  #join(c: Client, f: JoinFrame): void {
    if (c.joined) return this.#error(c, 'already_joined', 'this connection has joined already; use pty.request_role to change role');
    const backendOk = f.sessionBackend === undefined || f.sessionBackend === 'tmux';
    const classOk = f.sessionClass === undefined || f.sessionClass === 'managed';
    if (!backendOk || !classOk) {
      return this.#fatal(
        c,
        'unsupported_selection',
        `${f.sessionBackend ?? 'tmux'}/${f.sessionClass ?? 'managed'} is not supported; this session is tmux/managed`,
        CloseCode.unsupportedSelection,
      );
    }
    if (f.argv !== undefined || f.cwd !== undefined || f.env !== undefined) {
      return this.#fatal(
        c,
        'unsupported_selection',
        'sessions are started by POST /api/v1/agents/{id}/sessions; a join attaches and takes no argv, cwd or env',
        CloseCode.unsupportedSelection,
      );
    }
    c.joined = true;
    c.binaryOutput = f.binaryOutput;
    const grant = this.#membership.join(c.clientId, f.role ?? 'observer');
    if (grant.role === 'controller' && f.terminalSize !== undefined) this.#resize(f.terminalSize);
    this.#assigned(c, grant);
    const slice = this.#replay.since(f.replayFrom);
    c.sender.send(encodeServerFrame('pty.replay', { from_seq: slice.fromSeq, to_seq: slice.toSeq, reset: slice.reset }));
    for (const fr of slice.frames) {
      if (!c.sender.send(c.binaryOutput ? encodeOutputBinary(fr.seq, fr.data) : encodeOutputJson(fr.seq, fr.data))) return;
    }
    if (this.#state !== 'running' || !this.#agentConnected) {
      c.sender.send(
        encodeServerFrame('pty.session_status', { session_id: this.sessionId, state: this.#state, agent_connected: this.#agentConnected }),
      );
    }
    this.#broadcastMembership();
  }

  #assigned(c: Client, g: RoleGrant): void {
    c.sender.send(
      encodeServerFrame('pty.role_assigned', {
        session_id: this.sessionId,
        client_id: c.clientId,
        role: g.role,
        requested_role: g.requestedRole,
        ...(g.reason !== undefined && { reason: g.reason }),
        current_seq: this.#replay.newestSeq,
        terminal_size: this.#size,
      }),
    );
  }

  #resize(size: TerminalSize): void {
    if (size.cols === this.#size.cols && size.rows === this.#size.rows) return;
    this.#size = { cols: size.cols, rows: size.rows };
    this.#opts.pty.resize(size.cols, size.rows);
    this.#opts.onResize?.(this.#size);
    this.#broadcast(encodeServerFrame('pty.resize', { session_id: this.sessionId, cols: size.cols, rows: size.rows }));
  }

  #error(c: Client, code: FrameErrorCode, message: string): void {
    c.sender.send(encodeError(code, message, false));
  }

  #fatal(c: Client, code: FrameErrorCode, message: string, closeCode: number): void {
    this.#remove(c);
    c.sender.close(encodeError(code, message, true), () => c.conn.close(closeCode, code));
  }

  /** Cut off by its sender (already closing): forget it now so the lease frees at once. */
  #drop(c: Client): void {
    this.#remove(c);
  }

  #remove(c: Client): void {
    if (!this.#clients.delete(c.conn.id)) return;
    const wasMember = this.#membership.has(c.clientId);
    this.#membership.leave(c.clientId);
    if (wasMember) this.#broadcastMembership();
    if (this.#clients.size === 0) this.#stopTimer();
  }

  #isLive(clientId: string): boolean {
    for (const c of this.#clients.values()) {
      if (c.clientId === clientId) return !c.sender.closed && this.#now() - c.lastSeenMs <= this.#pongTimeoutMs;
    }
    return false;
  }

  #broadcastMembership(): void {
    const m = this.#membership.snapshot();
    this.#broadcast(encodeServerFrame('pty.membership', { session_id: this.sessionId, ...m }));
  }

  #broadcast(frame: string): void {
    for (const c of [...this.#clients.values()]) if (c.joined) c.sender.send(frame);
  }

  #startTimer(): void {
    const interval = this.#opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS;
    if (this.#timer !== undefined || interval <= 0) return;
    this.#timer = setInterval(() => this.tick(), interval).unref();
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
