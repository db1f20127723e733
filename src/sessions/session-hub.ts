/**
 * One interactive session's fan-out point on the main thread: its stream of session events
 * (numbered by one counter, kept in the replay buffer), the clients attached to it with their
 * roles (lease.ts) and bounded queues (the one live-subscriber mechanism,
 * src/http/live-subscriber.ts), its keyframes (a headless terminal in a worker,
 * actors/terminal/) and the way to its PTY ({@link SessionPtyPort}).
 *
 * Clients speak a dialect (session-dialect.ts): pty-ws.v1 JSON or binary (binding-dialect.ts),
 * or the dashboard WebSocket's session messages. The operations are typed (join, input, resize,
 * requestRole, requestKeyframe, leave); the routes decode wire frames into them. binding/README.md
 * ("How the session hub speaks it") is the contract: sequence rules, join order, keyframes,
 * roles and liveness.
 *
 * Everything is synchronous except snapshots: a join reads the replay and joins the live fan-out
 * in one step, and while a client waits for its keyframe its live frames are held by its
 * LiveSubscriber, then released after the keyframe without the ones the snapshot covers.
 */
import type { TransitionLogger } from '../core/state-machine.js';
import { DEFAULT_LIVE_QUEUE_BYTES, LiveSubscriber } from '../http/live-subscriber.js';
import { wsLiveSink, type WsConn } from '../http/ws-route.js';
import { CLOSE_CODES, type ClosedReason, type ErrorCode, type Role, type SessionErrorCode } from './binding/codes.js';
import type { ClientRef, SessionHostCapabilities } from './binding/frames.js';
import { newFrameId, nowTs } from './binding/values.js';
import { Membership, type MembershipSnapshot } from './lease.js';
import { ReplayBuffer, type ReplayBufferLimits } from './replay-buffer.js';
import type { RoleInfo, SessionDialect, SessionEvent } from './session-dialect.js';
import type { SessionState } from './session-types.js';

/** A WebSocket Ping every 30 s of a client's silence (pty-ws.v1 2.4). */
export const DEFAULT_PING_INTERVAL_MS = 30_000;
/** A client that answers nothing for 10 s after a Ping is closed (1011) and its lease freed. */
export const DEFAULT_PONG_TIMEOUT_MS = 10_000;
/** Observers beyond this many are refused (RATE_LIMITED, close 4429). */
export const DEFAULT_MAX_OBSERVERS = 256;
export const DEFAULT_KEYFRAME_INTERVAL_FRAMES = 100;
export const DEFAULT_KEYFRAME_INTERVAL_MS = 5_000;
/** A cadence snapshot slower than this is replaced by Error KEYFRAME_UNAVAILABLE. */
export const DEFAULT_KEYFRAME_TIMEOUT_MS = 1_000;

export interface TerminalSize {
  readonly cols: number;
  readonly rows: number;
}

/** Where controller input and resizes go (the wiring sends StdinChunk / PtyControl). */
export interface SessionPtyPort {
  input(data: Uint8Array): void;
  resize(cols: number, rows: number): void;
}

/** What a session client writes to: a WsConn (src/http/ws-route.ts), or a test's stand-in. */
export type FrameSink = Pick<WsConn, 'id' | 'closed' | 'send' | 'close' | 'bufferedAmount' | 'onDrain' | 'onClose'> &
  Partial<Pick<WsConn, 'ping' | 'onPong'>>;

/**
 * The session's screen state, for keyframes: a headless terminal per session in a worker
 * (actors/terminal/screen-states.ts implements it). Calls apply in order; a snapshot reflects
 * everything passed before it (`anchorSequence`: the last sequence given).
 */
export interface ScreenStatePort {
  open(sessionId: string, cols: number, rows: number): void;
  output(sessionId: string, sequence: number, data: Uint8Array): void;
  resize(sessionId: string, sequence: number, cols: number, rows: number): void;
  snapshot(sessionId: string): Promise<{ data: Uint8Array; format: string; cols: number; rows: number; anchorSequence: number }>;
  close(sessionId: string): void;
}

/** What a join that starts the session asks for (spec 4.2; pty.join_session's selection). */
export interface JoinSelection {
  readonly backend: string;
  readonly class: string;
  readonly argv?: readonly string[];
  readonly command?: string;
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly cols: number;
  readonly rows: number;
}

