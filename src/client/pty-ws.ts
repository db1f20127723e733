/**
 * A terminal connection over the published pty-ws.v1 binding (`/api/v1/sessions/{id}/pty` on the
 * HTTP listener), for the dashboard's xterm.js and `sbx session attach`. The WebSocket constructor
 * is injected (the browser's, or the `ws` package's in Node), so this file runs in both. The
 * frames are the binding's (src/sessions/binding/README.md; this client's reading of them is
 * pty-ws-wire.ts):
 *
 *   open      offers pty-ws.v1.binary and pty-ws.v1; with binary, output arrives as PW1O
 *             messages and input leaves as PW1I (control frames stay JSON)
 *   server →  binding_hello; then, after our pty.join_session {role, cols?, rows?, client_label}
 *             (+ envelope replay_from): RoleAssigned, the missed frames (or Error
 *             REPLAY_OUT_OF_RANGE), MembershipChanged, a Keyframe, live frames
 *   both      ping → pong (same id, client_ts echoed, server_ts of the answering side)
 *
 * Screen rules, kept here so every client draws the same: a Keyframe whose anchor is newer than
 * what the terminal shows is delivered (onKeyframe: reset the terminal, write the snapshot), one
 * that is older or equal is dropped (cadence keyframes of a live stream are, so the screen and
 * its scrollback are not redrawn every few seconds); Output and Resize at or below the screen's
 * sequence are dropped (the snapshot holds them). Resuming after a drop: open a new connection
 * with `replayFrom: old.lastSequence`; the server replays what is newer, or, when it no longer
 * has it, says REPLAY_OUT_OF_RANGE and a Keyframe redraws the screen.
 */
import { bytesToBase64 } from './base64.js';
import type { WebSocketConstructor, WebSocketLike } from './http-transport.js';
import {
  clientFrameText,
  decodeServerMessage,
  encodeInputMessage,
  KEYFRAME_FORMAT_VT100,
  kMaxInputBytes,
  kMaxLabelChars,
  kMaxTerminalDim,
  PTY_WS_BINARY_SUBPROTOCOL,
  PTY_WS_SUBPROTOCOL,
  type PtyClientRef,
  type PtyOutputStream,
  type PtyRole,
  type PtyServerMessage,
} from './pty-ws-wire.js';

export { PTY_WS_BINARY_SUBPROTOCOL, PTY_WS_SUBPROTOCOL, PtyCloseCode } from './pty-ws-wire.js';
export type { PtyClientRef, PtyOutputStream, PtyRole, PtyServerMessage } from './pty-ws-wire.js';

export interface PtyRoleInfo {
  /** The role this connection last asked for. */
  requested: PtyRole;
  /** A controller request answered with observer (another client holds the lease). */
  downgraded: boolean;
  reason: string | undefined;
  clientId: string;
}

/** A screen snapshot to draw on a reset terminal (format vt100-screen-state-v1). */
export interface PtyKeyframe {
  snapshot: Uint8Array;
  cols: number;
  rows: number;
  anchorSequence: number;
}

export interface PtyMembership {
  /** Empty while the lease is free, never more than one. */
  controllers: PtyClientRef[];
  observers: PtyClientRef[];
}

export interface PtyErrorInfo {
  /** `binding`: an Error frame (a refused request, REPLAY_OUT_OF_RANGE, …); `session`: a PTY-level Error frame. */
  scope: 'binding' | 'session';
  /** The same request may succeed later (binding errors say so; PTY errors never end the connection). */
  retryable: boolean;
}

