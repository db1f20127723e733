/**
 * Cheap subscribers for the bench client process: they count the bytes they receive and check
 * that the chunk seqs of one command arrive 1, 2, 3, … without a hole, reading only what they
 * must (an SSE event's id line; a WS message's `"seq":` near its end), so that many of them in one
 * process measure the server rather than the client.
 *
 * - SSE over node:http (llhttp removes the chunked encoding): events end with a blank line; an
 *   event's first line is `id: <clock>-<seq>` for chunks.
 * - WebSocket over a raw socket: the handshake, then frame headers; the last 160 bytes of each
 *   message are kept to find its seq. Client frames are masked (RFC 6455).
 */
import { randomBytes } from 'node:crypto';
import { request, type IncomingMessage } from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';

/** What a subscriber reports for every chunk event. */
export type SeqListener = (seq: number, nowMs: number) => void;

const NLNL = Buffer.from('\n\n');

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

export class SseSubscriber implements LightSubscriber {
  bytes = 0;
  closed = false;
  readonly #check: SeqCheck;
  readonly #res: IncomingMessage;
  #pendingHead: string | null = null;
  #lastNl = false;

  private constructor(res: IncomingMessage, listener?: SeqListener) {
    this.#res = res;
    this.#check = new SeqCheck(listener);
    res.on('data', (b: Buffer) => this.#feed(b));
    res.on('close', () => (this.closed = true));
    res.on('error', () => (this.closed = true));
  }

  static open(url: string, listener?: SeqListener): Promise<SseSubscriber> {
    return new Promise((resolve, reject) => {
      const req = request(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`SSE ${url}: status ${res.statusCode}`));
        else resolve(new SseSubscriber(res, listener));
      });
      req.on('error', reject);
      req.end();
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
    this.#res.destroy();
  }

  #feed(buf: Buffer): void {
    this.bytes += buf.length;
    let from = 0;
    if (this.#pendingHead !== null) {
      const nl = buf.indexOf(10);
      if (nl < 0) {
        this.#pendingHead += buf.toString('latin1');
        return;
      }
      const head = this.#pendingHead + buf.toString('latin1', 0, nl);
      this.#pendingHead = null;
      this.#head(head);
      from = nl;
    } else if (this.#lastNl && buf[0] === 10) {
      this.#eventAt(buf, 1);
      from = 1;
    }
    for (;;) {
      const b = buf.indexOf(NLNL, from);
      if (b < 0) break;
      this.#eventAt(buf, b + 2);
      from = b + 2;
    }
    this.#lastNl = buf[buf.length - 1] === 10;
  }

  #eventAt(buf: Buffer, at: number): void {
    if (at >= buf.length) {
      this.#pendingHead = '';
      return;
    }
    const nl = buf.indexOf(10, at);
    if (nl < 0) {
      this.#pendingHead = buf.toString('latin1', at);
      return;
    }
    this.#head(buf.toString('latin1', at, nl));
  }

  #head(line: string): void {
    if (line.startsWith('id: ')) {
      const dash = line.lastIndexOf('-');
      this.#check.seq(Number(line.slice(dash + 1)));
    } else if (line.startsWith('event: agent_output.error')) this.#check.errors++;
  }
}

export class WsSubscriber implements LightSubscriber {
  bytes = 0;
  closed = false;
  readonly #check: SeqCheck;
  readonly #socket: net.Socket;
  #upgraded = false;
  #head: Buffer = Buffer.alloc(0);
  /** Bytes still to read of the current frame's payload (−1: reading a header). */
  #remaining = -1;
  #tail: Buffer[] = [];
  #tailBytes = 0;
  #header: Buffer = Buffer.alloc(0);

  private constructor(socket: net.Socket, listener?: SeqListener) {
    this.#socket = socket;
    this.#check = new SeqCheck(listener);
  }

  /** Connects, upgrades, then sends `firstMessage` (e.g. a subscribe) once open. */
  static open(port: number, firstMessage?: string, listener?: SeqListener): Promise<WsSubscriber> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      const sub = new WsSubscriber(socket, listener);
      socket.setNoDelay(true);
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
      socket.on('data', (b: Buffer) => {
        if (sub.#upgraded) return sub.#feed(b);
        sub.#head = Buffer.concat([sub.#head, b]);
        const end = sub.#head.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!sub.#head.subarray(0, 12).toString('latin1').includes('101')) return reject(new Error('WS upgrade refused'));
        sub.#upgraded = true;
        const rest = sub.#head.subarray(end + 4);
        sub.#head = Buffer.alloc(0);
        if (firstMessage !== undefined) sub.send(firstMessage);
        resolve(sub);
        if (rest.length > 0) sub.#feed(rest);
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

  #feed(buf: Buffer): void {
    let at = 0;
    while (at < buf.length) {
      if (this.#remaining < 0) {
        // header: 2 bytes, then 2 or 8 bytes of length (server frames are not masked)
        const need = (): number => {
          const h = this.#header;
          if (h.length < 2) return 2;
          const l = (h[1] ?? 0) & 0x7f;
          return l === 126 ? 4 : l === 127 ? 10 : 2;
        };
        while (this.#header.length < need() && at < buf.length) {
          const take = Math.min(need() - this.#header.length, buf.length - at);
          this.#header = Buffer.concat([this.#header, buf.subarray(at, at + take)]);
          at += take;
        }
        if (this.#header.length < need()) return;
        const h = this.#header;
        const l = (h[1] ?? 0) & 0x7f;
        this.#remaining = l === 126 ? h.readUInt16BE(2) : l === 127 ? Number(h.readBigUInt64BE(2)) : l;
        const opcode = (h[0] ?? 0) & 0x0f;
        this.#header = Buffer.alloc(0);
        if (opcode === 8) {
          this.closed = true;
          this.#socket.destroy();
          return;
        }
        this.#tail = [];
        this.#tailBytes = 0;
      }
      const take = Math.min(this.#remaining, buf.length - at);
      const piece = buf.subarray(at, at + take);
      at += take;
      this.#remaining -= take;
      this.bytes += take;
      this.#tail.push(piece);
      this.#tailBytes += take;
      while (this.#tail.length > 1 && this.#tailBytes - (this.#tail[0]?.length ?? 0) >= 160)
        this.#tailBytes -= this.#tail.shift()?.length ?? 0;
      if (this.#remaining === 0) {
        this.#remaining = -1;
        this.#message();
      }
    }
  }

  #message(): void {
    const tail = this.#tail.length === 1 ? (this.#tail[0] as Buffer) : Buffer.concat(this.#tail);
    const text = tail.toString('latin1', Math.max(0, tail.length - 160));
    const at = text.lastIndexOf('"seq":');
    if (at >= 0) this.#check.seq(parseInt(text.slice(at + 6), 10));
    this.#tail = [];
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