/** A typed join (the routes build it from pty.join_session, or a dashboard join message). */
export interface JoinRequest {
  readonly role: Role;
  /**
   * Grant exactly `role`: the first joiner of a session is not made controller when it asked to
   * observe (the orchestrate observer URL, spec 4.2: observers attach first without taking control).
   */
  readonly exactRole?: boolean | undefined;
  readonly clientLabel?: string | undefined;
  /** Replay events with sequence > replayFrom; null/undefined: start at the newest. */
  readonly replayFrom?: number | null | undefined;
  /** Size hint: applied when this join makes the client controller. */
  readonly cols?: number | undefined;
  readonly rows?: number | undefined;
  /** Backend/class/argv…: only a join that starts a session may carry more than the session's own pair. */
  readonly sessionBackend?: string | undefined;
  readonly sessionClass?: string | undefined;
  readonly argv?: readonly string[] | undefined;
  readonly command?: string | undefined;
  readonly cwd?: string | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
}

/** A session that failed to start: the error code and message for the joiner. */
export class StartError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

export interface SessionHubOptions {
  readonly sessionId: string;
  readonly agentId?: string;
  readonly pty: SessionPtyPort;
  /** `pending`: the id is reserved and a join with a selection starts it (`start`). */
  readonly state: SessionState | 'pending';
  readonly agentConnected: boolean;
  readonly terminalSize: TerminalSize;
  /**
   * The hub numbers its frames from sequenceBase + 1 (default 0). The session service passes
   * `hubEpoch * 2^32` (SessionRecord.hubEpoch) so that no two hubs of a session share a number.
   */
  readonly sequenceBase?: number;
  /** The session's own backend/class (undefined while pending). */
  readonly sessionBackend?: string;
  readonly sessionClass?: string;
  /** What the session's host can run (binding_hello session_host); read at each open and join. */
  readonly host: () => SessionHostCapabilities;
  /** Starts a pending session with a join's selection; rejects with StartError (or anything: INTERNAL). */
  readonly start?: (sel: JoinSelection) => Promise<void>;
  /** Keyframes; without it every keyframe is Error KEYFRAME_UNAVAILABLE. */
  readonly screen?: ScreenStatePort;
  /** Per-client queue bound. Default {@link DEFAULT_LIVE_QUEUE_BYTES}. */
  readonly maxQueuedBytes?: number;
  readonly replay?: ReplayBufferLimits;
  /** 0 disables the hub's own timer (call tick()). Default {@link DEFAULT_PING_INTERVAL_MS}. */
  readonly pingIntervalMs?: number;
  readonly pongTimeoutMs?: number;
  readonly maxObservers?: number;
  readonly keyframeIntervalFrames?: number;
  readonly keyframeIntervalMs?: number;
  readonly keyframeTimeoutMs?: number;
  readonly logger?: TransitionLogger;
  /** Output seen (for HITL): raw bytes in order. */
  readonly onOutput?: (data: Uint8Array) => void;
  /** The controller resized the PTY (persist it). */
  readonly onResize?: (size: TerminalSize) => void;
  /** A client was dropped for not reading (count it). */
  readonly onSlowClient?: () => void;
  /** The last client of a pending (never started) hub went away. */
  readonly onIdle?: () => void;
  readonly now?: () => number;
}

interface Client {
  readonly conn: FrameSink;
  readonly sender: LiveSubscriber;
  readonly dialect: SessionDialect;
  readonly clientId: string;
  label: string | undefined;
  joined: boolean;
  /** Its join waits for the session to start (a pending hub): not yet sent any session event. */
  waiting: boolean;
  /** Start the join's keyframe once the event with this sequence (its MembershipChanged) reached it. */
  keyframeAfter: number | undefined;
  /** Sequence of the last session event handed to the sender (sent or held). */
  position: number;
  /** Session events up to this sequence are covered by a keyframe the client got: not sent. */
  skipUpTo: number;
  /** A keyframe is being made for this client (its live frames are held). */
  syncing: boolean;
  lastSeenMs: number;
  pingSentMs: number | undefined;
}

type NewEvent = SessionEvent extends infer E ? (E extends SessionEvent ? Omit<E, 'sequence' | 'id' | 'ts'> : never) : never;

/** SessionService end causes → the binding's Closed reasons. */
function closedReasonOf(cause: string): ClosedReason {
  if (cause === 'exited') return 'normal';
  if (cause === 'killed') return 'killed';
  if (cause === 'agent_removed' || cause === 'instance_terminated') return 'instance_terminated';
  return 'error';
}

export class SessionHub {
  readonly sessionId: string;
  readonly #opts: SessionHubOptions;
  readonly #now: () => number;
  readonly #clients = new Map<number, Client>();
  readonly #membership: Membership;
  readonly #replay: ReplayBuffer;
  readonly #pingIntervalMs: number;
  readonly #pongTimeoutMs: number;
  #state: SessionState | 'pending';
  #agentConnected: boolean;
  #size: TerminalSize;
  #backend: string | undefined;
  #class: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #counter = 0;
  /** Newest agent output seq taken (duplicates at or below it are dropped). */
  #agentSeq = 0;
  #everJoined = false;
  #starting: Promise<void> | undefined;
  /**
   * Events waiting behind a cadence keyframe's reserved sequence (an entry without `ev`), in
   * sequence order; empty when nothing waits.
   */
  #queue: { readonly seq: number; ev: SessionEvent | undefined }[] = [];
  #outputsSinceKeyframe = 0;
  #lastKeyframeMs = 0;

