/**
 * The orchestration server link (spec part 1, ORCH_SERVE_ENDPOINT; part 6 "Streams"): one
 * persistent WebSocket to the orchestration server, over which sandboxd registers itself and then
 * pushes every v1 event, fire-and-forget.
 *
 * - Never blocks the server: `enqueue` is synchronous and cheap (one JSON encoding, a push on a
 *   bounded queue, and, while connected, hand-over to the socket up to a high-water mark of
 *   buffered bytes). Nothing on the event path awaits the network.
 * - Bounded: the queue (link-queue.ts) drops the oldest message when full and sends a gap record
 *   with the count before the messages that follow.
 * - Reconnects with exponential backoff and full jitter (src/guest-agent/backoff.ts), bounded by
 *   maxMs; the backoff starts over after a connection that stayed up `stableAfterMs`, or at once
 *   on `reconnectNow()` (POST /api/v1/aiwg/reconnect).
 * - A dead endpoint costs metrics and at most one log line per `logIntervalMs`.
 * - Messages the socket had not confirmed written when a connection dropped are put back at the
 *   head of the queue and go out after the reconnect (one written just then may thus come twice:
 *   same `seq`; one the kernel had accepted but the peer never read is gone with the connection:
 *   fire-and-forget; the receiver sees it by the jump in `seq`).
 *
 * Wire (README "Orchestration link and aiwg bridge"): the first text message of every connection
 * is `register`; then `gap` and `event` messages. What the server sends is read and ignored.
 *
 * States (on the core state machine, without its per-move log line: a dead endpoint would log
 * every retry):  idle → connecting → open → waiting → connecting …; any → stopped.
 */
import { createRequire } from 'node:module';
import { StateMachine, type TransitionTable } from '../core/state-machine.js';
import type { StoredEvent } from '../events/event-store.js';
import { Backoff } from '../guest-agent/backoff.js';
import { errorMessage } from '../util/error-message.js';
import { LinkQueue, type Outgoing } from './link-queue.js';

export type LinkState = 'idle' | 'connecting' | 'open' | 'waiting' | 'stopped';

export const LINK_TRANSITIONS: TransitionTable<LinkState> = {
  idle: ['connecting', 'stopped'],
  connecting: ['open', 'waiting', 'stopped'],
  open: ['waiting', 'connecting', 'stopped'],
  waiting: ['connecting', 'stopped'],
  stopped: [],
};

/** The wire protocol name in the register message. */
export const ORCH_LINK_PROTOCOL = 'sandboxd.orch-link/v1';

/** The client socket: the part of the `ws` package's WebSocket the link uses. */
export interface LinkSocket {
  readonly readyState: number;
  readonly bufferedAmount: number;
  on(event: 'open' | 'pong', cb: () => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'message', cb: (data: unknown) => void): this;
  send(data: string, cb: (err?: Error) => void): void;
  ping(): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
}

export type LinkSocketFactory = (url: string, opts: { handshakeTimeoutMs: number }) => LinkSocket;

type WsCtor = new (url: string, opts: { handshakeTimeout: number; perMessageDeflate: boolean; followRedirects: boolean }) => LinkSocket;

/** Sockets of the `ws` package (a dependency; it ships no types, hence the require). */
export const wsSocketFactory: LinkSocketFactory = (url, opts) => {
  const { WebSocket } = createRequire(import.meta.url)('ws') as { WebSocket: WsCtor };
  // No compression: events are small, and deflate would queue sends behind zlib (send callbacks
  // stay in order either way).
  return new WebSocket(url, { handshakeTimeout: opts.handshakeTimeoutMs, perMessageDeflate: false, followRedirects: false });
};

const OPEN = 1;

/** What the link counts (the component binds them to svc_orch_link_* metrics). */
export interface LinkMetrics {
  connected(open: boolean): void;
  eventSent(): void;
  gapSent(): void;
  dropped(count: number): void;
  connectFailed(): void;
  reconnect(): void;
}

