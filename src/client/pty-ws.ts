/**
 * A terminal connection over pty-ws.v1 (WebSocket subprotocol `pty-ws.v1` on
 * `/api/v1/sessions/{session_id}/pty` of the HTTP listener), for the dashboard's xterm.js and
 * `sbx session attach`. The WebSocket constructor is injected (the browser's, or the `ws`
 * package's in Node), so this file runs in both. The frames are the server's
 * (src/sessions/pty-ws-protocol.ts); every frame is JSON text with an `op` field:
 *
 *   server → binding_hello {binding, version, session, session_host, supported_operations, limits}
 *   client → pty.join_session {role, terminal_size: {cols, rows}, replay_from?, client_label?}
 *   server → pty.role_assigned {role, requested_role, reason?}   ("lease_held": downgraded)
 *   server → pty.replay {from_seq, to_seq, reset}, pty.output {seq, data (base64)} …,
 *            pty.resize, pty.membership, pty.session_status, pty.closed {exit_code, reason},
 *            error {code, message, fatal}, ping {id?}
 *   client → pty.session_input {data}, pty.session_resize {cols, rows} (controller only),
 *            pty.request_role {role}, pty.leave_session {}, pong {id?}
 *
 * Resuming after a drop: open a new connection with `replayFrom: conn.lastSeq + 1`.
 */
import { base64ToBytes, bytesToBase64 } from './base64.js';
import type { WebSocketConstructor, WebSocketLike } from './http-transport.js';
import type { SessionMembership, SessionRole } from './types.js';

export const PTY_WS_SUBPROTOCOL = 'pty-ws.v1';

/** Close codes of pty-ws.v1 (besides 1000 normal and 1001 server stopping). */
export const PtyCloseCode = {
  normal: 1000,
  goingAway: 1001,
  abnormal: 1006,
  protocolError: 4400,
  sessionNotFound: 4404,
  pongTimeout: 4408,
  slowConsumer: 4413,
  unsupportedSelection: 4501,
} as const;

export interface PtyConnectOptions {
  /** Requested role; the server may grant observer instead of controller (see onRole). */
  role: SessionRole;
  cols: number;
  rows: number;
  /** First output seq wanted (resume); omitted: everything retained, after a screen reset. */
  replayFrom?: number;
  /** Shown to other clients in membership (≤ 128 characters). */
  clientLabel?: string;
  /** The binding_hello frame (capabilities, limits). */
  onHello?(hello: Record<string, unknown>): void;
  /** The role granted (after a join or a role request) and the one asked for. */
  onRole?(granted: SessionRole, info: { requested: SessionRole; reason: string | undefined; clientId: string | undefined }): void;
  /** Replayed output follows; `reset`: clear the screen first. */
  onReplay?(info: { fromSeq: number; toSeq: number; reset: boolean }): void;
  /** Terminal bytes, in order. */
  onOutput?(bytes: Uint8Array, seq: number): void;
  /** The PTY's size changed (observers follow it). */
  onResize?(cols: number, rows: number): void;
  onMembership?(m: SessionMembership): void;
  onStatus?(status: { state: string; agent_connected: boolean }): void;
  /** The session ended (its process exited or it was killed). */
  onExit?(info: { exitCode: number | null; reason: string }): void;
  /** An error frame; `fatal` ones are followed by a close. */
  onError?(code: string, message: string, fatal: boolean): void;
  /** The socket closed (nothing more arrives). 1006: no close frame (network, refused upgrade). */
  onClose?(code: number, reason: string): void;
  /** Every parsed frame (diagnostics, newer frame types). */
  onFrame?(frame: Record<string, unknown>): void;
}

const OPEN = 1;
/** How long to wait for binding_hello before joining anyway, ms. */
const kHelloWaitMs = 2000;

