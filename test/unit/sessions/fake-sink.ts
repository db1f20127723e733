/**
 * An in-memory FrameSink (what a WsConn offers the session hub) with a controllable socket
 * buffer: `stopReading()` makes every sent byte count as queued, `drain()` empties it (and fires
 * the drain callbacks, as uWS's drain event does). It parses what the hub sends as pty-ws.v1
 * frames: JSON text, or PW1O binary output (shown as a session frame of kind Output).
 */
import { decodeBinaryOutput } from '../../../src/sessions/binding/binary.js';
import { bindingDialect } from '../../../src/sessions/binding-dialect.js';
import type { SessionHostCapabilities } from '../../../src/sessions/binding/frames.js';
import type { FrameSink, JoinRequest, SessionHub } from '../../../src/sessions/session-hub.js';
import { tail } from '../../support/wait.js';

let nextId = 1000;

export interface Frame {
  op: string;
  id: string;
  ts?: string;
  sequence?: number;
  payload: Record<string, unknown>;
  /** True for a PW1O binary message. */
  binary?: boolean;
}

export class FakeSink implements FrameSink {
  readonly id = nextId++;
  readonly frames: Frame[] = [];
  closeCode: number | undefined;
  pings = 0;
  #buffered = 0;
  #reading = true;
  readonly #listeners = new Set<() => void>();
  readonly #drainCbs: Array<() => void> = [];
  readonly #closeCbs: Array<() => void> = [];
  readonly #pongCbs: Array<() => void> = [];
  /** Answer WebSocket pings (as every WebSocket stack does); false: a dead peer. */
  answerPings = true;

  get closed(): boolean {
    return this.closeCode !== undefined;
  }
  send(data: Uint8Array | string, isBinary = false): 'sent' | 'backpressure' | 'dropped' | 'closed' {
    if (this.closed) return 'closed';
    if (isBinary) {
      const b = decodeBinaryOutput(data as Uint8Array);
      if (!b.ok) throw new Error(`unexpected binary frame: ${b.message}`);
      this.frames.push({
        op: 'pty.session_frame',
        id: '',
        sequence: b.value.sequence,
        binary: true,
        payload: { kind: 'Output', stream: b.value.stream, data: Buffer.from(b.value.bytes).toString('base64') },
      });
    } else this.frames.push(JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString()) as Frame);
    for (const l of this.#listeners) l();
    if (this.#reading) return 'sent';
    this.#buffered += typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    return 'backpressure';
  }
  close(code = 1000): void {
    if (this.closed) return;
    this.closeCode = code;
    for (const cb of this.#closeCbs.splice(0)) cb();
  }
  onDrain(cb: () => void): void {
    this.#drainCbs.push(cb);
  }
  onClose(cb: () => void): void {
    if (this.closed) cb();
    else this.#closeCbs.push(cb);
  }
  ping(): void {
    this.pings++;
    if (this.answerPings) for (const cb of this.#pongCbs) cb();
  }
  onPong(cb: () => void): void {
    this.#pongCbs.push(cb);
  }
  bufferedAmount(): number {
    return this.#buffered;
  }
  stopReading(): void {
    this.#reading = false;
  }
  drain(): void {
    this.#reading = true;
    this.#buffered = 0;
    for (const cb of this.#drainCbs) cb();
  }
  /** Calls `listener` after every frame received; returns the unsubscribe function (waitFor's `wake`). */
  onFrame(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  /** What this sink received, for a timeout message: the last names and sequences, the output's tail. */
  describe(): string {
    return `frames ${JSON.stringify(this.names().slice(-12))} (of ${this.frames.length}), sequences ${JSON.stringify(this.sequences().slice(-6))}, output ${tail(this.output(), 400)}`;
  }
  /** Each frame's name: the op, or the kind of a pty.session_frame. */
  names(): string[] {
    return this.frames.map(nameOf);
  }
  /** The last frame with this name (op or session-frame kind). */
  last(name: string): Frame | undefined {
    return [...this.frames].reverse().find((f) => nameOf(f) === name);
  }
  all(name: string): Frame[] {
    return this.frames.filter((f) => nameOf(f) === name);
  }
  /** Decoded Output bytes received (JSON or binary), in order. */
  output(): string {
    return this.all('Output')
      .map((f) => Buffer.from(f.payload['data'] as string, 'base64').toString())
      .join('');
  }
  /** Sequences of the Output frames. */
  outputSequences(): number[] {
    return this.all('Output').map((f) => f.sequence as number);
  }
  /** Every sequence received, in order. */
  sequences(): number[] {
    return this.frames.filter((f) => f.sequence !== undefined).map((f) => f.sequence as number);
  }
}

export function nameOf(f: Frame): string {
  return f.op === 'pty.session_frame' ? String(f.payload['kind']) : f.op;
}

/** A session host the session tests use: tmux/managed and native/direct available, zellij not. */
export const TEST_HOST: SessionHostCapabilities = {
  default_backend: 'tmux',
  default_class: 'managed',
  supported_backends: ['tmux', 'native'],
  supported_classes: ['managed', 'direct'],
  pairs: [
    { session_backend: 'tmux', session_class: 'managed', available: true },
    { session_backend: 'native', session_class: 'direct', available: true },
    { session_backend: 'zellij', session_class: 'managed', available: false, reason: 'not installed' },
  ],
  observe_supported: true,
  drive_supported: true,
  reattach_supported: true,
};

/** The binding params the session tests use. */
export const TEST_BINDING_PARAMS = { keyframeIntervalFrames: 100, keyframeIntervalSeconds: 5, replayFrames: 1000, maxObservers: 256 };

/** Opens a pty-ws.v1 client on `hub` and joins (default observer); the keyframe arrives asynchronously. */
export function attach(hub: SessionHub, req: Partial<JoinRequest> = {}, binary = false): FakeSink {
  const sink = new FakeSink();
  hub.open(sink, bindingDialect(binary, TEST_BINDING_PARAMS));
  hub.join(sink, { role: 'observer', ...req });
  return sink;
}
