/**
 * A raw pty-ws.v1 client for the conformance scenarios (pty-conformance.test.ts), on the `ws`
 * package. Every text frame the server sends is validated against the project's schema
 * (`$defs/ServerFrame`) and every frame this client sends against `$defs/ClientFrame` (except
 * {@link ConformanceClient.sendRaw}, the deliberately malformed ones); PW1O binary messages are
 * decoded with src/sessions/binding/binary.ts. Each frame goes through the ordering rules
 * (pty-conformance-rules.ts); {@link assertConformant} fails a test with every violation and the
 * frames each client received.
 *
 * Waits never sleep: they re-check when a frame arrives or the socket closes, up to a named
 * deadline, and a timeout shows the frames received.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { TextDecoder } from 'node:util';
import { decodeBinaryOutput, encodeBinaryInput } from '../../src/sessions/binding/binary.js';
import { PTY_EXTENSIONS_URI, type Role } from '../../src/sessions/binding/codes.js';
import type { BindingHelloPayload, JoinSessionPayload, PtyExtensionParams, ServerFrame } from '../../src/sessions/binding/frames.js';
import { newFrameId, nowTs } from '../../src/sessions/binding/values.js';
import { DEADLINE_MS, settled, waitFor } from '../support/wait.js';
import { assertValid, validateClient, validateServer } from '../unit/sessions/binding/schema-kit.js';
import { describeFrame, isKeyframeUnavailable, StreamRules, type SeenFrame, type SessionLedger } from './pty-conformance-rules.js';

interface WsLike {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number, reason: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'unexpected-response', cb: (req: { destroy(): void }, res: { statusCode: number }) => void): this;
  send(data: string | Uint8Array): void;
  close(): void;
  terminate(): void;
  readonly protocol: string;
}
type WsCtor = new (url: string, protocols?: string | string[]) => WsLike;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

export const JSON_ONLY = ['pty-ws.v1'];
export const BINARY_TOO = ['pty-ws.v1', 'pty-ws.v1.binary'];

/** How far back a text match may start before the new output (markers are far shorter). */
const kOverlapChars = 256;

/** What a probe command prints once a shell runs it (the typed line does not contain it). */
const SHELL_PROBE = { input: 'echo "shell-$((40+2))"\r', output: /shell-42/ } as const;

/**
 * The status of the upgrade of `url` offering `protocols` (none: no Sec-WebSocket-Protocol):
 * the HTTP status of a refusal, or 101 with the chosen subprotocol.
 */
export function upgradeStatus(url: string, protocols?: string[]): Promise<{ status: number; protocol: string }> {
  const answered = new Promise<{ status: number; protocol: string }>((resolve, reject) => {
    const ws = new WebSocketClient(url, protocols);
    ws.on('unexpected-response', (req, res) => {
      resolve({ status: res.statusCode, protocol: '' });
      req.destroy();
    });
    ws.on('open', () => {
      resolve({ status: 101, protocol: ws.protocol });
      ws.terminate();
    });
    ws.on('error', (err) => reject(err));
  });
  return settled(`the upgrade of ${url} (offering ${JSON.stringify(protocols)}) to be answered`, answered, {
    deadlineMs: DEADLINE_MS.local,
  });
}

export interface OpenOptions {
  /** Subprotocols offered; default {@link JSON_ONLY}. */
  readonly protocols?: string[];
  /** The session's ledger (one per session, shared by its clients). */
  readonly ledger: SessionLedger;
  /** Names this client in messages. */
  readonly name: string;
}

export interface JoinOptions {
  readonly label?: string;
  /** What this join starts (native sessions) or selects: backend, class, argv/command, size. */
  readonly start?: Omit<JoinSessionPayload, 'role' | 'client_label'>;
  readonly replayFrom?: number;
}

export class ConformanceClient {
  readonly name: string;
  readonly ws: WsLike;
  readonly seen: SeenFrame[] = [];
  readonly rules: StreamRules;
  /** Schema failures of received frames. */
  readonly invalid: string[] = [];
  readonly #decoder = new TextDecoder('utf-8');
  /** Decoded output, one piece per Output frame (joined on demand: appending to one string and rescanning it would be quadratic). */
  readonly #pieces: string[] = [];
  #joined = '';
  #joinedPieces = 0;
  readonly #taken = new Set<SeenFrame>();
  readonly #listeners = new Set<() => void>();
  #closed: { code: number; reason: string } | undefined;