const num = (v: unknown, dflt: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : dflt);
const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export class PtyConnection {
  readonly url: string;
  readonly #ws: WebSocketLike;
  readonly #opts: PtyConnectOptions;
  #role: SessionRole | null = null;
  #joined = false;
  #lastSeq = -1;
  #closedInfo: { code: number; reason: string } | null = null;
  readonly #closedWaiters: Array<(info: { code: number; reason: string }) => void> = [];
  readonly #encoder = new TextEncoder();

  constructor(ctor: WebSocketConstructor, url: string, opts: PtyConnectOptions) {
    this.url = url;
    this.#opts = { ...opts };
    this.#ws = new ctor(url, PTY_WS_SUBPROTOCOL);
    this.#ws.binaryType = 'arraybuffer';
    this.#ws.onmessage = (ev) => this.#onMessage(ev.data);
    this.#ws.onclose = (ev) => this.#finish(ev.code, ev.reason);
    this.#ws.onerror = () => {
      // A close event follows (1006 when there was no close frame).
    };
    this.#ws.onopen = () => {
      // The server speaks first (binding_hello) and the join follows it; should no hello come, join anyway.
      const timer = setTimeout(() => this.#join(), kHelloWaitMs);
      (timer as { unref?: () => void }).unref?.();
    };
  }

  /** The granted role (null until pty.role_assigned, and after close). */
  get role(): SessionRole | null {
    return this.#role;
  }

  /** Seq of the last output received (-1 before any): resume with replayFrom = lastSeq + 1. */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Resolves when the socket has closed. */
  closed(): Promise<{ code: number; reason: string }> {
    if (this.#closedInfo !== null) return Promise.resolve(this.#closedInfo);
    return new Promise((resolve) => this.#closedWaiters.push(resolve));
  }

  /** Sends keystrokes; false (nothing sent) unless this connection holds the controller role. */
  input(data: string | Uint8Array): boolean {
    if (this.#role !== 'controller') return false;
    const bytes = typeof data === 'string' ? this.#encoder.encode(data) : data;
    return this.#send({ op: 'pty.session_input', data: bytesToBase64(bytes) });
  }

  /** Reports the terminal's size; only a controller's size reaches the PTY (false otherwise). */
  resize(cols: number, rows: number): boolean {
    this.#opts.cols = cols;
    this.#opts.rows = rows;
    if (this.#role !== 'controller') return false;
    return this.#send({ op: 'pty.session_resize', cols, rows });
  }

  /** Asks for another role: controller (granted only while the lease is free) or observer (releases it). */
  requestRole(role: SessionRole): boolean {
    return this.#send({ op: 'pty.request_role', role });
  }

  /** Leaves politely (the server answers pty.left and closes with 1000). */
  leave(): boolean {
    return this.#send({ op: 'pty.leave_session' });
  }

  close(code = 1000, reason = 'client closed'): void {
    if (this.#closedInfo !== null) return;
    try {
      this.#ws.close(code, reason);
    } catch {
      this.#finish(code, reason);
    }
  }

  #send(frame: Record<string, unknown>): boolean {
    if (this.#ws.readyState !== OPEN) return false;
    this.#ws.send(JSON.stringify(frame));
    return true;
  }

  #join(): void {
    if (this.#joined || this.#closedInfo !== null) return;
    this.#joined = true;
    const o = this.#opts;
    const frame: Record<string, unknown> = { op: 'pty.join_session', role: o.role, terminal_size: { cols: o.cols, rows: o.rows } };
    if (o.replayFrom !== undefined) frame['replay_from'] = o.replayFrom;
    if (o.clientLabel !== undefined) frame['client_label'] = o.clientLabel.slice(0, 128);
    this.#send(frame);
  }

  #onMessage(data: unknown): void {
    const raw =
      typeof data === 'string'
        ? data
        : data instanceof ArrayBuffer
          ? new TextDecoder().decode(data)
          : ArrayBuffer.isView(data)
            ? new TextDecoder().decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
            : '';
    let f: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
      f = parsed as Record<string, unknown>;
    } catch {
      return;
    }
    this.#opts.onFrame?.(f);
    const o = this.#opts;
    switch (f['op']) {
      case 'binding_hello':
        o.onHello?.(f);
        this.#join();
        break;
      case 'pty.role_assigned': {
        const role: SessionRole = f['role'] === 'controller' ? 'controller' : 'observer';
        this.#role = role;
        const requested: SessionRole =
          f['requested_role'] === 'controller' || f['requested_role'] === 'observer' ? f['requested_role'] : o.role;
        o.onRole?.(role, { requested, reason: text(f['reason']), clientId: text(f['client_id']) });
        if (role === 'controller') this.resize(o.cols, o.rows);
        break;
      }
      case 'pty.replay':
        o.onReplay?.({ fromSeq: num(f['from_seq'], 0), toSeq: num(f['to_seq'], 0), reset: f['reset'] === true });
        break;
      case 'pty.output': {
        const d = f['data'];
        if (typeof d !== 'string') return;
        let bytes: Uint8Array;
        try {
          bytes = base64ToBytes(d);
        } catch {
          return;
        }
        const seq = num(f['seq'], this.#lastSeq + 1);
        this.#lastSeq = Math.max(this.#lastSeq, seq);
        o.onOutput?.(bytes, seq);
        break;
      }
      case 'pty.resize':
        o.onResize?.(num(f['cols'], o.cols), num(f['rows'], o.rows));
        break;
      case 'pty.membership':
        o.onMembership?.({
          controllers: Array.isArray(f['controllers']) ? (f['controllers'] as string[]) : [],
          observers: Array.isArray(f['observers']) ? (f['observers'] as string[]) : [],
          attachment_count: num(f['attachment_count'], 0),
        });
        break;
      case 'pty.session_status':
        o.onStatus?.({ state: text(f['state']) ?? 'unknown', agent_connected: f['agent_connected'] === true });
        break;
      case 'pty.closed':
        o.onExit?.({ exitCode: typeof f['exit_code'] === 'number' ? f['exit_code'] : null, reason: text(f['reason']) ?? '' });
        break;
      case 'error':
        o.onError?.(text(f['code']) ?? 'error', text(f['message']) ?? '', f['fatal'] === true);
        break;
      case 'ping':
        this.#send(f['id'] === undefined ? { op: 'pong' } : { op: 'pong', id: f['id'] });
        break;
      default:
        break;
    }
  }

  #finish(code: number, reason: string): void {
    if (this.#closedInfo !== null) return;
    this.#closedInfo = { code, reason };
    this.#role = null;
    this.#opts.onClose?.(code, reason);
    for (const w of this.#closedWaiters.splice(0)) w(this.#closedInfo);
  }
}
