/**
 * The agent's outbound output queue: every OutputChunk and CommandResult goes through it, whether
 * the server is connected (the connection drains it as fast as gRPC flow control allows) or not
 * (it fills up, and is sent in order after the next registration).
 *
 *   head              sendIdx                               tail
 *   [sent, retained ...|unsent ...............................]
 *
 * Retention and resume (proto/README.md, "Output ... resume"): an entry handed to the transport
 * stays (as "sent") until it is known to be delivered, because the stream may die with it in
 * flight. It is released only when the connection stayed up long enough after sending it for an
 * HTTP/2 keepalive ping to have been answered (releaseDelivered) — not when a server's cursor
 * says it holds it, because that server may die next (a restarted server then still gets it).
 * rewind() turns every retained entry the (re)connected server lacks back into unsent, in the
 * original order, and reports what is gone as OutputGaps. A retained CommandResult is always resent (the server cannot say whether it has it;
 * it treats a repeated result of a finished command as a duplicate).
 *
 * Bounded by bytes. When full, the oldest SENT chunk goes first (it was most likely delivered;
 * it leaves a data-less tombstone so rewind can still report it exactly); then the oldest UNSENT
 * chunk, replaced in place by an OutputGap naming its seq and bytes (consecutive evictions of one
 * command merge into one gap). Results and gaps are never evicted (small, and a result is the one
 * thing a server cannot reconstruct), so the queue may exceed its bound by their size.
 *
 * Unsent chunk bytes are counted per command (unsentBytesOf) for backpressure: while connected,
 * output-flow.ts stops reading commands long before unsent output could fill the bound, so the
 * evictions above happen only to a disconnected agent (or to sent chunks, which cost nothing).
 */

export type OutputStreamName = 'stdout' | 'stderr' | 'log';

/** One piece of a command's output (becomes AgentMessage.stdout / stderr / log). */
export interface ChunkEntry {
  readonly kind: 'chunk';
  readonly stream: OutputStreamName;
  readonly commandId: string;
  /** Per command, from 1, shared by all streams of the command. */
  readonly seq: number;
  /** Byte offset of data[0] within this stream of this command. */
  readonly offset: number;
  readonly data: Buffer;
  readonly timestampMs: number;
  /** Last chunk of this stream. */
  readonly eof: boolean;
}

/** Chunks firstSeq..lastSeq of commandId were dropped (AgentMessage.output_gap). */
export interface GapEntry {
  readonly kind: 'gap';
  readonly commandId: string;
  firstSeq: number;
  lastSeq: number;
  lostBytes: number;
  readonly reason: string;
}

/** The end of a command (AgentMessage.command_result). */
export interface ResultEntry {
  readonly kind: 'result';
  readonly commandId: string;
  readonly exitCode: number;
  readonly error: string;
  readonly durationMs: number;
  readonly timedOutBy: string;
  /** Last seq assigned to the command's output. */
  readonly lastSeq: number;
}

export type OutboundEntry = ChunkEntry | GapEntry | ResultEntry;

/** A sent chunk evicted before its delivery was confirmed: seq and size only. */
interface Tombstone {
  readonly kind: 'tombstone';
  readonly commandId: string;
  readonly seq: number;
  readonly bytes: number;
}

type Item = OutboundEntry | Tombstone;

interface Slot {
  item: Item;
  /** Date.now() when handed to the transport; 0 = unsent. */
  sentAtMs: number;
}

/** Per-entry bookkeeping cost counted against the bound, in bytes (object headers, fields). */
export const ENTRY_OVERHEAD_BYTES = 64;
/** OutputGap.reason: evicted because the buffer was full. */
export const GAP_REASON_BUFFER_FULL = 'agent_buffer_full';
/** OutputGap.reason: released as delivered, but the (re)connected server does not hold it. */
export const GAP_REASON_NOT_RETAINED = 'agent_released_after_delivery';

export interface OutputBufferStats {
  readonly entries: number;
  readonly unsent: number;
  readonly bytes: number;
  readonly evictedChunks: number;
  readonly evictedBytes: number;
}

