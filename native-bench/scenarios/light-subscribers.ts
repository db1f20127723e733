/**
 * Cheap subscribers for the bench client process: they count the bytes they receive and check
 * that the chunk seqs of one command arrive 1, 2, 3, … without a hole, reading only what they
 * must (an SSE event's first line; a WS message's `"seq":` near its end), so that many of them in
 * one process measure the server rather than the client.
 *
 * Both read raw sockets with `onread` into ONE buffer per thread that every socket reuses, and
 * parse in place with byte state machines: no Buffer, string or array per read, frame or event.
 * (The first version read through node:http and stream 'data' events: a new Buffer per read,
 * ~110 MB/s of short-lived external memory at the latency scenario's rate, 23-44 collections a
 * second in the client, and those pauses were most of the measured tail; flamegraphs/latency-after.md.)
 *
 * - SSE: GET by hand, the response head, then the body de-chunked when the server chunks it
 *   (uWS does); events end with a blank line; an event's first line is `id: <clock>-<seq>` for
 *   chunks, `event: agent_output.error` for errors.
 * - WebSocket: the handshake, then frame headers; the last 160 bytes of each message are kept (in
 *   a fixed buffer) to find its seq. Client frames are masked (RFC 6455).
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';

/** What a subscriber reports for every chunk event. */
export type SeqListener = (seq: number, nowMs: number) => void;

/** Every socket of this thread reads into this buffer; each read is parsed before the next one. */
let readBuffer: Buffer | undefined;
function sharedReadBuffer(): Buffer {
  return (readBuffer ??= Buffer.allocUnsafe(256 * 1024));
}

const CR = 13;
const LF = 10;
const HEAD_END = Buffer.from('\r\n\r\n');
const ID_PREFIX = Buffer.from('id: ');
const ERROR_PREFIX = Buffer.from('event: agent_output.error');
const SEQ_KEY = Buffer.from('"seq":');

