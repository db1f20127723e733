/**
 * Pending human-in-the-loop requests (spec 4.16): sessions whose PTY waits for a person
 * (hitl-detector.ts decides what a prompt is).
 *
 * - Output of every session is fed in ({@link HitlService.output}); once a session's output has
 *   been quiet for `settleMs` (default 500 ms: a prompt waits, streaming text does not) its tail
 *   is evaluated. A prompt at the cursor → one pending request for the session (a later, different
 *   prompt replaces it; the same prompt keeps its id); no prompt → the request is withdrawn.
 * - Respond: `response` + CR (the Enter key; the terminal's ICRNL makes it a newline for
 *   line-mode readers, and raw-mode readers get the key they expect) is written to the session's
 *   PTY through the injected `writeInput`, bypassing the controller lease (the operator API acts
 *   with server authority), and the request resolves. The session's tail is cleared so only what
 *   follows the answer can raise a new request.
 * - At most one request per session; requests end with the session.
 *
 * GET /api/v1/hitl shape: {requests: [{id, session_id, agent_id, command_id, kind (sudo |
 * password | confirm | press_enter), prompt, created_at (RFC 3339)}]}, oldest first.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SvcError } from '../core/errors.js';
import type { HitlRequest } from '../wire/sessions.js';
import { detectPrompt, OutputTail } from './hitl-detector.js';

export const DEFAULT_HITL_SETTLE_MS = 500;
/** Largest response (characters). */
export const kMaxHitlResponseChars = 4096;

/** A pending request, as GET /api/v1/hitl lists it (src/wire/sessions.ts). */
export type { HitlRequest };

export interface HitlSessionInfo {
  readonly agentId: string;
  readonly commandId: string;
  /** Terminal height, for the cursor model. */
  readonly rows: number;
}

export interface HitlServiceOptions {
  /** Writes bytes to the session's PTY (StdinChunk). May reject (agent away): respond rejects then. */
  readonly writeInput: (sessionId: string, data: Uint8Array) => void | Promise<void>;
  /** Live facts of a session (undefined: gone). */
  readonly sessionInfo: (sessionId: string) => HitlSessionInfo | undefined;
  /** Default {@link DEFAULT_HITL_SETTLE_MS}. */
  readonly settleMs?: number;
  /** A request appeared / was withdrawn or answered (events, metrics). */
  readonly onChange?: (kind: 'opened' | 'withdrawn' | 'resolved', req: HitlRequest) => void;
  readonly now?: () => number;
  readonly newId?: () => string;
}

interface Tracker {
  readonly tail: OutputTail;
  timer: NodeJS.Timeout | undefined;
  /** When the last output arrived (the timer re-arms for the rest of the quiet period). */
  lastOutputMs: number;
  pending: HitlRequest | undefined;
}

export class HitlService {
  readonly #opts: HitlServiceOptions;
  readonly #settleMs: number;
  readonly #now: () => number;
  readonly #newId: () => string;
  readonly #sessions = new Map<string, Tracker>();
  readonly #byId = new Map<string, string>();

  constructor(opts: HitlServiceOptions) {
    this.#opts = opts;
    this.#settleMs = opts.settleMs ?? DEFAULT_HITL_SETTLE_MS;
    this.#now = opts.now ?? Date.now;
    this.#newId = opts.newId ?? (() => `hitl-${randomUUID()}`);
  }

  /** Output of a session (in order). Schedules an evaluation after the quiet period. */
  output(sessionId: string, data: Uint8Array): void {
    let t = this.#sessions.get(sessionId);
    if (t === undefined)
      this.#sessions.set(sessionId, (t = { tail: new OutputTail(), timer: undefined, lastOutputMs: 0, pending: undefined }));
    t.tail.push(data);
    t.lastOutputMs = performance.now();
    // One timer per session, not one per chunk: it re-arms itself until output has been quiet.
    if (t.timer === undefined) this.#arm(sessionId, t, this.#settleMs);
  }

  #arm(sessionId: string, t: Tracker, ms: number): void {
    t.timer = setTimeout(() => {
      t.timer = undefined;
      const quietMs = performance.now() - t.lastOutputMs;
      if (quietMs + 1 < this.#settleMs) this.#arm(sessionId, t, this.#settleMs - quietMs);
      else this.evaluate(sessionId);
    }, ms).unref();
  }