export interface PtyConnectOptions {
  /** Requested role. The server may grant observer instead of controller (see onRole). */
  role: PtyRole;
  cols: number;
  rows: number;
  /** Resume: the previous connection's lastSequence; the terminal shows everything up to it. */
  replayFrom?: number;
  /** Shown to other clients in membership (≤ 128 characters). */
  clientLabel?: string;
  /** Offer pty-ws.v1.binary (PTY bytes in binary messages). Default true. */
  binary?: boolean;
  /**
   * Application ping every this many ms; a server silent for twice as long is taken as gone (the
   * connection ends with 1006, so callers reconnect). Default 25 000; 0: no pings.
   */
  pingIntervalMs?: number;
  /** binding_hello's payload (capabilities, limits, the session's current sequence). */
  onHello?(payload: Record<string, unknown>): void;
  /** The role granted, after the join and after every role request. */
  onRole?(granted: PtyRole, info: PtyRoleInfo): void;
  /** Reset the terminal, then write `snapshot`; observers also take its size. */
  onKeyframe?(keyframe: PtyKeyframe): void;
  /** Terminal bytes, in order, none already drawn. */
  onOutput?(bytes: Uint8Array, sequence: number, stream: PtyOutputStream): void;
  /** The PTY's size changed (observers follow it). */
  onResize?(cols: number, rows: number): void;
  onMembership?(membership: PtyMembership): void;
  /** The session ended (its process exited or it was killed); the server closes after binding_goodbye. */
  onExit?(info: { exitCode: number | null; reason: string; detail: string | undefined }): void;
  onError?(code: string, message: string, info: PtyErrorInfo): void;
  /** The server is about to close (reason: server_shutdown, session_closed, rate_limited, …). */
  onGoodbye?(reason: string, detail: string | undefined): void;
  /** The socket closed (nothing more arrives). 1006: no close frame (network, refused upgrade, silent server). */
  onClose?(code: number, reason: string): void;
  /** Every decoded message (diagnostics). */
  onFrame?(message: PtyServerMessage): void;
}

const OPEN = 1;
const kDefaultPingIntervalMs = 25_000;

/** A size the binding accepts: 1..1024 (a terminal not laid out yet may report 0 or NaN). */
const dim = (v: number, fallback: number): number =>
  Number.isFinite(v) ? Math.min(kMaxTerminalDim, Math.max(1, Math.round(v))) : fallback;

function unref(timer: unknown): void {
  (timer as { unref?: () => void }).unref?.();
}

export class PtyConnection {
  readonly url: string;
  readonly #ws: WebSocketLike;
  readonly #opts: PtyConnectOptions;
  #requested: PtyRole;
  #role: PtyRole | null = null;
  /** We released a controller role the server gave without our asking; its confirmation is not news. */
  #releasing = false;
  #joined = false;
  #replayFrom: number | undefined;
  /** Highest sequence of the session stream received (or covered by a keyframe). */
  #lastSequence: number;
  /** Sequence of the newest Output/Resize the terminal shows (a keyframe's anchor counts). */
  #screenSequence: number;
  /** An explicit keyframe request or a replay gap: the next keyframe is drawn even at the screen's sequence. */
  #keyframeWanted = false;
  /** When the first ping since the server was last heard went out; undefined while nothing is unanswered. */
  #unansweredSinceMs: number | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  #closedInfo: { code: number; reason: string } | null = null;
  readonly #closedWaiters: Array<(info: { code: number; reason: string }) => void> = [];
  readonly #encoder = new TextEncoder();