  constructor(opts: SessionHubOptions) {
    this.sessionId = opts.sessionId;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    this.#state = opts.state;
    this.#agentConnected = opts.agentConnected;
    this.#size = opts.terminalSize;
    this.#backend = opts.sessionBackend;
    this.#class = opts.sessionClass;
    this.#pingIntervalMs = opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS;
    this.#pongTimeoutMs = opts.pongTimeoutMs ?? DEFAULT_PONG_TIMEOUT_MS;
    this.#counter = opts.sequenceBase ?? 0;
    this.#replay = new ReplayBuffer(opts.replay, this.#counter);
    this.#lastKeyframeMs = this.#now();
    this.#membership = new Membership({
      isLive: (id) => this.#isLive(id),
      logFields: { session: opts.sessionId },
      ...(opts.logger !== undefined && { logger: opts.logger }),
    });
    opts.screen?.open(opts.sessionId, opts.terminalSize.cols, opts.terminalSize.rows);
  }

  get closed(): boolean {
    return this.#closed;
  }
  get pending(): boolean {
    return this.#state === 'pending';
  }
  get clientCount(): number {
    return this.#clients.size;
  }
  get terminalSize(): TerminalSize {
    return this.#size;
  }
  /** Sequence of the newest session event. */
  get currentSequence(): number {
    return this.#counter;
  }

  membership(): MembershipSnapshot {
    return this.#membership.snapshot();
  }

  /** Numbers for the list entry's liveness. */
  stats(): { hasScreen: boolean; newestSeq: number; maxClientLagBytes: number } {
    let lag = 0;
    for (const c of this.#clients.values()) lag = Math.max(lag, c.sender.lagBytes());
    return { hasScreen: this.#agentSeq > 0, newestSeq: this.#counter, maxClientLagBytes: lag };
  }

  /** A connection opened: it speaks `dialect`, whose hello (binding_hello) goes first. */
  open(conn: FrameSink, dialect: SessionDialect): void {
    if (this.#closed) {
      const bye = dialect.goodbye('session_closed', 'the session has ended');
      if (bye !== undefined) conn.send(bye);
      conn.close(CLOSE_CODES.notFound, 'session closed');
      return;
    }
    const client: Client = {
      conn,
      dialect,
      clientId: `c-${conn.id}`,
      label: undefined,
      joined: false,
      waiting: false,
      keyframeAfter: undefined,
      position: this.#counter,
      skipUpTo: 0,
      syncing: false,
      lastSeenMs: this.#now(),
      pingSentMs: undefined,
      sender: new LiveSubscriber(wsLiveSink(conn, { code: CLOSE_CODES.slowConsumer, reason: 'slow consumer' }), {
        maxQueuedBytes: this.#opts.maxQueuedBytes ?? DEFAULT_LIVE_QUEUE_BYTES,
        slowFrame: (cursor, max) =>
          dialect.error(
            'SLOW_CONSUMER',
            `more than ${max} bytes were queued for this client; rejoin with replay_from ${cursor ?? client.position}`,
            cursor === undefined ? client.position : Number(cursor),
            undefined,
          ),
        onSlow: () => {
          this.#opts.onSlowClient?.();
          this.#remove(client);
        },
      }),
    };
    this.#clients.set(conn.id, client);
    conn.onPong?.(() => this.#seen(client));
    this.#startTimer();
    const hello = dialect.hello({
      sessionId: this.sessionId,
      agentId: this.#opts.agentId,
      currentSequence: this.#counter,
      sessionBackend: this.#backend,
      sessionClass: this.#class,
      terminalSize: this.#size,
      host: this.#opts.host(),
      limits: {
        maxQueuedBytes: client.sender.maxQueuedBytes,
        replayFrames: this.#replay.minFrames,
        replayBytes: this.#replay.softBytes,
      },
    });
    if (hello !== undefined) client.sender.send(hello);
  }

  /** Any frame from a connection counts as life (the routes call it for every message). */
  alive(conn: FrameSink): void {
    const c = this.#clients.get(conn.id);
    if (c !== undefined) this.#seen(c);
  }

  /** pty.join_session (or a dashboard join): role, replay, membership, keyframe, then live. */
  join(conn: FrameSink, req: JoinRequest, requestId?: string): void {
    const c = this.#live(conn);
    if (c === undefined) return;
    if (c.joined || c.waiting)
      return this.#refuse(c, 'INVALID_REQUEST', 'this connection has joined already; use pty.request_role', requestId);
    const refusal = this.#checkSelection(req);
    if (refusal !== undefined) return this.#refuse(c, refusal.code, refusal.message, requestId);
    if (this.#state !== 'pending') return this.#admit(c, req, requestId);
    if (this.#starting !== undefined) {
      // Joins while a join starts the session wait for it.
      const started = this.#starting;
      c.waiting = true;
      void started.then(
        () => {
          c.waiting = false;
          if (!c.sender.closed) this.#admit(c, req, requestId);
        },
        () => undefined,
      );
      return;
    }
    if (req.sessionBackend === undefined) {
      return this.#fatal(
        c,
        'INVALID_REQUEST',
        `no session ${this.sessionId}; to start one here, join with session_backend (see binding_hello session_host)`,
        CLOSE_CODES.notFound,
        requestId,
      );
    }
    const start = this.#opts.start;
    if (start === undefined) return this.#fatal(c, 'INTERNAL', 'this session cannot be started by a join', CLOSE_CODES.notFound, requestId);
    const host = this.#opts.host();
    const sel: JoinSelection = {
      backend: req.sessionBackend,
      class: req.sessionClass ?? (req.sessionBackend === 'native' ? 'direct' : host.default_class),
      cols: req.cols ?? this.#size.cols,
      rows: req.rows ?? this.#size.rows,
      ...(req.argv !== undefined && { argv: req.argv }),
      ...(req.command !== undefined && { command: req.command }),
      ...(req.cwd !== undefined && { cwd: req.cwd }),
      ...(req.env !== undefined && { env: req.env }),
    };
    c.waiting = true;
    this.#starting = start(sel);
    this.#starting.then(
      () => {
        this.#starting = undefined;
        this.#backend = sel.backend;
        this.#class = sel.class;
        // The PTY starts at this size: no Resize frame (nothing was drawn yet), the screen follows.
        this.#size = { cols: sel.cols, rows: sel.rows };
        this.#opts.screen?.resize(this.sessionId, this.#counter, sel.cols, sel.rows);
        if (this.#state === 'pending') this.#state = 'running';
        c.waiting = false;
        if (!c.sender.closed) this.#admit(c, { ...req, cols: undefined, rows: undefined }, requestId);
      },
      (err: unknown) => {
        this.#starting = undefined;
        const code = err instanceof StartError ? err.code : 'INTERNAL';
        const message = err instanceof Error ? err.message : String(err);
        for (const other of [...this.#clients.values()]) {
          if (other.waiting)
            this.#fatal(other, code, `the session could not start: ${message}`, CLOSE_CODES.notFound, other === c ? requestId : undefined);
        }
      },
    );
  }

  /** pty.session_input: the controller's keystrokes. */
  input(conn: FrameSink, data: Uint8Array, requestId?: string): void {
    const c = this.#member(conn, 'pty.session_input', requestId);
    if (c === undefined) return;
    if (!this.#membership.mayDrive(c.clientId))
      return this.#refuse(c, 'PERMISSION_DENIED', 'only the controller may type (request the controller role)', requestId);
    if (data.byteLength > 0) this.#opts.pty.input(data);
  }

  /** pty.session_resize: the controller resizes the PTY; everyone gets Resize. */
  resize(conn: FrameSink, cols: number, rows: number, requestId?: string): void {
    const c = this.#member(conn, 'pty.session_resize', requestId);
    if (c === undefined) return;
    if (!this.#membership.mayDrive(c.clientId)) return this.#refuse(c, 'PERMISSION_DENIED', 'only the controller may resize', requestId);
    this.#resizeTo({ cols, rows }, true);
  }

  /** pty.request_role: observer → controller if the lease is free; controller → observer releases it. */
  requestRole(conn: FrameSink, role: Role, requestId?: string): void {
    const c = this.#member(conn, 'pty.request_role', requestId);
    if (c === undefined) return;
    const before = this.#membership.roleOf(c.clientId);
    const g = this.#membership.requestRole(c.clientId, role);
    this.#sendRole(c, { role: g.role, clientId: c.clientId, requested: role, downgraded: g.role !== role, reason: g.reason }, requestId);
    if (before !== g.role) this.#broadcastMembership();
  }

  /** pty.request_keyframe: a fresh Keyframe to this client. */
  requestKeyframe(conn: FrameSink, requestId?: string): void {
    const c = this.#member(conn, 'pty.request_keyframe', requestId);
    if (c !== undefined) this.#syncKeyframe(c, requestId);
  }

  /** pty.leave_session: a last MembershipChanged (to everyone, the leaver included), goodbye, close 1000. */
  leave(conn: FrameSink, _requestId?: string): void {
    const c = this.#live(conn);
    if (c === undefined) return;
    if (c.joined && this.#membership.has(c.clientId)) {
      this.#membership.leave(c.clientId);
      this.#broadcastMembership();
    }
    this.#clients.delete(conn.id);
    this.#afterRemoval();
    this.#end(c, 'other', 'left the session');
  }

  /** A request that failed before reaching the hub (a frame that did not decode). */
  refuse(conn: FrameSink, code: ErrorCode, message: string, requestId: string | undefined, closeCode?: number): void {
    const c = this.#clients.get(conn.id);
    if (c === undefined) {
      conn.close(closeCode ?? CLOSE_CODES.protocolError, code);
      return;
    }
    this.#seen(c);
    if (closeCode === undefined) this.#refuse(c, code, message, requestId);
    else this.#fatal(c, code, message, closeCode, requestId);
  }

  /** Sends a connection-local frame in order with the client's other frames (e.g. a pong). */
  reply(conn: FrameSink, frame: string): void {
    const c = this.#live(conn);
    if (c !== undefined) c.sender.send(frame);
  }

  /** The agent of this session, when it has one (the A2A ops on pty-ws.v1, binding/a2a.ts). */
  get agentId(): string | undefined {
    return this.#opts.agentId;
  }

  /** Sends a connection-local frame built for the connection's position (A2A answers, binding/a2a.ts). */
  replyAt(conn: FrameSink, build: (position: number) => string): void {
    const c = this.#live(conn);
    if (c !== undefined) c.sender.send(build(c.position));
  }

  /** The connection closed (any reason). */
  disconnect(conn: FrameSink): void {
    const c = this.#clients.get(conn.id);
    if (c !== undefined) this.#remove(c);
  }

  /** PTY output with its agent seq; duplicates (seq ≤ newest taken) are ignored. */
  output(agentSeq: number, data: Uint8Array): void {
    if (this.#closed || !(agentSeq > this.#agentSeq)) return;
    this.#agentSeq = agentSeq;
    if (data.byteLength === 0) return;
    this.#opts.onOutput?.(data);
    this.#emit({ kind: 'Output', stream: 'stdout', data });
    this.#outputsSinceKeyframe++;
    const frames = this.#opts.keyframeIntervalFrames ?? DEFAULT_KEYFRAME_INTERVAL_FRAMES;
    const ms = this.#opts.keyframeIntervalMs ?? DEFAULT_KEYFRAME_INTERVAL_MS;
    if (this.#outputsSinceKeyframe >= frames || this.#now() - this.#lastKeyframeMs >= ms) this.#cadenceKeyframe();
  }

  /** Lifecycle news (detached, running again, agent away/back) for the dialects that show it. */
  setStatus(state: SessionState, agentConnected: boolean): void {
    if (this.#state === state && this.#agentConnected === agentConnected) return;
    this.#state = state;
    this.#agentConnected = agentConnected;
    const cache = new Map<string, string | undefined>();
    for (const c of this.#clients.values()) {
      if (!c.joined) continue;
      if (!cache.has(c.dialect.key)) cache.set(c.dialect.key, c.dialect.status({ state, agentConnected }));
      const frame = cache.get(c.dialect.key);
      if (frame !== undefined) c.sender.send(frame);
    }
  }

  /** The session ended: Closed to everyone, then binding_goodbye and close 1000; later joins are refused. Idempotent. */
  close(exitCode: number | null, cause: string): void {
    if (this.#closed) return;
    for (const q of [...this.#queue])
      if (q.ev === undefined) this.#fillSlot(q.seq, { kind: 'Error', code: 'KEYFRAME_UNAVAILABLE', message: 'the session ended' });
    this.#emit({ kind: 'Closed', exitCode, reason: closedReasonOf(cause), ...(cause !== 'exited' && { detail: cause }) });
    this.#closed = true;
    for (const c of [...this.#clients.values()]) {
      this.#clients.delete(c.conn.id);
      this.#end(c, 'session_closed', undefined);
    }
    this.#stopTimer();
    this.#opts.screen?.close(this.sessionId);
  }

  /**
   * Liveness: a Ping to each client silent for pingIntervalMs; a client that then answers nothing
   * for pongTimeoutMs is closed with 1011 (its lease is freed).
   */
  tick(nowMs: number = this.#now()): void {
    for (const c of [...this.#clients.values()]) {
      if (c.pingSentMs !== undefined && c.lastSeenMs < c.pingSentMs && nowMs - c.pingSentMs >= this.#pongTimeoutMs) {
        this.#fatal(c, 'INTERNAL', `no answer to a ping for ${this.#pongTimeoutMs} ms`, CLOSE_CODES.serverError, undefined);
      } else if (nowMs - c.lastSeenMs >= this.#pingIntervalMs && (c.pingSentMs === undefined || c.pingSentMs < c.lastSeenMs)) {
        c.pingSentMs = nowMs;
        c.conn.ping?.();
      }
    }
  }

  // -------------------------------------------------------------------------------------------

  #admit(c: Client, req: JoinRequest, requestId: string | undefined): void {
    c.joined = true;
    c.label = req.clientLabel;
    const first = !this.#everJoined && req.exactRole !== true;
    const max = this.#opts.maxObservers ?? DEFAULT_MAX_OBSERVERS;
    if (
      !first &&
      this.#membership.snapshot().observers.length >= max &&
      (req.role === 'observer' || this.#membership.controller !== undefined)
    )
      return this.#fatal(c, 'RATE_LIMITED', `this session has its ${max} observers already`, CLOSE_CODES.rateLimited, requestId);
    this.#everJoined = true;
    const grant = this.#membership.join(c.clientId, first ? 'controller' : req.role);
    const role: RoleInfo = {
      role: grant.role,
      clientId: c.clientId,
      requested: req.role,
      downgraded: req.role === 'controller' && grant.role === 'observer',
      reason: first && req.role === 'observer' ? 'first_joiner' : grant.reason,
    };
    const replayFrom = req.replayFrom ?? undefined;
    const range = replayFrom === undefined ? undefined : this.#replay.since(replayFrom);
    // A client without a usable cursor starts at the newest event emitted: events still waiting
    // behind a cadence slot are in its keyframe's snapshot, so it skips them.
    c.position = range?.inRange === true ? (replayFrom as number) : this.#counter;
    if (range?.inRange !== true) c.skipUpTo = this.#counter;
    this.#sendRole(c, role, requestId);
    if (range !== undefined) {
      if (range.inRange) {
        const frames = range.events.flatMap((e) => {
          const f = c.dialect.event(e);
          return f === undefined ? [] : [{ frame: f, cursor: String(e.sequence) }];
        });
        c.sender.sendReplay(frames);
        c.position = this.#delivered();
      } else {
        this.#refuse(
          c,
          'REPLAY_OUT_OF_RANGE',
          `replay_from ${replayFrom} is outside the retained window (${this.#replay.oldestSeq - 1}..${this.#replay.newestSeq}); a keyframe follows`,
          requestId,
        );
      }
    }
    if (grant.role === 'controller' && req.cols !== undefined && req.rows !== undefined)
      this.#resizeTo({ cols: req.cols, rows: req.rows }, true);
    const membership = this.#broadcastMembership();
    // The join's keyframe follows its MembershipChanged: at once, or (when that event waits behind
    // a cadence keyframe's slot) as soon as it reaches this client.
    if (membership <= this.#delivered()) this.#syncKeyframe(c, undefined);
    else c.keyframeAfter = membership;
  }

  /** Sequence of the newest event handed to clients (a pending cadence slot and what follows it excluded). */
  #delivered(): number {
    return this.#queue.length === 0 ? this.#counter : (this.#queue[0] as { seq: number }).seq - 1;
  }

  #checkSelection(req: JoinRequest): { code: ErrorCode; message: string } | undefined {
    const backend = req.sessionBackend;
    const cls = req.sessionClass;
    if (
      backend === undefined &&
      cls === undefined &&
      req.argv === undefined &&
      req.command === undefined &&
      req.cwd === undefined &&
      req.env === undefined
    )
      return undefined;
    const host = this.#opts.host();
    if (backend !== undefined && !host.supported_backends.includes(backend as never))
      return {
        code: 'session_backend.not_implemented',
        message: `session_backend ${backend} is not available here (binding_hello session_host)`,
      };
    if (cls !== undefined && !host.supported_classes.includes(cls as never))
      return { code: 'session_class.not_implemented', message: `session_class ${cls} is not available here (binding_hello session_host)` };
    const b = backend ?? this.#backend ?? host.default_backend;
    const k = cls ?? (this.#state === 'pending' ? (b === 'native' ? 'direct' : host.default_class) : (this.#class ?? host.default_class));
    if (!host.pairs.some((p) => p.session_backend === b && p.session_class === k && p.available)) {
      return {
        code: backend !== undefined && cls === undefined ? 'session_backend.not_implemented' : 'session_class.not_implemented',
        message: `${b}/${k} is not an available pair here (binding_hello session_host)`,
      };
    }
    if (this.#state === 'pending') return undefined;
    if ((backend !== undefined && backend !== this.#backend) || (cls !== undefined && cls !== this.#class))
      return {
        code: 'INVALID_REQUEST',
        message: `this session runs ${this.#backend ?? '?'}/${this.#class ?? '?'}; a join attaches to it as it is`,
      };
    if (req.argv !== undefined || req.command !== undefined || req.cwd !== undefined || req.env !== undefined) {
      return {
        code: 'INVALID_REQUEST',
        message: 'argv, command, cwd and env start a session: join /agents/{instance_id}/sessions/{new session id}/attach to start one',
      };
    }
    return undefined;
  }

  #sendRole(c: Client, r: RoleInfo, requestId: string | undefined): void {
    const frame = c.dialect.role(r, c.position, requestId);
    if (frame !== undefined) c.sender.send(frame);
  }

  /** Holds the client's live frames, and sends it a fresh keyframe followed by what the snapshot does not cover. */
  #syncKeyframe(c: Client, requestId: string | undefined): void {
    const screen = this.#opts.screen;
    if (screen === undefined) return this.#sendSessionError(c, 'KEYFRAME_UNAVAILABLE', 'this server keeps no screen state');
    if (c.syncing) return;
    c.syncing = true;
    c.sender.hold();
    const at = c.position;
    screen.snapshot(this.sessionId).then(
      (snap) => {
        c.syncing = false;
        if (c.sender.closed) return;
        const ev: Extract<SessionEvent, { kind: 'Keyframe' }> = {
          kind: 'Keyframe',
          sequence: at,
          id: newFrameId(),
          ts: nowTs(),
          snapshot: snap.data,
          format: snap.format,
          cols: snap.cols,
          rows: snap.rows,
          anchorSequence: snap.anchorSequence,
        };
        const frame = c.dialect.keyframe(ev, at, requestId);
        c.skipUpTo = Math.max(c.skipUpTo, snap.anchorSequence);
        c.sender.resumeLive(
          frame === undefined ? [] : [{ frame }],
          (cursor) => cursor === undefined || Number(cursor) > snap.anchorSequence,
        );
      },
      (err: unknown) => {
        c.syncing = false;
        if (c.sender.closed) return;
        const message = `no keyframe: ${err instanceof Error ? err.message : String(err)}`;
        const frame = c.dialect.event({
          kind: 'Error',
          code: 'KEYFRAME_UNAVAILABLE',
          message,
          sequence: at,
          id: newFrameId(),
          ts: nowTs(),
        });
        c.sender.resumeLive(frame === undefined ? [] : [{ frame }]);
      },
    );
  }

  #sendSessionError(c: Client, code: SessionErrorCode, message: string): void {
    const frame = c.dialect.event({ kind: 'Error', code, message, sequence: c.position, id: newFrameId(), ts: nowTs() });
    if (frame !== undefined) c.sender.send(frame);
  }

  /** A cadence keyframe: reserve its sequence now; events after it wait until the snapshot fills it. */
  #cadenceKeyframe(): void {
    const screen = this.#opts.screen;
    if (screen === undefined || this.#closed) return;
    this.#outputsSinceKeyframe = 0;
    this.#lastKeyframeMs = this.#now();
    const slot = ++this.#counter;
    this.#queue.push({ seq: slot, ev: undefined });
    const timeout = setTimeout(
      () => this.#fillSlot(slot, { kind: 'Error', code: 'KEYFRAME_UNAVAILABLE', message: 'the snapshot took too long' }),
      this.#opts.keyframeTimeoutMs ?? DEFAULT_KEYFRAME_TIMEOUT_MS,
    );
    timeout.unref();
    screen.snapshot(this.sessionId).then(
      (snap) => {
        clearTimeout(timeout);
        this.#fillSlot(slot, {
          kind: 'Keyframe',
          snapshot: snap.data,
          format: snap.format,
          cols: snap.cols,
          rows: snap.rows,
          anchorSequence: snap.anchorSequence,
        });
      },
      (err: unknown) => {
        clearTimeout(timeout);
        this.#fillSlot(slot, {
          kind: 'Error',
          code: 'KEYFRAME_UNAVAILABLE',
          message: `no keyframe: ${err instanceof Error ? err.message : String(err)}`,
        });
      },
    );
  }

  #fillSlot(slot: number, e: NewEvent): void {
    const entry = this.#queue.find((q) => q.seq === slot);
    if (entry === undefined || entry.ev !== undefined) return;
    entry.ev = { ...e, sequence: slot, id: newFrameId(), ts: nowTs() };
    while (this.#queue[0]?.ev !== undefined) this.#deliver((this.#queue.shift() as { ev: SessionEvent }).ev);
  }

  /** A new session event: numbered, fed to the screen, then delivered (or queued behind a cadence slot). */
  #emit(e: NewEvent): number {
    const ev = { ...e, sequence: ++this.#counter, id: newFrameId(), ts: nowTs() } as SessionEvent;
    if (ev.kind === 'Output') this.#opts.screen?.output(this.sessionId, ev.sequence, ev.data);
    else if (ev.kind === 'Resize') this.#opts.screen?.resize(this.sessionId, ev.sequence, ev.cols, ev.rows);
    if (this.#queue.length > 0) this.#queue.push({ seq: ev.sequence, ev });
    else this.#deliver(ev);
    return ev.sequence;
  }

  #deliver(ev: SessionEvent): void {
    this.#replay.append(ev);
    const cache = new Map<string, string | Uint8Array | undefined>();
    for (const c of [...this.#clients.values()]) {
      if (!c.joined || c.sender.closed) continue;
      if (ev.sequence <= c.skipUpTo) continue;
      if (!cache.has(c.dialect.key)) cache.set(c.dialect.key, c.dialect.event(ev));
      const frame = cache.get(c.dialect.key);
      c.position = ev.sequence;
      if (frame !== undefined) c.sender.send(frame, String(ev.sequence));
      if (c.keyframeAfter === ev.sequence) {
        c.keyframeAfter = undefined;
        this.#syncKeyframe(c, undefined);
      }
    }
  }

  #resizeTo(size: TerminalSize, tellPty: boolean): void {
    if (size.cols === this.#size.cols && size.rows === this.#size.rows) return;
    this.#size = { cols: size.cols, rows: size.rows };
    if (tellPty) this.#opts.pty.resize(size.cols, size.rows);
    this.#opts.onResize?.(this.#size);
    this.#emit({ kind: 'Resize', cols: size.cols, rows: size.rows });
  }

  #live(conn: FrameSink): Client | undefined {
    const c = this.#clients.get(conn.id);
    if (c === undefined || c.sender.closed) return undefined;
    this.#seen(c);
    return c;
  }

  #member(conn: FrameSink, op: string, requestId: string | undefined): Client | undefined {
    const c = this.#live(conn);
    if (c === undefined) return undefined;
    if (c.joined && this.#membership.has(c.clientId)) return c;
    this.#refuse(c, 'INVALID_REQUEST', `${op} before pty.join_session`, requestId);
    return undefined;
  }

  #seen(c: Client): void {
    c.lastSeenMs = this.#now();
  }

  #refuse(c: Client, code: ErrorCode, message: string, requestId: string | undefined): void {
    c.sender.send(c.dialect.error(code, message, c.position, requestId));
  }

  #fatal(c: Client, code: ErrorCode, message: string, closeCode: number, requestId: string | undefined): void {
    this.#remove(c);
    c.sender.close(c.dialect.error(code, message, c.position, requestId), () => c.conn.close(closeCode, code));
  }

  /** Orderly end of one client: what is queued, then goodbye, then close 1000. */
  #end(c: Client, reason: 'session_closed' | 'other', detail: string | undefined): void {
    const bye = c.dialect.goodbye(reason, detail);
    c.sender.endWith(bye);
  }

  #remove(c: Client): void {
    if (!this.#clients.delete(c.conn.id)) return;
    const wasMember = this.#membership.has(c.clientId);
    this.#membership.leave(c.clientId);
    if (wasMember) this.#broadcastMembership();
    this.#afterRemoval();
  }

  #afterRemoval(): void {
    if (this.#clients.size > 0) return;
    this.#stopTimer();
    if (this.#state === 'pending' && this.#starting === undefined) this.#opts.onIdle?.();
  }

  #isLive(clientId: string): boolean {
    for (const c of this.#clients.values()) {
      if (c.clientId !== clientId) continue;
      const unanswered = c.pingSentMs !== undefined && c.lastSeenMs < c.pingSentMs && this.#now() - c.pingSentMs >= this.#pongTimeoutMs;
      return !c.sender.closed && !unanswered;
    }
    return false;
  }

  /** Emits MembershipChanged; returns its sequence. */
  #broadcastMembership(): number {
    const refs = (ids: readonly string[]): ClientRef[] =>
      ids.map((id) => {
        const label = [...this.#clients.values()].find((c) => c.clientId === id)?.label;
        return label === undefined ? { client_id: id } : { client_id: id, label };
      });
    const m = this.#membership.snapshot();
    return this.#emit({ kind: 'MembershipChanged', controllers: refs(m.controllers), observers: refs(m.observers) });
  }

  #startTimer(): void {
    if (this.#timer !== undefined || this.#pingIntervalMs <= 0) return;
    const every = Math.max(100, Math.min(5_000, Math.floor(this.#pongTimeoutMs / 2)));
    this.#timer = setInterval(() => this.tick(), every).unref();
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