export interface LinkLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface OrchLinkOptions {
  /** ORCH_SERVE_ENDPOINT (ws: or wss:). */
  readonly url: string;
  /** The register message's fields, built at each connection (ports, counts). */
  readonly registration: () => Record<string, unknown>;
  readonly queueMaxMessages: number;
  readonly queueMaxBytes: number;
  /** Full-jitter backoff bounds, ms. */
  readonly backoffInitialMs: number;
  readonly backoffMaxMs: number;
  readonly logger: LinkLogger;
  readonly metrics?: LinkMetrics;
  /** At most one warn line per this many ms while the endpoint fails. Default 60 000. */
  readonly logIntervalMs?: number;
  /** A connection up this long resets the backoff when it drops. Default 10 000. */
  readonly stableAfterMs?: number;
  /** Ping period; no pong by the next ping ends the connection. Default 20 000. */
  readonly pingIntervalMs?: number;
  /** Opening handshake deadline. Default 10 000. */
  readonly handshakeTimeoutMs?: number;
  /** Stop handing messages to the socket while it buffers more than this. Default 1 MiB. */
  readonly highWaterBytes?: number;
  readonly socketFactory?: LinkSocketFactory;
  readonly now?: () => number;
}

/** The link's state for GET /api/v1/aiwg/status and tests. */
export interface LinkStatus {
  readonly state: LinkState;
  readonly connected: boolean;
  readonly queued: number;
  readonly eventsSent: number;
  readonly eventsDropped: number;
  readonly gapsSent: number;
  readonly connections: number;
  readonly connectFailures: number;
  /** Unix ms of the last event message the socket wrote; null before the first. */
  readonly lastEventSentAtMs: number | null;
  /** The last connection failure's message (never the URL's credentials); null when none. */
  readonly lastError: string | null;
}

/** The endpoint as logged and reported: no user info, no query (a token may ride there). */
export function redactEndpoint(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(unparsable)';
  }
}

export class OrchLink {
  readonly #o: OrchLinkOptions;
  readonly #now: () => number;
  readonly #queue: LinkQueue;
  readonly #backoff: Backoff;
  readonly #machine: StateMachine<LinkState>;
  readonly #factory: LinkSocketFactory;
  readonly #endpoint: string;
  #socket: LinkSocket | null = null;
  /** Bumped for every socket; callbacks of an older socket are ignored. */
  #generation = 0;
  /** Taken from the queue and handed to the socket, not yet confirmed written (in send order). */
  #inflight: Outgoing[] = [];
  #openedAtMs = 0;
  #retryTimer: NodeJS.Timeout | null = null;
  #pingTimer: NodeJS.Timeout | null = null;
  #pongSeen = true;
  #eventsSent = 0;
  #gapsSent = 0;
  #connections = 0;
  #connectFailures = 0;
  #lastEventSentAtMs: number | null = null;
  #lastError: string | null = null;
  #lastLogAtMs = -Infinity;
  #lastLogLevel: 'info' | 'warn' = 'info';
  #unloggedFailures = 0;
  #stopping: Promise<void> | null = null;