  /** Evaluates a session's tail now (the timer calls this; tests may too). */
  evaluate(sessionId: string): HitlRequest | undefined {
    const t = this.#sessions.get(sessionId);
    if (t === undefined) return undefined;
    const info = this.#opts.sessionInfo(sessionId);
    if (info === undefined) {
      this.sessionClosed(sessionId);
      return undefined;
    }
    const match = detectPrompt(t.tail.text(), info.rows);
    const prev = t.pending;
    if (match === null) {
      if (prev !== undefined) this.#withdraw(t, 'withdrawn');
      return undefined;
    }
    if (prev !== undefined && prev.kind === match.kind && prev.prompt === match.prompt) return prev;
    if (prev !== undefined) this.#withdraw(t, 'withdrawn');
    const req: HitlRequest = {
      id: this.#newId(),
      session_id: sessionId,
      agent_id: info.agentId,
      command_id: info.commandId,
      kind: match.kind,
      prompt: match.prompt,
      created_at: new Date(this.#now()).toISOString(),
    };
    t.pending = req;
    this.#byId.set(req.id, sessionId);
    this.#opts.onChange?.('opened', req);
    return req;
  }

  /** Pending requests, oldest first. */
  list(): HitlRequest[] {
    const out: HitlRequest[] = [];
    for (const t of this.#sessions.values()) if (t.pending !== undefined) out.push(t.pending);
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  get(id: string): HitlRequest | undefined {
    const sid = this.#byId.get(id);
    return sid === undefined ? undefined : this.#sessions.get(sid)?.pending;
  }

  /**
   * Answers a request: writes `response` + CR to the PTY, then resolves it. Rejects with
   * hitl.not_found (unknown, withdrawn or answered) or with writeInput's error (nothing resolved).
   */
  async respond(id: string, response: string): Promise<void> {
    const sid = this.#byId.get(id);
    const t = sid === undefined ? undefined : this.#sessions.get(sid);
    if (sid === undefined || t?.pending?.id !== id)
      throw new SvcError('hitl.not_found', `no pending request ${JSON.stringify(id.slice(0, 128))}`);
    await this.#opts.writeInput(sid, new TextEncoder().encode(`${response}\r`));
    if (t.pending?.id !== id) return;
    t.tail.clear();
    this.#withdraw(t, 'resolved');
  }

  /** The session ended: its request (if any) goes. */
  sessionClosed(sessionId: string): void {
    const t = this.#sessions.get(sessionId);
    if (t === undefined) return;
    if (t.timer !== undefined) clearTimeout(t.timer);
    if (t.pending !== undefined) this.#withdraw(t, 'withdrawn');
    this.#sessions.delete(sessionId);
  }

  /** Clears every timer. Idempotent. */
  stop(): void {
    for (const t of this.#sessions.values()) {
      if (t.timer !== undefined) clearTimeout(t.timer);
      t.timer = undefined;
    }
  }

  #withdraw(t: Tracker, how: 'withdrawn' | 'resolved'): void {
    const req = t.pending;
    if (req === undefined) return;
    t.pending = undefined;
    this.#byId.delete(req.id);
    this.#opts.onChange?.(how, req);
  }
}

// C0 controls (tab included: a response is one line) and DEL.
// eslint-disable-next-line no-control-regex
const BAD_RESPONSE_CHARS = /[\x00-\x1f\x7f]/;

/** Validates POST /api/v1/hitl/{id}/respond's body: {response: string}. Throws 400. */
export function parseHitlResponse(body: unknown): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new SvcError('request.invalid', 'the body must be a JSON object {response}');
  const o = body as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== 'response');
  if (extra.length > 0)
    throw new SvcError('request.invalid', `unknown field ${JSON.stringify((extra[0] ?? '').slice(0, 64))}; the body is {response}`);
  const r = o['response'];
  if (typeof r !== 'string') throw new SvcError('request.invalid', 'response must be a string');
  if (r.length > kMaxHitlResponseChars)
    throw new SvcError('request.invalid', `response is longer than ${kMaxHitlResponseChars} characters`);
  if (BAD_RESPONSE_CHARS.test(r))
    throw new SvcError('request.invalid', 'response must be one line without control characters (the server adds Enter)');
  return r;
}
