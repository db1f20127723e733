/**
 * Projects one command's Claude Code `--output-format stream-json` output (NDJSON on stdout)
 * into chat events (actors/protocol/chat-events.ts). Mapping, line by line:
 *
 * - `system` → status (status = subtype, default `system`); its `model` is remembered.
 * - `assistant` → per content block: `text` (non-empty) → delta; `tool_use` → tool_call. Other
 *   blocks (thinking, redacted_thinking, …) are not chat content and are skipped.
 * - `user` → per `tool_result` block → tool_result (status error when is_error). Other user
 *   blocks (prompt echoes) are skipped.
 * - `result` → done (finish_reason error when is_error or subtype ≠ success). Terminal.
 * - anything else — not JSON, not an object, an unknown `type`, a message without content, a
 *   line over the length cap — → raw, the line preserved as printed.
 *
 * Empty lines are ignored (they still count for raw_ref.line). After a terminal event (done,
 * error) further output produces nothing. `end()` flushes a last line printed without a line
 * break and, when no result came, ends with error NO_RESULT.
 *
 * Deterministic: the same bytes, however chunked, give the same events with the same ids, so a
 * resume (Last-Event-ID `{session}-{seq}`) re-projects the buffered output and skips seq ≤ cursor.
 */
import { ChatErrorCode, chatEventId, type ChatEvent, type ChatEventName } from '../protocol/chat-events.js';
import { DEFAULT_MAX_LINE_BYTES, LineSplitter, type Line } from './line-splitter.js';

export interface ChatProjectorOptions {
  /** Prefix of event ids and `session_id` of every data object. */
  sessionId: string;
  /** `raw_ref.command_id`. */
  commandId: string;
  /** Longest line parsed; longer lines become truncated raw events. Default 1 MiB. */
  maxLineBytes?: number;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class ChatProjector {
  readonly sessionId: string;
  readonly commandId: string;
  readonly #splitter: LineSplitter;
  readonly #onLine = (line: Line): void => this.#project(line);
  #out: ChatEvent[] = [];
  #seq = 0;
  #model: string | null = null;
  #terminated = false;

  constructor(opts: ChatProjectorOptions) {
    this.sessionId = opts.sessionId;
    this.commandId = opts.commandId;
    this.#splitter = new LineSplitter(opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
  }

  /** Seq of the last event produced (0 before any). */
  get seq(): number {
    return this.#seq;
  }

  /** A done or error event was produced; nothing more will be. */
  get terminated(): boolean {
    return this.#terminated;
  }

  /** Model named by the output so far (system init or an assistant message). */
  get model(): string | null {
    return this.#model;
  }

  /** Events completed by these bytes (the caller may reuse `bytes` afterwards). */
  push(bytes: Uint8Array): ChatEvent[] {
    this.#splitter.push(bytes, this.#onLine);
    return this.#take();
  }

  /** The output ended: flushes a last unterminated line, then ends with NO_RESULT if no result came. */
  end(): ChatEvent[] {
    this.#splitter.end(this.#onLine);
    if (!this.#terminated) this.#error(ChatErrorCode.kNoResult, 'the command output ended without a result', 0);
    return this.#take();
  }

  /** Ends the projection with a terminal error (e.g. STREAM_INTERRUPTED); nothing if already ended. */
  interrupt(code: string, message: string): ChatEvent[] {
    if (!this.#terminated) this.#error(code, message, 0);
    return this.#take();
  }

  #take(): ChatEvent[] {
    const out = this.#out;
    if (out.length > 0) this.#out = [];
    return out;
  }

  #emit(event: ChatEventName, line: number, role: string, kind: string, fields: Obj): void {
    const seq = ++this.#seq;
    const data: Obj = { session_id: this.sessionId, raw_ref: { command_id: this.commandId, line }, role, kind, ...fields };
    this.#out.push({ id: chatEventId(this.sessionId, seq), seq, event, data });
    if (event === 'done' || event === 'error') this.#terminated = true;
  }

  #error(code: string, message: string, line: number): void {
    this.#emit('error', line, 'system', 'error', { error: message, code });
  }

