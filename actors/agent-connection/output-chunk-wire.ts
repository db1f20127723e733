/**
 * The agent actor's fast path for the one message that comes by the thousand per second: an
 * AgentMessage holding only an OutputChunk (stdout, stderr or log). It reads the fields in place
 * and hands back one reused object whose `data` is a view into the message, where protobufjs
 * builds two objects, a Long per 64-bit field and a string for the command id on every chunk.
 * The command id string is the one protobufjs decoded for the first chunk of that command (a few
 * are remembered per agent), so both paths give the same strings; anything else (another
 * member, an unknown or repeated field, a malformed or truncated message, a command id not seen
 * yet) returns null and the caller decodes with protobufjs as before.
 *
 * Wire format (proto/svc/sandbox/v1/agent.proto): AgentMessage field 3/4/5 (length-delimited)
 * = OutputChunk { 1 stream_id string, 2 data bytes, 3 timestamp_ms int64, 4 eof bool,
 * 5 seq uint64, 6 offset uint64 }.
 */
import { OutputStream } from '../protocol/agent-frames.js';

/** What the fast path fills in (v1.IOutputChunk's fields, numbers as protobufjs's $num gives them). */
export interface WireChunk {
  /** OutputStream code: which AgentMessage member it came in. */
  stream: number;
  streamId: string;
  data: Uint8Array;
  timestampMs: number;
  eof: boolean;
  seq: number;
  offset: number;
}

const kLen = 2;
const kVarint = 0;
/** Command ids remembered per agent (its concurrent commands). */
const kIdSlots = 8;
const EMPTY = new Uint8Array(0);

export class OutputChunkReader {
  readonly #chunk: WireChunk = { stream: 0, streamId: '', data: EMPTY, timestampMs: 0, eof: false, seq: 0, offset: 0 };
  readonly #ids: Array<{ bytes: Uint8Array; id: string }> = [];
  #nextSlot = 0;
  /** The message read() last passed over for its new command id, and where the id is. */
  #missed: { message: Uint8Array; from: number; to: number } | undefined;
  // scratch of the varint reader: value and position after it
  #value = 0;
  #pos = 0;

  /**
   * The chunk of `message` (valid until the next call; `data` only as long as `message`), or null
   * when the message is not a lone, well-formed OutputChunk of a known command id.
   */
  read(message: Uint8Array): WireChunk | null {
    this.#missed = undefined;
    const end = message.byteLength;
    if (end < 2) return null;
    const tag = message[0]!;
    const stream = tag === 0x1a ? OutputStream.stdout : tag === 0x22 ? OutputStream.stderr : tag === 0x2a ? OutputStream.log : 0;
    if (stream === 0 || !this.#varint(message, 1, end)) return null;
    // the one member, exactly to the end of the message
    if (this.#pos + this.#value !== end) return null;
    const c = this.#chunk;
    c.stream = stream;
    c.data = EMPTY;
    c.timestampMs = 0;
    c.eof = false;
    c.seq = 0;
    c.offset = 0;
    let idStart = -1;
    let idEnd = -1;
    let seen = 0;
    let pos = this.#pos;
    while (pos < end) {
      const t = message[pos++]!;
      const field = t >>> 3;
      // one-byte tags only (fields 1-6), each field at most once
      if (t >= 0x80 || field < 1 || field > 6 || (seen & (1 << field)) !== 0) return null;
      seen |= 1 << field;
      const wire = t & 7;
      if (field <= 2) {
        if (wire !== kLen || !this.#varint(message, pos, end)) return null;
        const from = this.#pos;
        const to = from + this.#value;
        if (to > end) return null;
        if (field === 1) {
          idStart = from;
          idEnd = to;
        } else c.data = message.subarray(from, to);
        pos = to;
        continue;
      }
      if (wire !== kVarint || !this.#varint64(message, pos, end, field === 3)) return null;
      pos = this.#pos;
      if (field === 3) c.timestampMs = this.#value;
      else if (field === 4) c.eof = this.#value !== 0;
      else if (field === 5) c.seq = this.#value;
      else c.offset = this.#value;
    }
    const id = idStart < 0 ? '' : this.#known(message, idStart, idEnd);
    if (id === undefined) {
      this.#missed = { message, from: idStart, to: idEnd };
      return null;
    }
    c.streamId = id;
    return c;
  }

  /**
   * Remembers the command id protobufjs decoded from `message`, when read() returned null for it
   * only because that id was new (a well-formed lone chunk: the id bytes are where read() saw them).
   */
  learn(message: Uint8Array, streamId: string | null | undefined): void {
    const missed = this.#missed;
    this.#missed = undefined;
    if (missed === undefined || missed.message !== message || typeof streamId !== 'string') return;
    if (missed.to - missed.from > 256) return;
    // A copy, whatever `message` is: Buffer.prototype.slice would keep a view into a message
    // whose memory is reused (the ring, grpc-js's buffers), and the remembered id would change.
    this.#ids[this.#nextSlot] = { bytes: Uint8Array.prototype.slice.call(message, missed.from, missed.to), id: streamId };
    this.#nextSlot = (this.#nextSlot + 1) % kIdSlots;
  }

  #known(message: Uint8Array, from: number, to: number): string | undefined {
    const n = to - from;
    if (n === 0) return '';
    for (const slot of this.#ids) {
      const b = slot.bytes;
      if (b.byteLength !== n) continue;
      let i = 0;
      while (i < n && b[i] === message[from + i]) i++;
      if (i === n) return slot.id;
    }
    return undefined;
  }

  /** A varint of at most 32 bits at `pos` (a length): sets #value and #pos; false when malformed. */
  #varint(b: Uint8Array, pos: number, end: number): boolean {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (pos >= end) return false;
      const byte = b[pos++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) {
        if (value > 0xffffffff) return false;
        this.#value = value;
        this.#pos = pos;
        return true;
      }
    }
    return false;
  }

  /** A 64-bit varint as protobufjs's LongBits.toNumber gives it (signed for int64). */
  #varint64(b: Uint8Array, pos: number, end: number, signed: boolean): boolean {
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) return false;
      const byte = b[pos++]!;
      const bits = byte & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (byte < 0x80) {
        this.#value = (signed ? hi | 0 : hi >>> 0) * 4294967296 + (lo >>> 0);
        this.#pos = pos;
        return true;
      }
    }
    return false;
  }
}
