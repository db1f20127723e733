/**
 * The server end of one pty-ws.v1 connection, in memory, for PtyConnection's tests: a socket with
 * the browser WebSocket API (what the client takes as its constructor) whose far side speaks the
 * binding through the server's own code. Subprotocol choice is the server's selectSubprotocol;
 * every frame the client sends is decoded by the server's decodeClientFrame (or decodeBinaryInput)
 * and checked against the binding's JSON Schema, so a client frame the server would refuse fails
 * the test; what the server sends is made by src/sessions/binding's encoders.
 */
import assert from 'node:assert/strict';
import { decodeBinaryInput, encodeBinaryOutput, selectSubprotocol } from '../../../src/sessions/binding/binary.js';
import { PTY_EXTENSIONS_URI, SUPPORTED_OPERATIONS, type OutputStream } from '../../../src/sessions/binding/codes.js';
import { decodeClientFrame } from '../../../src/sessions/binding/decode.js';
import { helloFrame, toText } from '../../../src/sessions/binding/encode.js';
import type { ClientFrame, ServerFrame } from '../../../src/sessions/binding/frames.js';
import type { WebSocketLike } from '../../../src/client/http-transport.js';
import { assertValid, validateClient } from '../sessions/binding/schema-kit.js';

/** What the client sent: a decoded text frame, or the bytes of a PW1I message. */
export type Received = { kind: 'frame'; frame: ClientFrame; input?: Uint8Array } | { kind: 'binary'; input: Uint8Array };

export class FakePtySocket implements WebSocketLike {
  /** The socket the last PtyConnection opened. */
  static last: FakePtySocket | undefined;
  readyState = 0;
  protocol = '';
  binaryType = 'blob';
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  readonly offered: string[];
  readonly received: Received[] = [];
  closedWith: { code: number; reason: string } | undefined;

  constructor(
    readonly url: string,
    protocols?: string | string[],
  ) {
    this.offered = protocols === undefined ? [] : typeof protocols === 'string' ? [protocols] : [...protocols];
    FakePtySocket.last = this;
  }

  // ---- the client's side (WebSocketLike)

  send(data: string | Uint8Array | ArrayBuffer): void {
    assert.equal(this.readyState, 1, 'the client sends only on an open socket');
    if (typeof data === 'string') {
      const r = decodeClientFrame(data);
      assert.ok(r.ok, `the server refuses ${data}: ${r.ok ? '' : `${r.code} ${r.message}`}`);
      assertValid(validateClient, JSON.parse(data));
      this.received.push(r.input === undefined ? { kind: 'frame', frame: r.frame } : { kind: 'frame', frame: r.frame, input: r.input });
      return;
    }
    assert.equal(this.protocol, 'pty-ws.v1.binary', 'binary messages only on pty-ws.v1.binary');
    const r = decodeBinaryInput(data instanceof Uint8Array ? data : new Uint8Array(data));
    assert.ok(r.ok, r.ok ? '' : r.message);
    this.received.push({ kind: 'binary', input: r.value });
  }

  close(code = 1005, reason = ''): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.closedWith = { code, reason };
    this.onclose?.({ code, reason });
  }

  // ---- the server's side

  /** Accepts the upgrade as the server would (binary preferred), then sends binding_hello. */
  open(opts: { currentSequence?: number; only?: 'pty-ws.v1' } = {}): void {
    const chosen = selectSubprotocol((opts.only !== undefined ? this.offered.filter((p) => p === opts.only) : this.offered).join(', '));
    assert.ok(chosen !== null, `no subprotocol the server speaks in ${JSON.stringify(this.offered)}`);
    this.protocol = chosen;
    this.readyState = 1;
    this.onopen?.({});
    this.sendFrame(
      helloFrame({
        supported_operations: [...SUPPORTED_OPERATIONS],
        activated_extensions: [PTY_EXTENSIONS_URI],
        session: { session_id: 'sess-1', current_sequence: opts.currentSequence ?? 0 },
        session_host: {
          default_backend: 'tmux',
          default_class: 'managed',
          supported_backends: ['tmux'],
          supported_classes: ['managed'],
          pairs: [{ session_backend: 'tmux', session_class: 'managed', available: true }],
          observe_supported: true,
          drive_supported: true,
          reattach_supported: true,
        },
        payload_modes: {
          subprotocol: chosen,
          binary: chosen === 'pty-ws.v1.binary',
          json_subprotocol: 'pty-ws.v1',
          binary_subprotocol: 'pty-ws.v1.binary',
          max_input_bytes: 65536,
          max_frame_bytes: 131072,
        },
        extension_params: {},
        server_info: { name: 'sandboxd', version: 'test' },
      }),
    );
  }

  sendFrame(frame: ServerFrame): void {
    this.onmessage?.({ data: toText(frame) });
  }

  /** A PW1O message, delivered as the ArrayBuffer a binaryType 'arraybuffer' socket hands over. */
  sendOutput(sequence: number, text: string, stream: OutputStream = 'stdout'): void {
    const msg = encodeBinaryOutput(sequence, new TextEncoder().encode(text), stream);
    this.onmessage?.({ data: msg.buffer.slice(msg.byteOffset, msg.byteOffset + msg.byteLength) });
  }

  /** The server closes the connection. */
  serverClose(code: number, reason = ''): void {
    this.close(code, reason);
  }

  /** The decoded text frames of op `op`, oldest first. */
  framesOf<Op extends ClientFrame['op']>(op: Op): Extract<ClientFrame, { op: Op }>[] {
    return this.received.flatMap((r) => (r.kind === 'frame' && r.frame.op === op ? [r.frame as Extract<ClientFrame, { op: Op }>] : []));
  }

  /** Everything typed, from JSON and PW1I input alike, as text. */
  typed(): string {
    const parts = this.received.flatMap((r) => (r.input !== undefined ? [r.input] : []));
    return parts.map((b) => new TextDecoder().decode(b)).join('');
  }
}

/** The last socket opened, which a test expects to exist. */
export function lastSocket(): FakePtySocket {
  const ws = FakePtySocket.last;
  assert.ok(ws !== undefined, 'no socket was opened');
  return ws;
}
