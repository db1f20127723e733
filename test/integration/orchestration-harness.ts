/**
 * A stand-in orchestration server for the orchestration link tests: a WebSocket server of the
 * `ws` package on 127.0.0.1 that records every connection (its path and query) and every text
 * message (parsed JSON, checked against src/orchestration/orch-link-message-v1.schema.json), and
 * can be stopped and started again on the same port.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { repoRoot } from '../support/paths.js';

interface WsServerSocket {
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: () => void): this;
  terminate(): void;
}
interface WsServer {
  readonly clients: Set<WsServerSocket>;
  on(event: 'connection', cb: (socket: WsServerSocket, req: { url?: string }) => void): this;
  on(event: 'listening', cb: () => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  close(cb: (err?: Error) => void): void;
}
type WsServerCtor = new (opts: { host: string; port: number; autoPong: boolean }) => WsServer;
const { WebSocketServer } = createRequire(import.meta.url)('ws') as { WebSocketServer: WsServerCtor };

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;

/** Validators of the link's message schema and the bridge status schema. */
export function linkSchemas(): { message: (v: unknown) => string | null; status: (v: unknown) => string | null } {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv, ['date-time', 'uuid']);
  const load = (f: string): object => JSON.parse(readFileSync(join(repoRoot, 'src', 'orchestration', f), 'utf8')) as object;
  const check = (schema: object): ((v: unknown) => string | null) => {
    const fn = ajv.compile(schema);
    return (v) => (fn(v) ? null : ajv.errorsText(fn.errors));
  };
  return { message: check(load('orch-link-message-v1.schema.json')), status: check(load('bridge-status-v1.schema.json')) };
}

export interface OrchMessage {
  readonly type: string;
  readonly [field: string]: unknown;
}

export interface OrchConnection {
  /** Path and query the link dialled. */
  readonly url: string;
  readonly messages: OrchMessage[];
  closed: boolean;
}

export class OrchTestServer {
  readonly port: number;
  readonly connections: OrchConnection[] = [];
  /** Messages that were not JSON or did not fit the schema (a test asserts it stays empty). */
  readonly invalid: string[] = [];
  #server: WsServer | null = null;
  readonly #checkMessage = linkSchemas().message;
  readonly #listeners = new Set<() => void>();

  readonly #autoPong: boolean;

  /** `autoPong: false` makes it a peer that stops answering pings (a half-open connection). */
  constructor(port: number, opts: { autoPong?: boolean } = {}) {
    this.port = port;
    this.#autoPong = opts.autoPong ?? true;
  }

  get running(): boolean {
    return this.#server !== null;
  }

  /** Every message of every connection, in arrival order. */
  all(): OrchMessage[] {
    return this.connections.flatMap((c) => c.messages);
  }

  /** For waitFor's `wake`: called on every connection, message and close. */
  onChange(cb: () => void): () => void {
    this.#listeners.add(cb);
    return () => this.#listeners.delete(cb);
  }

  async start(): Promise<void> {
    const server = new WebSocketServer({ host: '127.0.0.1', port: this.port, autoPong: this.#autoPong });
    await new Promise<void>((resolve, reject) => {
      server.on('listening', resolve);
      server.on('error', reject);
    });
    server.on('connection', (socket, req) => {
      const conn: OrchConnection = { url: req.url ?? '', messages: [], closed: false };
      this.connections.push(conn);
      socket.on('message', (data, isBinary) => {
        const text = data.toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        const problem = isBinary ? 'binary message' : parsed === undefined ? 'not JSON' : this.#checkMessage(parsed);
        if (problem !== null) this.invalid.push(`${problem}: ${text.slice(0, 300)}`);
        else conn.messages.push(parsed as OrchMessage);
        this.#changed();
      });
      socket.on('close', () => {
        conn.closed = true;
        this.#changed();
      });
      this.#changed();
    });
    this.#server = server;
  }

  /** Stops listening and cuts every connection (the link sees its socket close). */
  async stop(): Promise<void> {
    const server = this.#server;
    if (server === null) return;
    this.#server = null;
    for (const c of server.clients) c.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #changed(): void {
    for (const cb of this.#listeners) cb();
  }
}
