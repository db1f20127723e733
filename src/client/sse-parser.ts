/**
 * An incremental text/event-stream parser, as the HTML standard's EventSource interprets a
 * stream (section "Interpreting an event stream"), for streams read with fetch.
 *
 * Bytes arrive in arbitrary chunks: UTF-8 sequences and CR LF pairs may be split anywhere, and
 * the result does not depend on where (the property test feeds every chunking). Lines end in
 * CR LF, LF or CR; a leading BOM is dropped; `:` lines are comments; `data` lines join with
 * `\n`; `id` sets the last event id (ignored when it contains NUL) and persists across events;
 * `retry` takes digits only; a blank line dispatches, unless no data was given.
 */

export interface SseEvent {
  /** The `event` field; `message` when none was given. */
  event: string;
  data: string;
  /** The last event id in force when this event was dispatched (undefined before any). */
  id: string | undefined;
}

export interface SseParserHandlers {
  onEvent(ev: SseEvent): void;
  /** A `retry:` field with a valid integer (ms). */
  onRetry?(ms: number): void;
  /** A comment line's text (after the colon), e.g. heartbeats. */
  onComment?(text: string): void;
}

export class SseParser {
  readonly #handlers: SseParserHandlers;
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  /** The previous chunk ended in CR: a LF at the start of the next one belongs to it. */
  #skipLf = false;
  #firstChunk = true;
  #data: string[] = [];
  #eventType = '';
  #lastId: string | undefined;

  constructor(handlers: SseParserHandlers, initialLastEventId?: string) {
    this.#handlers = handlers;
    this.#lastId = initialLastEventId;
  }

  /** The last event id seen (or the initial one): send it as Last-Event-ID when reconnecting. */
  get lastEventId(): string | undefined {
    return this.#lastId;
  }

  /** Feed bytes (or already-decoded text). */
  push(chunk: Uint8Array | string): void {
    let text = typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    if (this.#firstChunk && text.length > 0) {
      this.#firstChunk = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (text.length === 0) return;
    if (this.#skipLf) {
      this.#skipLf = false;
      if (text.charCodeAt(0) === 0x0a) text = text.slice(1);
    }
    this.#buffer += text;
    let start = 0;
    const buf = this.#buffer;
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      this.#line(buf.slice(start, i));
      if (c === 0x0d) {
        if (i + 1 < buf.length) {
          if (buf.charCodeAt(i + 1) === 0x0a) i++;
        } else {
          this.#skipLf = true;
        }
      }
      start = i + 1;
    }
    this.#buffer = buf.slice(start);
  }

  /**
   * The stream ended. An incomplete event (no blank line yet) is discarded, as EventSource does;
   * the decoder is flushed so the parser can be reused for a new connection.
   */
  end(): void {
    this.#decoder.decode();
    this.#buffer = '';
    this.#skipLf = false;
    this.#firstChunk = true;
    this.#data = [];
    this.#eventType = '';
  }

  #line(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (line.charCodeAt(0) === 0x3a) {
      this.#handlers.onComment?.(line.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    switch (field) {
      case 'event':
        this.#eventType = value;
        break;
      case 'data':
        this.#data.push(value);
        break;
      case 'id':
        if (!value.includes('\u0000')) this.#lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.#handlers.onRetry?.(Number(value));
        break;
      default:
        // Unknown fields are ignored.
        break;
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const type = this.#eventType;
    this.#data = [];
    this.#eventType = '';
    if (data.length === 0) return;
    this.#handlers.onEvent({ event: type === '' ? 'message' : type, data: data.join('\n'), id: this.#lastId });
  }
}

/** All events of a complete stream text (tests, small bodies). */
export function parseSseText(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  const p = new SseParser({ onEvent: (e) => out.push(e) });
  p.push(text);
  p.end();
  return out;
}