interface CommandState {
  /** Highest seq sent or dropped. */
  lastSeq: number;
  /** Chunks 1..releasedThrough were released as delivered (releasedBytes of data in all); kept across rewinds. */
  releasedThrough: number;
  releasedBytes: number;
  /** Unsent gap the next unsent eviction of this command may extend. */
  openGap: GapEntry | undefined;
  /** Data bytes of this command's chunks not yet handed to the transport (backpressure, output-flow.ts). */
  unsentBytes: number;
}

function itemBytes(e: Item): number {
  if (e.kind === 'chunk') return ENTRY_OVERHEAD_BYTES + e.data.length;
  if (e.kind === 'result') return ENTRY_OVERHEAD_BYTES + e.error.length;
  if (e.kind === 'gap') return ENTRY_OVERHEAD_BYTES;
  return 0; // tombstones live at most until the next rewind or release
}

function newGap(commandId: string, firstSeq: number, lastSeq: number, lostBytes: number, reason: string): GapEntry {
  return { kind: 'gap', commandId, firstSeq, lastSeq, lostBytes, reason };
}

export class OutputBuffer {
  readonly #capacityBytes: number;
  readonly #now: () => number;
  /** Holes (undefined) are slots whose entry was merged away or released. */
  #slots: (Slot | undefined)[] = [];
  #head = 0;
  #sendIdx = 0;
  #scanSent = 0;
  #scanUnsent = 0;
  #bytes = 0;
  #count = 0;
  #unsent = 0;
  #evictedChunks = 0;
  #evictedBytes = 0;
  #unsentBytes = 0;
  readonly #commands = new Map<string, CommandState>();

  /**
   * @param capacityBytes bound of the queued output, in bytes (chunk data plus ENTRY_OVERHEAD_BYTES each).
   * @param now clock for sentAtMs (tests).
   */
  constructor(capacityBytes: number, now: () => number = Date.now) {
    if (!(capacityBytes > 0)) throw new RangeError('capacityBytes must be positive');
    this.#capacityBytes = capacityBytes;
    this.#now = now;
  }

