/**
 * Clients for the streaming integration tests: an incremental SSE client over node:http, a raw
 * socket client that stops reading (a stalled subscriber), and a WebSocket client (the `ws`
 * package, a dependency of the uWS package: Node 20 has no global WebSocket without a flag).
 */
import { createHash } from 'node:crypto';
import { request, type IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import net from 'node:net';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Parses the complete events in `text`; returns them and the unparsed rest. */
export function parseSseText(text: string): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  let at = 0;
  for (;;) {
    const end = text.indexOf('\n\n', at);
    if (end < 0) break;
    const block = text.slice(at, end);
    at = end + 2;
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    let fields = 0;
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      fields++;
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (fields === 0) continue;
    events.push(id === undefined ? { event, data: data.join('\n') } : { id, event, data: data.join('\n') });
  }
  return { events, rest: text.slice(at) };
}

/** An SSE stream read as it arrives. */
export class SseClient {
  readonly events: SseEvent[] = [];
  readonly status: number;
  readonly ended: Promise<void>;
  readonly #res: IncomingMessage;
  #rest = '';

  private constructor(res: IncomingMessage) {
    this.#res = res;
    this.status = res.statusCode ?? 0;
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      const { events, rest } = parseSseText(this.#rest + d);
      this.#rest = rest;
      this.events.push(...events);
    });
    this.ended = new Promise((resolve) => {
      res.on('end', () => resolve());
      res.on('close', () => resolve());
      res.on('error', () => resolve());
    });
  }

  /** Opens `url` (GET); resolves once the response head arrived. */
  static open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = request(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) =>
        resolve(new SseClient(res)),
      );
      req.on('error', reject);
      req.end();
    });
  }

  /** Events of these names. */
  named(...names: string[]): SseEvent[] {
    return this.events.filter((e) => names.includes(e.event));
  }

  /** Resolves once `pred` holds for the events received so far; the timeout shows the last event. */
  async until(what: string, pred: (events: SseEvent[]) => boolean, deadlineMs: number = DEADLINE_MS.agent): Promise<void> {
    await waitFor(what, () => pred(this.events), {
      deadlineMs,
      intervalMs: 20,
      lastState: () => `${this.events.length} events, the last ${JSON.stringify(this.events.at(-1))?.slice(0, 300)}`,
    });
  }

  close(): void {
    this.#res.destroy();
  }
}

/** The chunk objects of agent_output / agent_output.replay events. */
export function chunksOf(events: readonly SseEvent[]): Array<Record<string, unknown> & { id: string }> {
  return events
    .filter((e) => e.event === 'agent_output' || e.event === 'agent_output.replay')
    .map((e) => ({ ...(JSON.parse(e.data) as Record<string, unknown>), id: e.id ?? '' }));
}

/** The bytes of the chunks (data_base64 decoded), of one stream when given. */
export function bytesOf(events: readonly SseEvent[], stream?: string): Buffer {
  return Buffer.concat(
    chunksOf(events)
      .filter((c) => stream === undefined || c['stream'] === stream)
      .map((c) => Buffer.from(String(c['data_base64']), 'base64')),
  );
}

export function sha256(b: Uint8Array | string): string {
  return createHash('sha256').update(b).digest('hex');
}

/** A subscriber that sends its request and then stops reading its socket. */
export class StalledSseClient {
  readonly #socket: net.Socket;
  readonly #chunks: Buffer[] = [];
  readonly #closed: Promise<void>;

  constructor(port: number, path: string) {
    this.#socket = net.connect(port, '127.0.0.1');
    this.#socket.on('error', () => undefined);
    this.#socket.on('data', (d: Buffer) => this.#chunks.push(d));
    this.#closed = new Promise((resolve) => this.#socket.on('close', () => resolve()));
    this.#socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`);
    this.#socket.pause();
  }

  /**
   * Reads everything the server sent until the response ended (terminating chunk) or the socket
   * closed, or `timeoutMs` passed; returns the SSE events and whether the response ended.
   */
  async drain(timeoutMs = 60_000): Promise<{ events: SseEvent[]; closed: boolean }> {
    const ended = (): boolean => {
      const tail = Buffer.concat(this.#chunks.slice(-2)).subarray(-7).toString('latin1');
      return tail.endsWith('\r\n0\r\n\r\n');
    };
    this.#socket.resume();
    const closed = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), timeoutMs);
      const check = setInterval(() => {
        if (ended()) finish(true);
      }, 20);
      const finish = (v: boolean): void => {
        clearTimeout(timer);
        clearInterval(check);
        resolve(v);
      };
      void this.#closed.then(() => finish(true));
    });
    const raw = Buffer.concat(this.#chunks);
    return { events: parseSseText(dechunk(raw)).events, closed };
  }

  destroy(): void {
    this.#socket.destroy();
  }
}

/** The body of an HTTP/1.1 response with chunked transfer encoding (what was received of it). */
function dechunk(raw: Buffer): string {
  const head = raw.indexOf('\r\n\r\n');
  if (head < 0) return '';
  const parts: Buffer[] = [];
  let at = head + 4;
  while (at < raw.length) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(raw.toString('latin1', at, eol), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(raw.subarray(eol + 2, Math.min(raw.length, eol + 2 + size)));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** The part of the `ws` client API the tests use. */
export interface WsClient {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number, reason: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  send(data: string): void;
  close(): void;
  terminate(): void;
  pause(): void;
  resume(): void;
}
type WsCtor = new (url: string) => WsClient;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

/** A connected WS client collecting JSON messages. */
export class TestWs {
  readonly messages: Array<Record<string, unknown>> = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly ws: WsClient;

  private constructor(ws: WsClient) {
    this.ws = ws;
    ws.on('message', (d) => this.messages.push(JSON.parse(d.toString('utf8')) as Record<string, unknown>));
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
  }

  static async open(url: string): Promise<TestWs> {
    const ws = new WebSocketClient(url);
    const t = new TestWs(ws);
    await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
    return t;
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  /** Resolves with `pick`'s first answer other than undefined; the timeout shows the last message. */
  async until<T>(
    what: string,
    pick: (messages: Array<Record<string, unknown>>) => T | undefined,
    deadlineMs: number = DEADLINE_MS.process,
  ): Promise<T> {
    return await waitFor(what, () => pick(this.messages), {
      deadlineMs,
      intervalMs: 20,
      lastState: () => `${this.messages.length} messages, the last ${JSON.stringify(this.messages.at(-1))?.slice(0, 300)}`,
    });
  }

  close(): void {
    this.ws.close();
  }
}