  constructor(ctor: WebSocketConstructor, url: string, opts: PtyConnectOptions) {
    this.url = url;
    this.#opts = { ...opts, cols: dim(opts.cols, 80), rows: dim(opts.rows, 24) };
    this.#requested = opts.role;
    this.#replayFrom = opts.replayFrom;
    this.#lastSequence = opts.replayFrom ?? -1;
    this.#screenSequence = opts.replayFrom ?? -1;
    const protocols = opts.binary === false ? [PTY_WS_SUBPROTOCOL] : [PTY_WS_BINARY_SUBPROTOCOL, PTY_WS_SUBPROTOCOL];
    this.#ws = new ctor(url, protocols);
    this.#ws.binaryType = 'arraybuffer';
    this.#ws.onmessage = (ev) => this.#onMessage(ev.data);
    this.#ws.onclose = (ev) => this.#finish(ev.code, ev.reason);
    this.#ws.onerror = () => {
      // A close event follows (1006 when there was no close frame).
    };
    this.#ws.onopen = () => this.#startPings();
  }

  /** The granted role (null until the join is answered, and after close). */
  get role(): PtyRole | null {
    return this.#role;
  }

  /** Highest session sequence received: resume with `replayFrom: lastSequence` (-1: nothing yet). */
  get lastSequence(): number {
    return this.#lastSequence;
  }

  /** The negotiated subprotocol ('' before open). */
  get protocol(): string {
    return this.#ws.protocol;
  }

  /** Resolves when the connection has ended. */
  closed(): Promise<{ code: number; reason: string }> {
    if (this.#closedInfo !== null) return Promise.resolve(this.#closedInfo);
    return new Promise((resolve) => this.#closedWaiters.push(resolve));
  }

  /** Sends keystrokes (in 64 KiB frames); false (nothing sent) unless this connection is the controller. */
  input(data: string | Uint8Array): boolean {
    if (this.#role !== 'controller' || this.#ws.readyState !== OPEN) return false;
    const bytes = typeof data === 'string' ? this.#encoder.encode(data) : data;
    const binary = this.#ws.protocol === PTY_WS_BINARY_SUBPROTOCOL;
    for (let at = 0; at < bytes.byteLength; at += kMaxInputBytes) {
      const chunk = bytes.subarray(at, Math.min(bytes.byteLength, at + kMaxInputBytes));
      if (binary) this.#ws.send(encodeInputMessage(chunk));
      else this.#ws.send(clientFrameText('pty.session_input', { data: bytesToBase64(chunk) }));
    }
    return true;
  }

  /** Reports the terminal's size (clamped to 1..1024); only a controller's reaches the PTY (false otherwise). */
  resize(cols: number, rows: number): boolean {
    this.#opts.cols = dim(cols, this.#opts.cols);
    this.#opts.rows = dim(rows, this.#opts.rows);
    if (this.#role !== 'controller') return false;
    return this.#send('pty.session_resize', { cols: this.#opts.cols, rows: this.#opts.rows });
  }

  /** Asks for another role: controller (granted only while the lease is free) or observer (releases it). */
  requestRole(role: PtyRole): boolean {
    this.#requested = role;
    return this.#send('pty.request_role', { role });
  }

  /** Asks for a fresh Keyframe (a screen that went wrong); it is drawn even if nothing changed since. */
  requestKeyframe(): boolean {
    this.#keyframeWanted = true;
    return this.#send('pty.request_keyframe', {});
  }

  /** Leaves politely (the server closes with 1000). */
  leave(): boolean {
    return this.#send('pty.leave_session', {});
  }

  close(code = 1000, reason = 'client closed'): void {
    if (this.#closedInfo !== null) return;
    try {
      this.#ws.close(code, reason);
    } catch {
      this.#finish(code, reason);
    }
  }

  #send(op: string, payload: Record<string, unknown>, extra?: { id?: string; replayFrom?: number }): boolean {
    if (this.#ws.readyState !== OPEN) return false;
    this.#ws.send(clientFrameText(op, payload, extra));
    return true;
  }

  #join(currentSequence: number | undefined): void {
    if (this.#joined || this.#closedInfo !== null) return;
    this.#joined = true;
    // A session whose counter is behind our cursor is not the stream we saw (a restarted server):
    // join fresh and let the keyframe redraw everything.
    if (this.#replayFrom !== undefined && currentSequence !== undefined && currentSequence < this.#replayFrom) this.#forgetScreen();
    const o = this.#opts;
    // The size is a hint the server applies when it grants the controller role: an observer
    // (which may be made controller as the first member, and hands the lease back) sends none,
    // so only a viewer that asked to drive sizes the PTY.
    const payload: Record<string, unknown> = o.role === 'controller' ? { role: o.role, cols: o.cols, rows: o.rows } : { role: o.role };
    if (o.clientLabel !== undefined) payload['client_label'] = o.clientLabel.slice(0, kMaxLabelChars);
    this.#send('pty.join_session', payload, this.#replayFrom !== undefined ? { replayFrom: this.#replayFrom } : {});
  }

  /** What the terminal shows is no longer known to match the session: the next keyframe redraws it. */
  #forgetScreen(): void {
    this.#replayFrom = undefined;
    this.#lastSequence = -1;
    this.#screenSequence = -1;
    this.#keyframeWanted = true;
  }

  #onMessage(data: unknown): void {
    this.#unansweredSinceMs = undefined;
    const m = decodeServerMessage(data);
    const o = this.#opts;
    o.onFrame?.(m);
    switch (m.type) {
      case 'hello':
        o.onHello?.(m.payload);
        this.#join(m.currentSequence);
        return;
      case 'output':
        if (m.sequence <= this.#screenSequence) return;
        this.#screenSequence = m.sequence;
        this.#advance(m.sequence);
        o.onOutput?.(m.bytes, m.sequence, m.stream);
        return;
      case 'resize':
        if (m.sequence <= this.#screenSequence) return;
        this.#screenSequence = m.sequence;
        this.#advance(m.sequence);
        o.onResize?.(m.cols, m.rows);
        return;
      case 'keyframe':
        this.#onKeyframe(m);
        return;
      case 'role':
        this.#onRole(m);
        return;
      case 'membership':
        this.#advance(m.sequence);
        o.onMembership?.({ controllers: m.controllers, observers: m.observers });
        return;
      case 'closed':
        this.#advance(m.sequence);
        o.onExit?.({ exitCode: m.exitCode, reason: m.reason, detail: m.detail });
        return;
      case 'session_error':
        this.#advance(m.sequence);
        // Output was lost between the PTY and the hub: what the screen shows may be wrong.
        if (m.code === 'PTY_OUTPUT_LAGGED') this.requestKeyframe();
        o.onError?.(m.code, m.message, { scope: 'session', retryable: true });
        return;
      case 'error':
        // The server no longer holds the frames after our cursor; a Keyframe follows.
        if (m.code === 'REPLAY_OUT_OF_RANGE') this.#forgetScreen();
        o.onError?.(m.code, m.message, { scope: 'binding', retryable: m.retryable });
        return;
      case 'goodbye':
        o.onGoodbye?.(m.reason, m.detail);
        return;
      case 'ping':
        this.#send('pong', { client_ts: m.clientTs, server_ts: new Date().toISOString() }, { id: m.id });
        return;
      case 'pong':
      case 'invalid':
        return;
    }
  }

  #advance(sequence: number): void {
    if (sequence > this.#lastSequence) this.#lastSequence = sequence;
  }

  #onKeyframe(k: Extract<PtyServerMessage, { type: 'keyframe' }>): void {
    if (k.format !== KEYFRAME_FORMAT_VT100) {
      this.#opts.onError?.('KEYFRAME_FORMAT', `a keyframe in format ${k.format} cannot be drawn; it is ignored`, {
        scope: 'session',
        retryable: false,
      });
      return;
    }
    const newer = k.anchorSequence > this.#screenSequence || (this.#keyframeWanted && k.anchorSequence === this.#screenSequence);
    if (newer) {
      this.#keyframeWanted = false;
      this.#screenSequence = k.anchorSequence;
    }
    // Drawn or not, the screen now holds everything up to the keyframe's place in the stream.
    this.#advance(Math.max(k.sequence, k.anchorSequence));
    if (newer) this.#opts.onKeyframe?.({ snapshot: k.snapshot, cols: k.cols, rows: k.rows, anchorSequence: k.anchorSequence });
  }

  #onRole(r: Extract<PtyServerMessage, { type: 'role' }>): void {
    const wasReleasing = this.#releasing;
    this.#releasing = false;
    if (r.role === 'controller' && this.#requested === 'observer') {
      // The first member of a session is made controller whatever it asked for (pty-extensions
      // 5.1); ours asked to watch, so give the lease back at once.
      this.#releasing = this.requestRole('observer');
      this.#role = 'observer';
      this.#opts.onRole?.('observer', { requested: 'observer', downgraded: false, reason: undefined, clientId: r.clientId });
      return;
    }
    if (wasReleasing && r.role === 'observer' && this.#role === 'observer') return;
    this.#role = r.role;
    const downgraded = r.downgraded || (this.#requested === 'controller' && r.role === 'observer');
    this.#opts.onRole?.(r.role, { requested: this.#requested, downgraded, reason: r.reason, clientId: r.clientId });
    if (r.role === 'controller') this.resize(this.#opts.cols, this.#opts.rows);
  }

  #startPings(): void {
    const everyMs = this.#opts.pingIntervalMs ?? kDefaultPingIntervalMs;
    this.#unansweredSinceMs = undefined;
    if (everyMs <= 0 || this.#closedInfo !== null) return;
    this.#pingTimer = setInterval(() => {
      const now = Date.now();
      // Silence counts from our first unanswered ping, not from the last frame heard: a client
      // whose own loop stalled (GC, a busy machine) has not asked yet and must not blame the server.
      if (this.#unansweredSinceMs !== undefined && now - this.#unansweredSinceMs > 2 * everyMs) {
        // No answer for two intervals: a half-open connection that could stay "open" for minutes.
        this.#finish(1006, 'the server stopped answering');
        try {
          this.#ws.close(1000, 'server not answering');
        } catch {
          // Already closing.
        }
        return;
      }
      this.#unansweredSinceMs ??= now;
      this.#send('ping', { client_ts: new Date(now).toISOString() });
    }, everyMs);
    unref(this.#pingTimer);
  }

  #finish(code: number, reason: string): void {
    if (this.#closedInfo !== null) return;
    clearInterval(this.#pingTimer);
    this.#closedInfo = { code, reason };
    this.#role = null;
    this.#opts.onClose?.(code, reason);
    for (const w of this.#closedWaiters.splice(0)) w(this.#closedInfo);
  }
}