/** True when `buf[at..at+len)` starts with `prefix`. */
function startsWith(buf: Buffer, at: number, len: number, prefix: Buffer): boolean {
  if (len < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (buf[at + i] !== prefix[i]) return false;
  return true;
}

/** The decimal integer at `buf[at..end)` (stops at the first non-digit); -1 when there is none. */
function digitsAt(buf: Buffer, at: number, end: number): number {
  let n = 0;
  let any = false;
  for (let i = at; i < end; i++) {
    const c = buf[i]!;
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
    any = true;
  }
  return any ? n : -1;
}

/** Tracks seqs: in order from 1, without holes. */
class SeqCheck {
  lastSeq = 0;
  holes = 0;
  errors = 0;
  readonly #listener: SeqListener | undefined;

  constructor(listener?: SeqListener) {
    this.#listener = listener;
  }

  seq(seq: number): void {
    if (seq !== this.lastSeq + 1) this.holes++;
    if (seq > this.lastSeq) this.lastSeq = seq;
    this.#listener?.(seq, performance.now());
  }
}

export interface LightSubscriber {
  readonly bytes: number;
  readonly lastSeq: number;
  /** Seqs that did not follow their predecessor. */
  readonly holes: number;
  /** agent_output.error events (slow_subscriber, gaps) seen. */
  readonly errors: number;
  readonly closed: boolean;
  close(): void;
}

/** A raw socket reading into the shared buffer; `onBytes` parses each read in place. */
function rawSocket(port: number, host: string, onBytes: (buf: Buffer, end: number) => void): net.Socket {
  const socket = net.connect({
    port,
    host,
    onread: {
      buffer: sharedReadBuffer,
      callback: (n: number, buf: Uint8Array): boolean => {
        onBytes(buf as Buffer, n);
        return true;
      },
    },
  });
  socket.setNoDelay(true);
  return socket;
}

/** Collects a response head (handshake only: it may allocate) until the blank line; then `body(buf, from, end)`. */
class HeadReader {
  #head: Buffer | null = Buffer.alloc(0);

  /** Returns the head once complete (and where the body starts in `buf`), else null. */
  feed(buf: Buffer, end: number): { head: string; bodyAt: number } | null {
    if (this.#head === null) return null;
    const before = this.#head.length;
    const all = Buffer.concat([this.#head, buf.subarray(0, end)]);
    const at = all.indexOf(HEAD_END);
    if (at < 0) {
      this.#head = all;
      return null;
    }
    this.#head = null;
    return { head: all.toString('latin1', 0, at), bodyAt: at + 4 - before };
  }

  get done(): boolean {
    return this.#head === null;
  }
}

/** SSE chunked-body states. */
const enum Chunked {
  Size,
  SizeExt,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  Done,
}

export class SseSubscriber implements LightSubscriber {
  bytes = 0;
  closed = false;
  readonly #check: SeqCheck;
  #socket!: net.Socket;
  readonly #headReader = new HeadReader();
  #chunked = false;
  #state = Chunked.Size;
  #size = 0;
  #remaining = 0;
  /** At the start of a line. */
  #lineStart = true;
  /** The current line is an event's first line (after a blank line). */
  #firstLine = true;
  /** The first line so far (only its first bytes matter). */
  readonly #line = Buffer.alloc(64);
  #lineLen = 0;

  private constructor(listener?: SeqListener) {
    this.#check = new SeqCheck(listener);
  }

  static open(url: string, listener?: SeqListener): Promise<SseSubscriber> {
    const u = new URL(url);
    const sub = new SseSubscriber(listener);
    return new Promise((resolve, reject) => {
      const socket = rawSocket(Number(u.port || 80), u.hostname, (buf, end) => {
        if (sub.#headReader.done) return sub.#body(buf, 0, end);
        const h = sub.#headReader.feed(buf, end);
        if (h === null) return;
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(h.head)?.[1];
        if (status !== '200') {
          socket.destroy();
          return reject(new Error(`SSE ${url}: status ${status ?? '?'}`));
        }
        sub.#chunked = /\r\ntransfer-encoding:[^\r]*chunked/i.test(h.head);
        resolve(sub);
        sub.#body(buf, h.bodyAt, end);
      });
      sub.#socket = socket;
      socket.on('error', (err) => {
        sub.closed = true;
        reject(err);
      });
      socket.on('close', () => (sub.closed = true));
      socket.on('connect', () => {
        socket.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nAccept: text/event-stream\r\n\r\n`);
      });
    });
  }

  get lastSeq(): number {
    return this.#check.lastSeq;
  }
  get holes(): number {
    return this.#check.holes;
  }
  get errors(): number {
    return this.#check.errors;
  }

  close(): void {
    this.#socket.destroy();
  }

  /** Body bytes `buf[at..end)`: de-chunked when chunked, then to the event scanner. */
  #body(buf: Buffer, at: number, end: number): void {
    if (!this.#chunked) {
      this.#events(buf, at, end);
      return;
    }
    while (at < end) {
      switch (this.#state) {
        case Chunked.Size: {
          const c = buf[at++]!;
          const v = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (v >= 0) this.#size = this.#size * 16 + v;
          else if (c === CR) this.#state = Chunked.SizeLf;
          else this.#state = Chunked.SizeExt;
          break;
        }
        case Chunked.SizeExt:
          if (buf[at++] === CR) this.#state = Chunked.SizeLf;
          break;
        case Chunked.SizeLf:
          at++;
          this.#remaining = this.#size;
          this.#size = 0;
          this.#state = this.#remaining === 0 ? Chunked.Done : Chunked.Data;
          break;
        case Chunked.Data: {
          const take = Math.min(this.#remaining, end - at);
          this.#events(buf, at, at + take);
          at += take;
          this.#remaining -= take;
          if (this.#remaining === 0) this.#state = Chunked.DataCr;
          break;
        }
        case Chunked.DataCr:
          at++;
          this.#state = Chunked.DataLf;
          break;
        case Chunked.DataLf:
          at++;
          this.#state = Chunked.Size;
          break;
        case Chunked.Done:
          return;
      }
    }
  }

  /** SSE payload bytes `buf[at..end)`: only each event's first line is looked at. */
  #events(buf: Buffer, at: number, end: number): void {
    this.bytes += end - at;
    while (at < end) {
      if (this.#lineStart) {
        if (buf[at] === LF) {
          // a blank line ends the event
          at++;
          this.#firstLine = true;
          continue;
        }
        this.#lineStart = false;
        this.#lineLen = 0;
      }
      let nl = buf.indexOf(LF, at);
      if (nl < 0 || nl >= end) nl = -1;
      const stop = nl < 0 ? end : nl;
      if (this.#firstLine) {
        const take = Math.min(stop - at, this.#line.length - this.#lineLen);
        if (take > 0) {
          buf.copy(this.#line, this.#lineLen, at, at + take);
          this.#lineLen += take;
        }
      }
      if (nl < 0) return;
      at = nl + 1;
      this.#lineStart = true;
      if (this.#firstLine) {
        this.#firstLine = false;
        this.#head();
      }
    }
  }

  #head(): void {
    const line = this.#line;
    const len = this.#lineLen;
    if (startsWith(line, 0, len, ID_PREFIX)) {
      const dash = line.lastIndexOf(45, len - 1);
      this.#check.seq(digitsAt(line, dash + 1, len));
    } else if (startsWith(line, 0, len, ERROR_PREFIX)) this.#check.errors++;
  }
}

/** How many bytes of each WS message's end are kept to find its `"seq":`. */
const kTail = 160;

export class WsSubscriber implements LightSubscriber {
  bytes = 0;
  closed = false;
  readonly #check: SeqCheck;
  #socket!: net.Socket;
  readonly #headReader = new HeadReader();
  /** Bytes still to read of the current frame's payload (−1: reading a header). */
  #remaining = -1;
  /** The frame header so far (2, 4 or 10 bytes; server frames are not masked). */
  readonly #header = Buffer.alloc(10);
  #headerLen = 0;
  /** The message's last bytes, a ring of kTail. */
  readonly #tail = Buffer.alloc(kTail);
  #tailBytes = 0;
  /** A linear copy of the ring for the search (kept, not allocated per message). */
  readonly #flat = Buffer.alloc(kTail);

  private constructor(listener?: SeqListener) {
    this.#check = new SeqCheck(listener);
  }

  /** Connects, upgrades, then sends `firstMessage` (e.g. a subscribe) once open. */
  static open(port: number, firstMessage?: string, listener?: SeqListener): Promise<WsSubscriber> {
    const sub = new WsSubscriber(listener);
    return new Promise((resolve, reject) => {
      const socket = rawSocket(port, '127.0.0.1', (buf, end) => {
        if (sub.#headReader.done) return sub.#feed(buf, 0, end);
        const h = sub.#headReader.feed(buf, end);
        if (h === null) return;
        if (!/^HTTP\/1\.1 101/.test(h.head)) {
          socket.destroy();
          return reject(new Error('WS upgrade refused'));
        }
        if (firstMessage !== undefined) sub.send(firstMessage);
        resolve(sub);
        sub.#feed(buf, h.bodyAt, end);
      });
      sub.#socket = socket;
      socket.on('error', (err) => {
        sub.closed = true;
        reject(err);
      });
      socket.on('close', () => (sub.closed = true));
      socket.on('connect', () => {
        const key = randomBytes(16).toString('base64');
        socket.write(
          `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
      });
    });
  }

  get lastSeq(): number {
    return this.#check.lastSeq;
  }
  get holes(): number {
    return this.#check.holes;
  }
  get errors(): number {
    return this.#check.errors;
  }

  /** A masked text frame. */
  send(text: string): void {
    const payload = Buffer.from(text, 'utf8');
    const mask = randomBytes(4);
    const len = payload.length;
    const head = len < 126 ? Buffer.from([0x81, 0x80 | len]) : Buffer.from([0x81, 0x80 | 126, len >> 8, len & 0xff]);
    for (let i = 0; i < len; i++) payload[i] = (payload[i] ?? 0) ^ (mask[i & 3] ?? 0);
    this.#socket.write(Buffer.concat([head, mask, payload]));
  }

  close(): void {
    this.#socket.destroy();
  }

  /** Header bytes needed so far: 2, then 4 or 10 by the length code. */
  #headerNeed(): number {
    if (this.#headerLen < 2) return 2;
    const l = this.#header[1]! & 0x7f;
    return l === 126 ? 4 : l === 127 ? 10 : 2;
  }

  #feed(buf: Buffer, at: number, end: number): void {
    while (at < end) {
      if (this.#remaining < 0) {
        while (at < end && this.#headerLen < this.#headerNeed()) this.#header[this.#headerLen++] = buf[at++]!;
        if (this.#headerLen < this.#headerNeed()) return;
        const h = this.#header;
        const l = h[1]! & 0x7f;
        this.#remaining = l === 126 ? h.readUInt16BE(2) : l === 127 ? Number(h.readBigUInt64BE(2)) : l;
        const opcode = h[0]! & 0x0f;
        this.#headerLen = 0;
        if (opcode === 8) {
          this.closed = true;
          this.#socket.destroy();
          return;
        }
        this.#tailBytes = 0;
        if (this.#remaining === 0) {
          this.#remaining = -1;
          this.#message();
          continue;
        }
      }
      const take = Math.min(this.#remaining, end - at);
      this.#keep(buf, Math.max(at, at + take - kTail), at + take);
      at += take;
      this.#remaining -= take;
      this.bytes += take;
      if (this.#remaining === 0) {
        this.#remaining = -1;
        this.#message();
      }
    }
  }

  /** Appends `buf[from..to)` (at most kTail bytes) to the ring of the message's last bytes. */
  #keep(buf: Buffer, from: number, to: number): void {
    for (let i = from; i < to; i++) this.#tail[this.#tailBytes++ % kTail] = buf[i]!;
  }

  #message(): void {
    // the ring in order into #flat: oldest first
    const n = Math.min(this.#tailBytes, kTail);
    const start = this.#tailBytes - n;
    for (let i = 0; i < n; i++) this.#flat[i] = this.#tail[(start + i) % kTail]!;
    const at = n < SEQ_KEY.length ? -1 : this.#flat.lastIndexOf(SEQ_KEY, n - SEQ_KEY.length);
    if (at >= 0) this.#check.seq(digitsAt(this.#flat, at + SEQ_KEY.length, n));
    this.#tailBytes = 0;
  }
}

/** Smallest lastSeq over the subscribers. */
export function minSeq(subs: readonly LightSubscriber[]): number {
  let m = Infinity;
  for (const s of subs) if (s.lastSeq < m) m = s.lastSeq;
  return m === Infinity ? 0 : m;
}

/** Total bytes received. */
export function totalBytes(subs: readonly LightSubscriber[]): number {
  let n = 0;
  for (const s of subs) n += s.bytes;
  return n;
}
