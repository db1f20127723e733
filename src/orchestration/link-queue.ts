/**
 * The orchestration link's outbound queue: bounded by a count and by bytes, FIFO, and when full it
 * drops the OLDEST message (the newest state is what an orchestrator needs most). Drops are never
 * silent: they are counted into a pending gap, and the next message taken out of the queue is a
 * gap record naming how many were dropped and the lowest and highest event id among them. Only
 * the head is ever dropped, so the ids of one gap are contiguous unless a gap that could not be
 * sent was merged with a later one (restoreGap): `dropped` is always the exact count.
 *
 * Messages are encoded once, when queued (the text that goes on the socket); the queue never
 * looks inside them again.
 */

/** One queued message: its event id (`seq`) and its encoded JSON text. */
export interface QueuedMessage {
  readonly seq: number;
  readonly text: string;
}

/** What the queue hands out: a message, or the gap record that precedes the messages after a drop. */
export type Outgoing = { readonly kind: 'message'; readonly message: QueuedMessage } | { readonly kind: 'gap'; readonly gap: GapRecord };

/** The gap record sent in place of dropped messages (README "Orchestration link and aiwg bridge"). */
export interface GapRecord {
  readonly type: 'gap';
  /** How many messages were dropped. */
  readonly dropped: number;
  /** Lowest and highest event id among the dropped messages. */
  readonly from_seq: number;
  readonly to_seq: number;
}

export interface LinkQueueOptions {
  /** Most messages held; at least 1. */
  readonly maxMessages: number;
  /** Most bytes (UTF-16 code units of the encoded text, a close upper bound) held; at least 1. */
  readonly maxBytes: number;
  /** Called with the count each time messages are dropped (the dropped-events metric). */
  readonly onDrop?: (count: number) => void;
}

export class LinkQueue {
  readonly #maxMessages: number;
  readonly #maxBytes: number;
  readonly #onDrop: ((count: number) => void) | undefined;
  readonly #items: QueuedMessage[] = [];
  #head = 0;
  #bytes = 0;
  #gap: { dropped: number; from: number; to: number } | null = null;
  #droppedTotal = 0;

  constructor(opts: LinkQueueOptions) {
    this.#maxMessages = Math.max(1, Math.floor(opts.maxMessages));
    this.#maxBytes = Math.max(1, Math.floor(opts.maxBytes));
    this.#onDrop = opts.onDrop;
  }

  /** Messages held (a pending gap record is not counted). */
  get length(): number {
    return this.#items.length - this.#head;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Messages dropped since the queue was made. */
  get droppedTotal(): number {
    return this.#droppedTotal;
  }

  /** Dropped messages not yet reported by a gap record. */
  get pendingGap(): number {
    return this.#gap?.dropped ?? 0;
  }

  /** True when there is something to take: a message or a pending gap record. */
  get hasOutgoing(): boolean {
    return this.length > 0 || this.#gap !== null;
  }

  /**
   * Adds a message at the tail, dropping from the head while the queue is over either bound. A
   * message larger than maxBytes on its own is dropped itself (counted in the gap like any other).
   */
  push(message: QueuedMessage): void {
    this.#items.push(message);
    this.#bytes += message.text.length;
    let dropped = 0;
    while (this.length > this.#maxMessages || (this.#bytes > this.#maxBytes && this.length > 0)) {
      this.#dropHead();
      dropped++;
    }
    if (dropped > 0) {
      this.#droppedTotal += dropped;
      this.#onDrop?.(dropped);
    }
    this.#compact();
  }

  /**
   * Puts messages that were taken but could not be sent back at the head, in their order (the
   * connection dropped under them). Over the bounds, the oldest go, as with push.
   */
  unshift(messages: readonly QueuedMessage[]): void {
    if (messages.length === 0) return;
    const rest = this.#items.slice(this.#head);
    this.#items.length = 0;
    this.#head = 0;
    this.#items.push(...messages, ...rest);
    for (const m of messages) this.#bytes += m.text.length;
    let dropped = 0;
    while (this.length > this.#maxMessages || (this.#bytes > this.#maxBytes && this.length > 0)) {
      this.#dropHead();
      dropped++;
    }
    if (dropped > 0) {
      this.#droppedTotal += dropped;
      this.#onDrop?.(dropped);
    }
  }

  /** The next thing to send: the pending gap record first, then the oldest message; null when empty. */
  shift(): Outgoing | null {
    if (this.#gap !== null) {
      const g = this.#gap;
      this.#gap = null;
      return { kind: 'gap', gap: { type: 'gap', dropped: g.dropped, from_seq: g.from, to_seq: g.to } };
    }
    if (this.length === 0) return null;
    const message = this.#items[this.#head] as QueuedMessage;
    this.#items[this.#head] = undefined as unknown as QueuedMessage;
    this.#head++;
    this.#bytes -= message.text.length;
    this.#compact();
    return { kind: 'message', message };
  }

  /**
   * Restores a gap record that was taken but could not be sent (the connection dropped under it),
   * merged with drops counted since: the counts add up, the id range spans both.
   */
  restoreGap(gap: GapRecord): void {
    const g = this.#gap;
    this.#gap =
      g === null
        ? { dropped: gap.dropped, from: gap.from_seq, to: gap.to_seq }
        : { dropped: g.dropped + gap.dropped, from: Math.min(g.from, gap.from_seq), to: Math.max(g.to, gap.to_seq) };
  }

  #dropHead(): void {
    const gone = this.#items[this.#head] as QueuedMessage;
    this.#items[this.#head] = undefined as unknown as QueuedMessage;
    this.#head++;
    this.#bytes -= gone.text.length;
    const g = this.#gap;
    this.#gap =
      g === null
        ? { dropped: 1, from: gone.seq, to: gone.seq }
        : { dropped: g.dropped + 1, from: Math.min(g.from, gone.seq), to: Math.max(g.to, gone.seq) };
  }

  /** Drops the dead prefix of the backing array once it dominates, so memory stays bounded. */
  #compact(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
  }
}