  #raw(line: Line): void {
    this.#emit('raw', line.line, 'system', 'raw', line.truncated ? { content: line.text, truncated: true } : { content: line.text });
  }

  #project(line: Line): void {
    if (this.#terminated) return;
    if (line.truncated) return this.#raw(line);
    const text = line.text.charCodeAt(0) === 0xfeff ? line.text.slice(1) : line.text;
    if (text.trim() === '') return;
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return this.#raw(line);
    }
    if (!isObj(msg)) return this.#raw(line);
    const message = isObj(msg.message) ? msg.message : undefined;
    if (typeof msg.model === 'string') this.#model = msg.model;
    else if (typeof message?.model === 'string') this.#model = message.model;
    const parent = typeof msg.parent_tool_use_id === 'string' ? { parent_tool_id: msg.parent_tool_use_id } : {};
    switch (msg.type) {
      case 'system': {
        const status = typeof msg.subtype === 'string' && msg.subtype !== '' ? msg.subtype : 'system';
        const fields: Obj = { status, content: `session ${status}` };
        if (typeof msg.model === 'string') fields.model = msg.model;
        return this.#emit('status', line.line, 'system', 'status', fields);
      }
      case 'assistant': {
        const content = message?.content;
        if (typeof content === 'string') {
          if (content !== '') this.#emit('delta', line.line, 'assistant', 'message', { content, ...parent });
          return;
        }
        if (!Array.isArray(content)) return this.#raw(line);
        for (const block of content) {
          if (!isObj(block)) continue;
          if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') {
            this.#emit('delta', line.line, 'assistant', 'message', { content: block.text, ...parent });
          } else if (block.type === 'tool_use') {
            this.#emit('tool_call', line.line, 'assistant', 'tool_call', {
              tool_id: typeof block.id === 'string' ? block.id : null,
              name: typeof block.name === 'string' ? block.name : 'unknown',
              input: block.input ?? {},
              ...parent,
            });
          }
        }
        return;
      }
      case 'user': {
        const content = message?.content;
        if (typeof content === 'string') return;
        if (!Array.isArray(content)) return this.#raw(line);
        for (const block of content) {
          if (!isObj(block) || block.type !== 'tool_result') continue;
          this.#emit('tool_result', line.line, 'tool', 'tool_result', {
            tool_id: typeof block.tool_use_id === 'string' ? block.tool_use_id : null,
            status: block.is_error === true ? 'error' : 'ok',
            content: resultText(block.content),
            ...parent,
          });
        }
        return;
      }
      case 'result':
        return this.#done(msg, line.line);
      default:
        return this.#raw(line);
    }
  }

  #done(msg: Obj, line: number): void {
    const failed = msg.is_error === true || (typeof msg.subtype === 'string' && msg.subtype !== 'success');
    const fields: Obj = { finish_reason: failed ? 'error' : 'stop', model: this.#model, usage: isObj(msg.usage) ? msg.usage : null };
    if (typeof msg.subtype === 'string') fields.subtype = msg.subtype;
    for (const key of ['total_cost_usd', 'duration_ms', 'num_turns'] as const) {
      if (typeof msg[key] === 'number') fields[key] = msg[key];
    }
    if (typeof msg.result === 'string') fields.content = msg.result;
    this.#emit('done', line, 'status', 'usage', fields);
  }
}

/** A tool_result's content as text: a string as is, text blocks joined by newlines, images as `[image]`. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === undefined || content === null) return '';
  if (!Array.isArray(content)) return JSON.stringify(content);
  const parts: string[] = [];
  for (const block of content) {
    if (typeof block === 'string') parts.push(block);
    else if (isObj(block) && block.type === 'text' && typeof block.text === 'string') parts.push(block.text);
    else if (isObj(block) && block.type === 'image') parts.push('[image]');
  }
  return parts.join('\n');
}
