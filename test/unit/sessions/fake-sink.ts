/**
 * An in-memory FrameSink (what a WsConn offers the session hub) with a controllable socket
 * buffer: `stopReading()` makes every sent byte count as queued, `drain()` empties it (and fires
 * the drain callbacks, as uWS's drain event does).
 */
import type { FrameSink } from '../../../src/sessions/session-hub.js';
import { decodeOutputBinary } from '../../../src/sessions/pty-ws-frames.js';
import type { JoinFrame } from '../../../src/sessions/pty-ws-protocol.js';
import { tail } from '../../support/wait.js';

let nextId = 1000;

export type Frame = Record<string, unknown> & { op: string };

export class FakeSink implements FrameSink {
  readonly id = nextId++;
  readonly frames: (Frame | { op: 'binary'; seq: number; data: Buffer })[] = [];
  closeCode: number | undefined;
  #buffered = 0;
  #reading = true;
  readonly #listeners = new Set<() => void>();
  readonly #drainCbs: Array<() => void> = [];
  readonly #closeCbs: Array<() => void> = [];

  get closed(): boolean {
    return this.closeCode !== undefined;
  }
  send(data: Uint8Array | string, isBinary = false): 'sent' | 'backpressure' | 'dropped' | 'closed' {
    if (this.closed) return 'closed';
    if (isBinary) {
      const b = decodeOutputBinary(data as Uint8Array);
      if (b === null) throw new Error('unexpected binary frame');
      this.frames.push({ op: 'binary', seq: b.seq, data: Buffer.from(b.data) });
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
  /** What this sink received, for a timeout message: the last ops and seqs, the output's tail. */
  describe(): string {
    return `ops ${JSON.stringify(this.ops().slice(-12))} (of ${this.frames.length}), seqs ${JSON.stringify(this.seqs().slice(-4))}, output ${tail(this.output(), 400)}`;
  }
  ops(): string[] {
    return this.frames.map((f) => f.op);
  }
  last(op: string): Frame | undefined {
    return [...this.frames].reverse().find((f) => f.op === op);
  }
  all(op: string): Frame[] {
    return this.frames.filter((f) => f.op === op);
  }
  /** Decoded output bytes received (JSON or binary), in order. */
  output(): string {
    return this.frames
      .map((f) =>
        f.op === 'pty.output'
          ? Buffer.from(f['data'] as string, 'base64').toString()
          : f.op === 'binary'
            ? (f as { data: Buffer }).data.toString()
            : '',
      )
      .join('');
  }
  seqs(): number[] {
    return this.frames.filter((f) => f.op === 'pty.output' || f.op === 'binary').map((f) => f['seq'] as number);
  }
}

/** A pty.join_session frame with every field unset but `over`. */
export function join(over: Partial<JoinFrame> = {}): JoinFrame {
  return {
    op: 'pty.join_session',
    role: undefined,
    sessionBackend: undefined,
    sessionClass: undefined,
    argv: undefined,
    cwd: undefined,
    env: undefined,
    terminalSize: undefined,
    replayFrom: undefined,
    binaryOutput: false,
    clientLabel: undefined,
    ...over,
  };
}
