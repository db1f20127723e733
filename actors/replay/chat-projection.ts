/**
 * One (command, session) chat projection in the command's agent actor: a ChatProjector over the
 * command's stdout, its events encoded once (encodeChatSse) and kept, bounded by bytes, for
 * subscribers that join later or resume (Last-Event-ID `{session}-{seq}`).
 *
 * A projection is created when the first chat subscriber of the (command, session) asks for it.
 * It starts from the command's retained stdout (the whole output unless the ring already evicted
 * its beginning) and from then on follows the live output, so every subscriber of the session sees
 * the same events with the same ids.
 */
import { ChatErrorCode, chatErrorEvent, encodeChatSse, type ChatEvent } from '../protocol/chat-events.js';
import { ChatProjector } from '../chat/projector.js';

/** One encoded chat event. */
export interface ChatFrame {
  readonly seq: number;
  /** `{session}-{seq}`. */
  readonly id: string;
  readonly frame: Uint8Array;
  /** done or error: the projection ends with it. */
  readonly terminal: boolean;
}

/** What a joining chat subscriber gets. */
export interface ChatJoin {
  /** Events after the requested seq, concatenated. */
  bytes: Uint8Array;
  events: number;
  /** Seq of the projection's last event when the join was answered (live events above it are new). */
  lastSeq: number;
  /** The projection has ended (its terminal event is at or before lastSeq). */
  terminated: boolean;
}

export class ChatProjection {
  readonly sessionId: string;
  readonly commandId: string;
  readonly #projector: ChatProjector;
  readonly #maxBytes: number;
  #frames: ChatFrame[] = [];
  #head = 0;
  #bytes = 0;

  constructor(opts: { sessionId: string; commandId: string; maxBytes: number }) {
    this.sessionId = opts.sessionId;
    this.commandId = opts.commandId;
    this.#maxBytes = opts.maxBytes;
    this.#projector = new ChatProjector({ sessionId: opts.sessionId, commandId: opts.commandId });
  }

  get seq(): number {
    return this.#projector.seq;
  }

  get terminated(): boolean {
    return this.#projector.terminated;
  }

  /** Seq of the oldest event still kept (seq + 1 when none is). */
  get firstKeptSeq(): number {
    return this.#frames[this.#head]?.seq ?? this.seq + 1;
  }

  /** Events completed by these stdout bytes, encoded and kept. */
  push(bytes: Uint8Array): ChatFrame[] {
    return this.#keep(this.#projector.push(bytes));
  }

  /** The command's output ended (done, or error NO_RESULT when no result line came). */
  end(): ChatFrame[] {
    return this.#keep(this.#projector.end());
  }

  /** Ends the projection with STREAM_INTERRUPTED (its output is gone); nothing if already ended. */
  interrupt(message: string): ChatFrame[] {
    return this.#keep(this.#projector.interrupt(ChatErrorCode.kStreamInterrupted, message));
  }

  /**
   * The kept events after `afterSeq`. When events after it are no longer kept, the join gets a
   * STREAM_INTERRUPTED error event instead (the subscriber cannot be brought up to date) with
   * `terminated` set, so the caller ends its stream.
   */
  join(afterSeq: number): ChatJoin {
    const frames: Uint8Array[] = [];
    let bytes = 0;
    if (afterSeq + 1 < this.firstKeptSeq && afterSeq < this.seq) {
      const ev = chatErrorEvent(
        this.sessionId,
        this.commandId,
        afterSeq + 1,
        ChatErrorCode.kStreamInterrupted,
        `chat events ${afterSeq + 1}-${this.firstKeptSeq - 1} are no longer buffered`,
      );
      const frame = encodeChatSse(ev);
      return { bytes: frame, events: 1, lastSeq: this.seq, terminated: true };
    }
    for (let i = this.#head; i < this.#frames.length; i++) {
      const f = this.#frames[i] as ChatFrame;
      if (f.seq <= afterSeq) continue;
      frames.push(f.frame);
      bytes += f.frame.byteLength;
    }
    const out = new Uint8Array(bytes);
    let o = 0;
    for (const f of frames) {
      out.set(f, o);
      o += f.byteLength;
    }
    return { bytes: out, events: frames.length, lastSeq: this.seq, terminated: this.terminated };
  }

  #keep(events: ChatEvent[]): ChatFrame[] {
    const out: ChatFrame[] = [];
    for (const ev of events) {
      const f: ChatFrame = { seq: ev.seq, id: ev.id, frame: encodeChatSse(ev), terminal: ev.event === 'done' || ev.event === 'error' };
      out.push(f);
      this.#frames.push(f);
      this.#bytes += f.frame.byteLength;
    }
    while (this.#bytes > this.#maxBytes && this.#head < this.#frames.length - 1) {
      const old = this.#frames[this.#head] as ChatFrame;
      this.#frames[this.#head++] = undefined as unknown as ChatFrame;
      this.#bytes -= old.frame.byteLength;
    }
    if (this.#head > 256 && this.#head * 2 > this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }
}