  /** Entries not yet handed to the transport. */
  get pending(): number {
    return this.#unsent;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Data bytes of all chunks not yet handed to the transport. */
  get unsentBytes(): number {
    return this.#unsentBytes;
  }

  /** Data bytes of a command's chunks not yet handed to the transport (0 for an unknown command). */
  unsentBytesOf(commandId: string): number {
    return this.#commands.get(commandId)?.unsentBytes ?? 0;
  }

  /** Chunks evicted so far (sent or not). */
  get evictedChunks(): number {
    return this.#evictedChunks;
  }

  stats(): OutputBufferStats {
    return {
      entries: this.#count,
      unsent: this.#unsent,
      bytes: this.#bytes,
      evictedChunks: this.#evictedChunks,
      evictedBytes: this.#evictedBytes,
    };
  }

  /** Appends an entry; evicts the oldest chunks while over the bound (possibly this one). */
  push(entry: ChunkEntry | ResultEntry): void {
    let st = this.#commands.get(entry.commandId);
    if (st === undefined) {
      st = { lastSeq: 0, releasedThrough: 0, releasedBytes: 0, openGap: undefined, unsentBytes: 0 };
      this.#commands.set(entry.commandId, st);
    }
    if (entry.kind === 'chunk') {
      st.unsentBytes += entry.data.length;
      this.#unsentBytes += entry.data.length;
    }
    this.#slots.push({ item: entry, sentAtMs: 0 });
    this.#count += 1;
    this.#unsent += 1;
    this.#bytes += itemBytes(entry);
    while (this.#bytes > this.#capacityBytes && (this.#evictSent() || this.#evictUnsent())) {
      // keep evicting
    }
  }

  /** The next entry to send, in order (it stays retained as sent); undefined when all are sent. */
  next(): OutboundEntry | undefined {
    while (this.#sendIdx < this.#slots.length) {
      const slot = this.#slots[this.#sendIdx];
      this.#sendIdx += 1;
      if (!slot) continue;
      const e = slot.item;
      if (e.kind === 'tombstone') continue; // cannot happen: tombstones are made in the sent region
      slot.sentAtMs = Math.max(1, this.#now());
      this.#unsent -= 1;
      if (e.kind === 'chunk') this.#unsentBytes -= e.data.length;
      const st = this.#commands.get(e.commandId);
      if (st) {
        if (e.kind === 'chunk') {
          st.lastSeq = Math.max(st.lastSeq, e.seq);
          st.unsentBytes -= e.data.length;
        } else if (e.kind === 'gap') {
          st.lastSeq = Math.max(st.lastSeq, e.lastSeq);
          if (st.openGap === e) st.openGap = undefined;
        }
      }
      return e;
    }
    return undefined;
  }

  /** Releases sent entries handed over at or before `sentAtOrBeforeMs` (oldest first; stops at the first newer one). */
  releaseDelivered(sentAtOrBeforeMs: number): void {
    while (this.#head < this.#sendIdx) {
      const slot = this.#slots[this.#head];
      if (slot && slot.sentAtMs > sentAtOrBeforeMs) break;
      if (slot) this.#release(slot.item);
      this.#slots[this.#head] = undefined;
      this.#head += 1;
    }
    this.#compact();
  }

  /**
   * Resume cursors for AgentRegistration.cursors: per command the buffer still accounts for, the
   * highest seq sent or dropped (0 if none).
   */
  cursors(): { commandId: string; lastSeq: number }[] {
    return [...this.#commands].map(([commandId, st]) => ({ commandId, lastSeq: st.lastSeq }));
  }

  /**
   * After a RegistrationAck: `serverHolds` maps command id → highest seq the server holds
   * (absent = nothing). Drops what the server has, turns the rest of the retained entries back
   * into unsent (original order), and adds OutputGaps for what is gone.
   */
  rewind(serverHolds: ReadonlyMap<string, number>): void {
    // What the server holds stays retained (as sent) until released by time: if this server
    // dies too, the next one still gets it. Everything else is resent, in the original order.
    const retained: Slot[] = [];
    const resend: Slot[] = [];
    const now = Math.max(1, this.#now());
    const held = (id: string): number => serverHolds.get(id) ?? 0;
    this.#unsentBytes = 0;
    for (const [id, st] of this.#commands) {
      st.openGap = undefined;
      st.unsentBytes = 0;
      const s = held(id);
      if (st.releasedThrough > s) {
        // Delivered to an earlier server and released; this one lacks it. Exact bytes when the
        // server holds nothing, else an upper bound (the split point is no longer known).
        resend.push({ item: newGap(id, s + 1, st.releasedThrough, st.releasedBytes, GAP_REASON_NOT_RETAINED), sentAtMs: 0 });
      }
    }
    const lastGap = new Map<string, GapEntry>();
    for (let i = this.#head; i < this.#slots.length; i++) {
      const slot = this.#slots[i];
      if (!slot) continue;
      const e = slot.item;
      const s = held(e.commandId);
      const heldByServer = e.kind === 'chunk' || e.kind === 'tombstone' ? e.seq <= s : e.kind === 'gap' ? e.lastSeq <= s : false;
      if (heldByServer) {
        retained.push({ item: e, sentAtMs: slot.sentAtMs || now });
        continue;
      }
      if (e.kind === 'tombstone') {
        const g = lastGap.get(e.commandId);
        if (g && g.lastSeq === e.seq - 1) {
          g.lastSeq = e.seq;
          g.lostBytes += e.bytes;
        } else {
          const gap = newGap(e.commandId, e.seq, e.seq, e.bytes, GAP_REASON_BUFFER_FULL);
          lastGap.set(e.commandId, gap);
          resend.push({ item: gap, sentAtMs: 0 });
        }
        continue;
      }
      if (e.kind === 'gap' && e.firstSeq <= s) e.firstSeq = s + 1;
      if (e.kind === 'chunk') {
        this.#unsentBytes += e.data.length;
        const st = this.#commands.get(e.commandId);
        if (st) st.unsentBytes += e.data.length;
      }
      lastGap.delete(e.commandId);
      resend.push({ item: e, sentAtMs: 0 });
    }
    this.#slots = [...retained, ...resend];
    this.#head = 0;
    this.#sendIdx = retained.length;
    this.#scanSent = 0;
    this.#scanUnsent = retained.length;
    this.#count = this.#slots.length;
    this.#unsent = resend.length;
    this.#bytes = this.#slots.reduce((n, x) => n + (x ? itemBytes(x.item) : 0), 0);
    // Command states stay (with their released range) until their result is released: a later
    // reconnect to a server that lost everything must still learn about the released prefix.
  }

  #release(e: Item): void {
    this.#count -= 1;
    this.#bytes -= itemBytes(e);
    if (e.kind === 'result') this.#commands.delete(e.commandId);
    else this.#noteReleased(e);
  }

  /** Records a delivered chunk, tombstone or gap in its command's released prefix. */
  #noteReleased(e: Item): void {
    const st = this.#commands.get(e.commandId);
    if (!st || e.kind === 'result') return;
    if (e.kind === 'chunk' || e.kind === 'tombstone') {
      st.releasedThrough = Math.max(st.releasedThrough, e.seq);
      st.releasedBytes += e.kind === 'chunk' ? e.data.length : e.bytes;
    } else {
      st.releasedThrough = Math.max(st.releasedThrough, e.lastSeq);
      // A not-retained gap re-announces bytes releasedBytes already counts.
      if (e.reason !== GAP_REASON_NOT_RETAINED) st.releasedBytes += e.lostBytes;
    }
  }

  /** Oldest sent chunk → tombstone. */
  #evictSent(): boolean {
    let i = Math.max(this.#scanSent, this.#head);
    while (i < this.#sendIdx && this.#slots[i]?.item.kind !== 'chunk') i += 1;
    this.#scanSent = i;
    const slot = i < this.#sendIdx ? this.#slots[i] : undefined;
    if (slot?.item.kind !== 'chunk') return false;
    const c = slot.item;
    this.#bytes -= itemBytes(c);
    this.#evictedChunks += 1;
    this.#evictedBytes += c.data.length;
    slot.item = { kind: 'tombstone', commandId: c.commandId, seq: c.seq, bytes: c.data.length };
    this.#scanSent = i + 1;
    return true;
  }

  /** Oldest unsent chunk → gap (or merged into the command's open gap). */
  #evictUnsent(): boolean {
    let i = Math.max(this.#scanUnsent, this.#sendIdx);
    while (i < this.#slots.length && this.#slots[i]?.item.kind !== 'chunk') i += 1; // skips gaps, results, holes
    this.#scanUnsent = i;
    const slot = this.#slots[i];
    if (slot?.item.kind !== 'chunk') return false;
    const victim = slot.item;
    this.#bytes -= itemBytes(victim);
    this.#evictedChunks += 1;
    this.#evictedBytes += victim.data.length;
    const st = this.#commands.get(victim.commandId);
    if (!st) throw new Error('output buffer: chunk of an untracked command');
    st.unsentBytes -= victim.data.length;
    this.#unsentBytes -= victim.data.length;
    st.lastSeq = Math.max(st.lastSeq, victim.seq);
    const open = st.openGap;
    if (open && open.lastSeq === victim.seq - 1) {
      // The open gap is unsent and earlier; between it and the victim (the oldest unsent chunk)
      // lie only gaps, results and holes, so growing it keeps this command's order.
      open.lastSeq = victim.seq;
      open.lostBytes += victim.data.length;
      this.#slots[i] = undefined;
      this.#count -= 1;
      this.#unsent -= 1;
    } else {
      const gap = newGap(victim.commandId, victim.seq, victim.seq, victim.data.length, GAP_REASON_BUFFER_FULL);
      slot.item = gap;
      this.#bytes += itemBytes(gap);
      st.openGap = gap;
    }
    this.#scanUnsent = i + 1;
    return true;
  }

  #compact(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#slots.length) {
      this.#slots = this.#slots.slice(this.#head);
      this.#sendIdx -= this.#head;
      this.#scanSent = Math.max(0, this.#scanSent - this.#head);
      this.#scanUnsent = Math.max(0, this.#scanUnsent - this.#head);
      this.#head = 0;
    }
  }
}