  private constructor(ws: WsLike, opts: OpenOptions) {
    this.name = opts.name;
    this.ws = ws;
    this.rules = new StreamRules(opts.ledger, opts.name);
    ws.on('message', (data, isBinary) => this.#receive(data, isBinary));
    ws.on('close', (code, reason) => {
      this.#closed = { code, reason: reason.toString('utf8') };
      this.#wake();
    });
  }

  /** Connects and waits for binding_hello. */
  static async open(url: string, opts: OpenOptions): Promise<ConformanceClient> {
    const ws = new WebSocketClient(url, opts.protocols ?? JSON_ONLY);
    const c = new ConformanceClient(ws, opts);
    await new Promise<void>((resolve, reject) => {
      ws.on('open', resolve).on('error', reject);
      ws.on('unexpected-response', (req, res) => {
        reject(new Error(`${url}: HTTP ${res.statusCode} instead of an upgrade`));
        req.destroy();
      });
    });
    await c.next('binding_hello', (f) => f.op === 'binding_hello');
    return c;
  }

  get protocol(): string {
    return this.ws.protocol;
  }

  get hello(): BindingHelloPayload {
    const f = this.seen[0]?.json;
    assert.equal(f?.op, 'binding_hello');
    return f.payload;
  }

  /** The pty-extensions parameters binding_hello states (cadence, replay, controllers). */
  get params(): PtyExtensionParams {
    const p = this.hello.extension_params[PTY_EXTENSIONS_URI];
    assert.ok(p !== undefined, `binding_hello has no extension_params for ${PTY_EXTENSIONS_URI}`);
    return p;
  }

  /** The highest sequence this connection has seen (what a reconnect passes as replay_from). */
  get lastSequence(): number {
    return this.rules.highest;
  }

  get closed(): { code: number; reason: string } | undefined {
    return this.#closed;
  }

  /** Output received so far, decoded as UTF-8. */
  text(): string {
    if (this.#joinedPieces !== this.#pieces.length) {
      this.#joined += this.#pieces.slice(this.#joinedPieces).join('');
      this.#joinedPieces = this.#pieces.length;
    }
    return this.#joined;
  }

  /** Sends a client frame (checked against `$defs/ClientFrame`); returns its id. */
  send(op: string, payload: object, extra: { replay_from?: number } = {}): string {
    const frame = { op, id: newFrameId(), ts: nowTs(), ...extra, payload };
    assertValid(validateClient, frame);
    this.ws.send(JSON.stringify(frame));
    return frame.id;
  }

  /** Sends anything, unchecked: for the malformed frames a scenario wants refused. */
  sendRaw(data: string | Uint8Array): void {
    this.ws.send(data);
  }

  type(text: string): string {
    return this.send('pty.session_input', { data: Buffer.from(text).toString('base64') });
  }

  /** Input as a PW1I binary message (pty-ws.v1.binary). */
  typeBinary(text: string): void {
    this.ws.send(encodeBinaryInput(Buffer.from(text)));
  }

  /** Sends pty.join_session and waits for RoleAssigned; `id` is the join's request id. */
  async join(role: Role, opts: JoinOptions = {}): Promise<{ id: string; assigned: SeenFrame }> {
    const payload: JoinSessionPayload = { role, ...opts.start };
    if (opts.label !== undefined) payload.client_label = opts.label;
    const id = this.send('pty.join_session', payload, opts.replayFrom === undefined ? {} : { replay_from: opts.replayFrom });
    return { id, assigned: await this.nextKind('RoleAssigned') };
  }

  /** Waits for the first frame matching `match` that no earlier next() returned, and takes it. */
  async next(what: string, match: (f: SeenFrame) => boolean, deadlineMs: number = DEADLINE_MS.process): Promise<SeenFrame> {
    const f = await this.#until(what, () => this.seen.find((s) => !this.#taken.has(s) && match(s)), deadlineMs);
    this.#taken.add(f);
    return f;
  }

  async nextKind(kind: string, match: (f: SeenFrame) => boolean = () => true, deadlineMs?: number): Promise<SeenFrame> {
    return await this.next(`a ${kind} frame`, (f) => f.kind === kind && match(f), deadlineMs);
  }

  /**
   * The next connection-local Keyframe (a join's or a request's), or the PTY Error
   * KEYFRAME_UNAVAILABLE that stands in for it; the caller checks which.
   */
  async nextKeyframe(deadlineMs?: number): Promise<SeenFrame> {
    return await this.next(
      'a connection-local Keyframe',
      (f) => f.local && (f.kind === 'Keyframe' || isKeyframeUnavailable(f)),
      deadlineMs,
    );
  }

  /** The next binding Error with `code`. */
  async nextError(code: string): Promise<SeenFrame> {
    return await this.next(`Error ${code}`, (f) => f.json?.op === 'Error' && f.json.payload.code === code);
  }

  /**
   * Waits until the output matches `re`. Each check scans only what arrived since the last one
   * (plus an overlap of `kOverlapChars` for a match split across frames): a scenario streams
   * megabytes, and rescanning all of it per frame would be quadratic.
   */
  async waitText(re: RegExp, deadlineMs: number = DEADLINE_MS.process): Promise<string> {
    const seen = this.#scanner(re);
    return await this.#until(`output matching ${String(re)}`, () => (seen() ? this.text() : undefined), deadlineMs);
  }

  /** Types `input` (again every `everyMs`) until the output matches `re`. */
  async askUntil(input: string, re: RegExp, what: string, everyMs = 1000, binary = false): Promise<string> {
    const seen = this.#scanner(re);
    let askedMs = 0;
    return await this.#until(
      what,
      () => {
        if (seen()) return this.text();
        if (Date.now() - askedMs >= everyMs) {
          askedMs = Date.now();
          if (binary) this.typeBinary(input);
          else this.type(input);
        }
        return undefined;
      },
      DEADLINE_MS.process,
    );
  }

