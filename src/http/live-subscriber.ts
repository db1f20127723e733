/**
 * The one live-subscriber mechanism: every stream that follows something live goes through a
 * LiveSubscriber — agent output and chat over SSE (src/streaming), task logs (src/tasks), the
 * events follow (src/events) and PTY session clients over WebSocket (src/sessions). The same
 * rules hold for all of them:
 *
 * - **Join = subscribe and hold.** A join subscribes to the live source first with `holdLive`,
 *   so live frames are held (bounded like the queue) while the replay is read; `resumeLive(frames,
 *   isNew)` then writes the replay and, after it, only the held frames the replay did not cover
 *   (`isNew(cursor)`). A long replay can come in pages with `sendReplay` + `whenDrained`.
 * - **One byte bound.** Frames are the SAME pre-encoded bytes every subscriber gets: the queue
 *   holds references, never copies. While the sink accepts writes, a frame goes straight to it;
 *   once `write()` returns false (backpressure) later frames wait here until the sink's
 *   `onWritable` fires. When the bytes waiting here plus those buffered in the sink exceed
 *   `maxQueuedBytes` (default 1 MiB) the subscriber is cut off. Replay and control frames
 *   (`sendReplay`) are exempt: a large replay to a client that reads at its own
 *   pace is not mistaken for falling behind; live frames queued behind it do count.
 * - **One cut-off carrying a resume cursor.** At the cut-off the queue is dropped, ONE slow
 *   frame built by the stream's own `slowFrame(cursor)` is written — the cursor is that of the
 *   last frame handed to the sink, so the client resumes exactly there — and the stream closes
 *   (`sink.closeSlow()` when the transport has a close code for it). Each protocol has one
 *   slow-consumer wire shape; README "Slow consumers" tables them.
 *
 * `send` is O(1) and never blocks, so the producer and the other subscribers never wait for a
 * slow one.
 */

/**
 * Where a live subscriber writes. SseSink (./types.ts) is one; wsLiveSink (./ws-route.ts) adapts a
 * WebSocket connection (strings go as text frames, bytes as binary).
 */
export interface LiveSink {
  /** Queue a frame; false under backpressure (the frame IS queued). No-op returning false once closed. */
  write(frame: Uint8Array | string): boolean;
  /** Called each time a backpressured sink has drained enough to write again. */
  onWritable(cb: () => void): void;
  /** Called once when the sink closes for any reason. */
  onClose(cb: () => void): void;
  /** End the stream normally; idempotent. */
  close(): void;
  /** End the stream as a slow consumer (a transport close code); default {@link close}. */
  closeSlow?(): void;
  readonly closed: boolean;
  /** Bytes written and not yet taken by the kernel. */
  bufferedBytes(): number;
  /** True when `write` has copied the frame once it returns, so the caller may reuse its memory. */
  readonly copiesWrites?: boolean;
}

type Frame = Uint8Array | string;

function sizeOf(frame: Frame): number {
  return typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength;
}

/** Default bound of bytes waiting for one subscriber: 1 MiB. */
export const DEFAULT_LIVE_QUEUE_BYTES = 1024 * 1024;

export interface LiveSubscriberOptions {
  /** Bytes allowed to wait (queue + sink buffer) before the cut-off. Default {@link DEFAULT_LIVE_QUEUE_BYTES}. */
  maxQueuedBytes?: number;
  /**
   * The stream's slow-consumer frame, written once at the cut-off, given the cursor of the last
   * frame handed to the sink (the client's resume point; undefined when none had a cursor).
   */
  slowFrame: (cursor: string | undefined, maxQueuedBytes: number) => Frame;
  /** Called once when the subscriber is cut off for being slow (count it). */
  onSlow?: (sub: LiveSubscriber) => void;
  /** The cursor the client already has (its Last-Event-ID), reported if it is cut off before any write. */
  cursor?: string;
  /** Start by holding live frames until {@link LiveSubscriber.resumeLive} (see the module comment). */
  holdLive?: boolean;
}

/** A replay or live frame with its event id. */
export interface CursorFrame {
  frame: Frame;
  cursor?: string | undefined;
}

interface Queued {
  frame: Frame;
  cursor: string | undefined;
  /** A replay frame: not counted against maxQueuedBytes. */
  exempt: boolean;
  /** The last frame: the stream closes once it is handed to the sink. */
  end: boolean;
}