  constructor(o: OrchLinkOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#endpoint = redactEndpoint(o.url);
    this.#factory = o.socketFactory ?? wsSocketFactory;
    this.#queue = new LinkQueue({
      maxMessages: o.queueMaxMessages,
      maxBytes: o.queueMaxBytes,
      onDrop: (n) => o.metrics?.dropped(n),
    });
    this.#backoff = new Backoff({ initialMs: o.backoffInitialMs, maxMs: o.backoffMaxMs });
    this.#machine = new StateMachine<LinkState>({ name: 'orchestration link', initial: 'idle', table: LINK_TRANSITIONS, now: this.#now });
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  /** Starts connecting; returns at once (the server never waits for the orchestration server). */
  start(): void {
    if (this.#machine.transition(['idle'], 'connecting', 'start')) this.#connect();
  }

  /**
   * Queues one event for the server (the event store's live subscriber). Synchronous; never throws
   * into the caller; drops the oldest queued message when the queue is full.
   */
  enqueue(event: StoredEvent): void {
    if (this.#machine.state === 'stopped') return;
    this.#queue.push({ seq: event.id, text: JSON.stringify({ type: 'event', seq: event.id, event }) });
    if (this.#machine.state === 'open') this.#flush();
  }

  /** Drops the current connection (or attempt, or wait) and connects now, the backoff reset. */
  reconnectNow(): void {
    const state = this.#machine.state;
    if (state === 'stopped' || state === 'idle') return;
    this.#clearRetry();
    this.#backoff.reset();
    this.#dropSocket();
    if (state !== 'connecting') this.#machine.transition(['open', 'waiting'], 'connecting', 'reconnect_requested');
    this.#o.metrics?.reconnect();
    this.#connect();
  }

  status(): LinkStatus {
    return {
      state: this.#machine.state,
      connected: this.#machine.state === 'open',
      queued: this.#queue.length,
      eventsSent: this.#eventsSent,
      eventsDropped: this.#queue.droppedTotal,
      gapsSent: this.#gapsSent,
      connections: this.#connections,
      connectFailures: this.#connectFailures,
      lastEventSentAtMs: this.#lastEventSentAtMs,
      lastError: this.#lastError,
    };
  }

  /**
   * Stops: no more reconnects; an open connection gets what is queued (as far as the socket takes
   * it) and a close (1001), and is cut after `deadlineMs`. Idempotent.
   */
  stop(deadlineMs = 1000): Promise<void> {
    this.#stopping ??= this.#stop(deadlineMs);
    return this.#stopping;
  }

  async #stop(deadlineMs: number): Promise<void> {
    const wasOpen = this.#machine.state === 'open';
    if (wasOpen) this.#flush();
    this.#machine.transition(['idle', 'connecting', 'open', 'waiting'], 'stopped', 'stop');
    this.#clearRetry();
    this.#clearPing();
    const socket = this.#socket;
    if (socket === null) return;
    this.#socket = null;
    this.#generation++;
    this.#o.metrics?.connected(false);
    if (!wasOpen) {
      socket.terminate();
      return;
    }
    await new Promise<void>((resolve) => {
      const cut = setTimeout(() => {
        socket.terminate();
        resolve();
      }, deadlineMs);
      cut.unref();
      socket.on('close', () => {
        clearTimeout(cut);
        resolve();
      });
      socket.close(1001, 'sandboxd stopping');
    });
  }

  #connect(): void {
    const generation = ++this.#generation;
    let socket: LinkSocket;
    try {
      socket = this.#factory(this.#o.url, { handshakeTimeoutMs: this.#o.handshakeTimeoutMs ?? 10_000 });
    } catch (err) {
      this.#failed(errorMessage(err), false);
      return;
    }
    this.#socket = socket;
    let opened = false;
    socket.on('open', () => {
      if (generation !== this.#generation) return;
      opened = true;
      this.#opened(socket);
    });
    socket.on('pong', () => {
      this.#pongSeen = true;
    });
    socket.on('message', () => {
      // Read and ignored: the link is one-way (README).
    });
    socket.on('error', (err) => {
      if (generation === this.#generation) this.#lastError = errorMessage(err);
    });
    socket.on('close', (code) => {
      if (generation !== this.#generation) return;
      // Late send callbacks of this socket are ignored from now on: what was in flight is requeued.
      this.#generation++;
      this.#socket = null;
      this.#clearPing();
      this.#restoreInflight();
      if (opened) {
        this.#o.metrics?.connected(false);
        if (this.#now() - this.#openedAtMs >= (this.#o.stableAfterMs ?? 10_000)) this.#backoff.reset();
        this.#lastError = `connection closed (code ${code})`;
      }
      this.#failed(this.#lastError ?? `connection closed (code ${code})`, opened);
    });
  }

  #opened(socket: LinkSocket): void {
    if (!this.#machine.transition(['connecting'], 'open', 'connected')) return;
    this.#connections++;
    this.#openedAtMs = this.#now();
    this.#o.metrics?.connected(true);
    const register = {
      ...this.#o.registration(),
      type: 'register',
      protocol: ORCH_LINK_PROTOCOL,
      connection: this.#connections,
      queued: this.#queue.length,
      pending_gap: this.#queue.pendingGap,
    };
    socket.send(JSON.stringify(register), () => undefined);
    this.#log(
      'info',
      { endpoint: this.#endpoint, connection: this.#connections, queued: this.#queue.length },
      'orchestration link: registered',
    );
    this.#unloggedFailures = 0;
    this.#pongSeen = true;
    const interval = this.#o.pingIntervalMs ?? 20_000;
    this.#pingTimer = setInterval(() => {
      if (!this.#pongSeen) {
        this.#lastError = `no pong within ${interval} ms`;
        socket.terminate();
        return;
      }
      this.#pongSeen = false;
      socket.ping();
    }, interval);
    this.#pingTimer.unref();
    this.#flush();
  }

  /** Hands queued messages to the open socket while it buffers less than the high-water mark. */
  #flush(): void {
    const socket = this.#socket;
    if (socket === null || socket.readyState !== OPEN || this.#machine.state !== 'open') return;
    const highWater = this.#o.highWaterBytes ?? 1024 * 1024;
    const generation = this.#generation;
    while (socket.bufferedAmount < highWater) {
      const out = this.#queue.shift();
      if (out === null) return;
      this.#inflight.push(out);
      const text = out.kind === 'gap' ? JSON.stringify(out.gap) : out.message.text;
      socket.send(text, (err) => {
        if (generation !== this.#generation) return;
        // An error leaves the message in #inflight: the close that follows puts it back.
        if (err !== undefined && err !== null) return;
        const done = this.#inflight.shift();
        if (done?.kind === 'gap') {
          this.#gapsSent++;
          this.#o.metrics?.gapSent();
        } else if (done !== undefined) {
          this.#eventsSent++;
          this.#lastEventSentAtMs = this.#now();
          this.#o.metrics?.eventSent();
        }
        if (socket.bufferedAmount < highWater) this.#flush();
      });
    }
  }

  #restoreInflight(): void {
    const back = this.#inflight;
    this.#inflight = [];
    const messages = [];
    for (const out of back) {
      if (out.kind === 'gap') this.#queue.restoreGap(out.gap);
      else messages.push(out.message);
    }
    this.#queue.unshift(messages);
  }

  /** A connection attempt failed or an open connection ended: wait, then try again. */
  #failed(reason: string, wasOpen: boolean): void {
    if (this.#machine.state === 'stopped') return;
    this.#lastError = reason;
    if (!wasOpen) {
      this.#connectFailures++;
      this.#o.metrics?.connectFailed();
    }
    const delayMs = this.#backoff.nextDelayMs();
    this.#machine.transition(['connecting', 'open'], 'waiting', wasOpen ? 'connection_lost' : 'connect_failed');
    this.#unloggedFailures++;
    this.#log(
      'warn',
      {
        endpoint: this.#endpoint,
        error: reason,
        failures: this.#unloggedFailures,
        retry_in_ms: delayMs,
        queued: this.#queue.length,
        dropped_total: this.#queue.droppedTotal,
      },
      wasOpen ? 'orchestration link: connection lost; reconnecting' : 'orchestration link: cannot reach the orchestration server',
    );
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      if (!this.#machine.transition(['waiting'], 'connecting', 'retry')) return;
      this.#o.metrics?.reconnect();
      this.#connect();
    }, delayMs);
    this.#retryTimer.unref();
  }

  /** One line per logIntervalMs at most (plus the one saying it is connected again). */
  #log(level: 'info' | 'warn', fields: object, msg: string): void {
    const now = this.#now();
    // The line saying it is back after a logged failure always goes out.
    const recovery = level === 'info' && this.#lastLogLevel === 'warn';
    if (!recovery && now - this.#lastLogAtMs < (this.#o.logIntervalMs ?? 60_000)) return;
    this.#lastLogAtMs = now;
    this.#lastLogLevel = level;
    this.#o.logger[level](fields, msg);
    if (level === 'warn') this.#unloggedFailures = 0;
  }

  /** Detaches and ends the current socket without a retry of its own (reconnectNow). */
  #dropSocket(): void {
    this.#clearPing();
    const socket = this.#socket;
    this.#socket = null;
    this.#generation++;
    this.#restoreInflight();
    if (socket === null) return;
    if (socket.readyState === OPEN) this.#o.metrics?.connected(false);
    socket.terminate();
  }

  #clearRetry(): void {
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
  }

  #clearPing(): void {
    if (this.#pingTimer !== null) clearInterval(this.#pingTimer);
    this.#pingTimer = null;
  }
}