  /** As controller: waits until the session's shell runs commands (no assumption about its prompt). */
  async waitForShell(binary = false): Promise<void> {
    await this.askUntil(SHELL_PROBE.input, SHELL_PROBE.output, "the session's shell to run a command", 2000, binary);
  }

  async waitClosed(deadlineMs: number = DEADLINE_MS.process): Promise<{ code: number; reason: string }> {
    return await this.#until('the socket to close', () => this.#closed, deadlineMs);
  }

  /** Frames received after `f` (in order). */
  after(f: SeenFrame): SeenFrame[] {
    return this.seen.slice(f.index + 1);
  }

  /** What this client received, for messages: the last frames, the close, the output's tail. */
  describe(last = 30): string {
    const frames = this.seen.slice(-last).map(describeFrame);
    const close = this.#closed === undefined ? '' : `, closed ${this.#closed.code} ${JSON.stringify(this.#closed.reason)}`;
    const tail = this.#pieces.slice(-50).join('').slice(-300);
    return `${this.name}: ${this.seen.length} frames, last [${frames.join(' ')}]${close}, output …${JSON.stringify(tail)}`;
  }

  terminate(): void {
    this.ws.terminate();
  }

  #receive(data: Buffer, isBinary: boolean): void {
    const index = this.seen.length;
    const atMs = Date.now();
    let f: SeenFrame;
    if (isBinary) {
      const r = decodeBinaryOutput(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      if (!r.ok) this.invalid.push(`${this.name} frame #${index}: binary message is not PW1O: ${r.message}`);
      const v = r.ok ? r.value : undefined;
      f = {
        index,
        atMs,
        op: 'PW1O',
        kind: 'Output',
        sequence: v?.sequence,
        json: undefined,
        bytes: v === undefined ? Buffer.alloc(0) : Buffer.from(v.bytes),
        local: false,
      };
      if (this.protocol !== 'pty-ws.v1.binary') this.invalid.push(`${this.name} frame #${index}: binary message on ${this.protocol}`);
    } else {
      let json: ServerFrame | undefined;
      try {
        const parsed: unknown = JSON.parse(data.toString('utf8'));
        assertValid(validateServer, parsed);
        json = parsed as ServerFrame;
      } catch (err) {
        this.invalid.push(`${this.name} frame #${index}: ${(err as Error).message}`);
        json = (() => {
          try {
            return JSON.parse(data.toString('utf8')) as ServerFrame;
          } catch {
            return undefined;
          }
        })();
      }
      const payload = json?.payload as { kind?: unknown; data?: unknown } | undefined;
      const kind = json?.op === 'pty.session_frame' && typeof payload?.kind === 'string' ? payload.kind : undefined;
      f = {
        index,
        atMs,
        op: typeof json?.op === 'string' ? json.op : '(unparsable)',
        kind,
        sequence: typeof json?.sequence === 'number' ? json.sequence : undefined,
        json,
        bytes: kind === 'Output' && typeof payload?.data === 'string' ? Buffer.from(payload.data, 'base64') : undefined,
        local: false,
      };
    }
    this.seen.push(f);
    this.rules.accept(f);
    if (f.kind === 'Output' && f.bytes !== undefined) this.#pieces.push(this.#decoder.decode(f.bytes, { stream: true }));
    this.#wake();
  }

  /** A matcher of `re` against all output that scans each piece once (with an overlap for matches across pieces). */
  #scanner(re: RegExp): () => boolean {
    let from = 0;
    let carry = '';
    return () => {
      const fresh = carry + this.#pieces.slice(from).join('');
      from = this.#pieces.length;
      carry = fresh.slice(-kOverlapChars);
      return re.test(fresh);
    };
  }

  #wake(): void {
    for (const l of this.#listeners) l();
  }

  #until<T>(what: string, check: () => T | undefined, deadlineMs: number): Promise<T> {
    return waitFor(`${this.name}: ${what}`, check, {
      deadlineMs,
      wake: (recheck) => (this.#listeners.add(recheck), () => this.#listeners.delete(recheck)),
      lastState: () => this.describe(),
    });
  }
}

/** Fails with every schema and ordering violation of `clients`, and what each received. */
export function assertConformant(...clients: ConformanceClient[]): void {
  const problems = clients.flatMap((c) => [...c.invalid, ...c.rules.violations]);
  if (problems.length === 0) return;
  const shown = problems.slice(0, 20).join('\n  ');
  const more = problems.length > 20 ? `\n  … and ${problems.length - 20} more` : '';
  assert.fail(`${problems.length} conformance violations:\n  ${shown}${more}\nframes:\n  ${clients.map((c) => c.describe()).join('\n  ')}`);
}

/** The session frame kinds (and ops) of `frames`, for order assertions: `['RoleAssigned', 'MembershipChanged', 'Keyframe']`. */
export function kindsOf(frames: readonly SeenFrame[]): string[] {
  return frames.map((f) => (f.op === 'Error' && f.json?.op === 'Error' ? `Error:${f.json.payload.code}` : (f.kind ?? f.op)));
}