const EMPTY = new Uint8Array(0);

export class LiveSubscriber {
  readonly sink: LiveSink;
  readonly maxQueuedBytes: number;
  readonly #slowFrame: LiveSubscriberOptions['slowFrame'];
  readonly #onSlow: LiveSubscriberOptions['onSlow'];
  #queue: Queued[] = [];
  #head = 0;
  #queuedBytes = 0;
  #blocked = false;
  #cursor: string | undefined;
  #closed = false;
  #cutOff = false;
  #held: Queued[] | null = null;
  #ending = false;
  /** Replay bytes written under backpressure since the sink last drained (inside sink.bufferedBytes, exempt from the bound). */
  #exemptBuffered = 0;
  readonly #closeCbs: Array<() => void> = [];
  #drainWaiters: Array<() => void> = [];

  constructor(sink: LiveSink, opts: LiveSubscriberOptions) {
    const max = opts.maxQueuedBytes ?? DEFAULT_LIVE_QUEUE_BYTES;
    if (!Number.isSafeInteger(max) || max < 0) throw new RangeError(`maxQueuedBytes must be a non-negative integer, got ${max}`);
    this.sink = sink;
    this.maxQueuedBytes = max;
    this.#slowFrame = opts.slowFrame;
    this.#onSlow = opts.onSlow;
    this.#cursor = opts.cursor;
    if (opts.holdLive === true) this.#held = [];
    sink.onWritable(() => this.#drain());
    sink.onClose(() => this.#finish());
  }

  /** Cursor of the last frame handed to the sink (what the client will have once it drains). */
  get cursor(): string | undefined {
    return this.#cursor;
  }
  /** Bytes waiting in this queue (not counting the sink's own buffer). */
  get queuedBytes(): number {
    return this.#queuedBytes;
  }
  get closed(): boolean {
    return this.#closed;
  }
  /** True when the subscriber was closed for falling behind. */
  get cutOff(): boolean {
    return this.#cutOff;
  }

  /** Runs once when the subscriber closes for any reason (at once if already closed). */
  onClose(cb: () => void): void {
    if (this.#closed) cb();
    else this.#closeCbs.push(cb);
  }

  /**
   * Write or queue one frame. `cursor` is the frame's event id, remembered as the resume point
   * once the frame reaches the sink. Returns false when the subscriber is closed (also when this
   * frame made it overflow).
   */
  send(frame: Frame, cursor?: string): boolean {
    return this.#send(frame, cursor, false, false);
  }

  /**
   * Write replay frames now, even while live frames are held (a catch-up in several pages: each
   * page is written as it comes, the hold ends with the last one through resumeLive). Not counted
   * against maxQueuedBytes, like the replay of resumeLive.
   */
  sendReplay(frames: readonly CursorFrame[]): boolean {
    for (const r of frames) if (!this.#send(r.frame, r.cursor, true, false)) return false;
    return !this.#closed;
  }

  /**
   * End the stream in order: `frame` (when given) is the last one written, after everything sent
   * before it, then the stream closes. While live frames are held it is held like them.
   */
  endWith(frame?: Frame): void {
    if (this.#closed || this.#ending) return;
    this.#send(frame ?? EMPTY, undefined, false, true);
  }

  /**
   * True when a replay frame sent now is handed to the sink before `sendReplay` returns and the
   * sink copies it: the caller may then reuse the frame's memory (a buffer lent by a shard,
   * src/streaming/output-join.ts). False when it would wait in the queue, holding a reference.
   */
  get takesReplayNow(): boolean {
    return !this.#closed && !this.#ending && !this.#blocked && this.#head === this.#queue.length && this.sink.copiesWrites === true;
  }

  /** Resolves once nothing waits in this queue (the sink took everything), or the stream closed. */
  whenDrained(): Promise<void> {
    if (this.#closed || (!this.#blocked && this.#head === this.#queue.length)) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #send(frame: Frame, cursor: string | undefined, exempt: boolean, end: boolean): boolean {
    if (this.#closed || this.#ending) return false;
    if (this.#held !== null && !exempt) {
      this.#held.push({ frame, cursor, exempt: false, end });
      this.#queuedBytes += sizeOf(frame);
      if (this.#lagBytes() > this.maxQueuedBytes) this.#overflow();
      return !this.#closed;
    }
    if (end) this.#ending = true;
    if (!this.#blocked && this.#head === this.#queue.length) {
      this.#write(frame, cursor, end, exempt);
      return !this.#closed;
    }
    this.#queue.push({ frame, cursor, exempt, end });
    if (exempt) return true;
    this.#queuedBytes += sizeOf(frame);
    if (this.#lagBytes() > this.maxQueuedBytes) this.#overflow();
    return !this.#closed;
  }

  /** Live bytes this subscriber is behind: queued here plus buffered in the sink, replay bytes excluded. */
  lagBytes(): number {
    return this.#closed ? 0 : this.#lagBytes();
  }

  #lagBytes(): number {
    return this.#queuedBytes + Math.max(0, this.sink.bufferedBytes() - this.#exemptBuffered);
  }

  /** True while live frames are held for a replay. */
  get holding(): boolean {
    return this.#held !== null;
  }

  /**
   * Start holding live frames (as `holdLive` does at construction), e.g. while a fresh snapshot
   * is made that will replace them; {@link resumeLive} ends it. No-op when already holding or closed.
   */
  hold(): void {
    if (!this.#closed && this.#held === null) this.#held = [];
  }

  /**
   * End the hold: write `replay` (in order), then the held live frames for which `isNew(cursor)`
   * is true, and from now on write live frames as they come. Without a hold, just sends `replay`.
   */
  resumeLive(replay: readonly CursorFrame[], isNew: (cursor: string | undefined) => boolean = () => true): void {
    const held = this.#held ?? [];
    this.#held = null;
    for (const q of held) this.#queuedBytes -= sizeOf(q.frame);
    for (const r of replay) if (!this.#send(r.frame, r.cursor, true, false)) return;
    for (const q of held) if (isNew(q.cursor) && !this.#send(q.frame, q.cursor, false, q.end)) return;
  }

  /**
   * Close the stream now (idempotent); queued frames are dropped. `lastFrame` (an error, a
   * goodbye) is written straight to the sink first, after what the sink already holds; `closeSink`
   * closes the transport (default `sink.close()`, e.g. a WebSocket close code instead).
   */
  close(lastFrame?: Frame, closeSink: () => void = () => this.sink.close()): void {
    if (this.#closed) return;
    if (lastFrame !== undefined && !this.sink.closed) this.sink.write(lastFrame);
    closeSink();
    this.#finish();
  }

  #write(frame: Frame, cursor: string | undefined, end = false, exempt = false): void {
    const size = sizeOf(frame);
    const ok = size === 0 || this.sink.write(frame);
    if (ok) this.#exemptBuffered = 0;
    else if (exempt) this.#exemptBuffered += size;
    if (cursor !== undefined) this.#cursor = cursor;
    if (end) {
      this.close();
      return;
    }
    if (!ok) {
      this.#blocked = true;
      if (!this.sink.closed && this.#lagBytes() > this.maxQueuedBytes) this.#overflow();
    }
  }

  #drain(): void {
    this.#blocked = false;
    const queue = this.#queue;
    while (!this.#blocked && !this.#closed && this.#head < queue.length) {
      const q = queue[this.#head] as Queued;
      queue[this.#head] = undefined as unknown as Queued;
      this.#head++;
      if (!q.exempt) this.#queuedBytes -= sizeOf(q.frame);
      this.#write(q.frame, q.cursor, q.end, q.exempt);
    }
    if (this.#head === queue.length) {
      this.#queue = [];
      this.#head = 0;
      if (!this.#blocked) this.#wakeDrained();
    } else if (this.#head > 1024 && this.#head * 2 > queue.length) {
      this.#queue = queue.slice(this.#head);
      this.#head = 0;
    }
  }

  #overflow(): void {
    if (this.#closed) return;
    this.#cutOff = true;
    this.#held = null;
    this.#queue = [];
    this.#head = 0;
    this.#queuedBytes = 0;
    this.sink.write(this.#slowFrame(this.#cursor, this.maxQueuedBytes));
    if (this.sink.closeSlow !== undefined) this.sink.closeSlow();
    else this.sink.close();
    this.#finish();
    this.#onSlow?.(this);
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#held = null;
    this.#queue = [];
    this.#head = 0;
    this.#queuedBytes = 0;
    this.#wakeDrained();
    for (const cb of this.#closeCbs.splice(0)) cb();
  }

  #wakeDrained(): void {
    if (this.#drainWaiters.length === 0) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const w of waiters) w();
  }
}
