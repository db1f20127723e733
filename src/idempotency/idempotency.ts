/**
 * The one Idempotency-Key mechanism (spec 4.11, limit of part 8), shared by POST
 * /api/v1/agents/{id}/sessions and every mutating request under /api/v2/admin, /api/v2/fleet and
 * /api/v2/startup-profiles (middleware.ts).
 *
 * - The key (header `Idempotency-Key`, 1..255 visible ASCII characters; anything else is 400
 *   request.invalid) is bound within a scope: the v2 routes use the caller's operator identity
 *   (so two operators' keys never meet, and nobody replays another's answer), the v1 sessions
 *   route the agent id.
 * - It is reserved before the handler runs. The binding is (scope, key) → the request's hash
 *   (requestHash: method, path with query, body) and the response the handler gave, for 24 hours
 *   from the original answer, durable (binding-store.ts): a restart in between still replays.
 * - Same key, same request, original answered → exactly its status, headers and body again; the
 *   caller adds `Idempotency-Replayed: true`.
 * - Same key, different request → 409 idempotency.key_conflict (also while the original runs).
 * - Same key, same request, original still running → 409 idempotency.in_progress with
 *   `Retry-After: 1`.
 *
 * What is bound (our decision; the spec says "the original status, headers and body"): every
 * answer the handler produced — any 2xx. A request that failed (the handler threw: a 4xx refusal
 * or a 5xx) releases the key, so retrying after a failure really retries; a refusal repeats
 * itself anyway. A streamed answer (SSE) or one larger than 1 MiB is not bound either (its key is
 * released and counted as `unbound`).
 *
 * A reservation lives in this process only: a request cut short by a crash bound nothing, so its
 * retry runs again (whatever it did before the crash is visible on the resource it names).
 */
import { createHash } from 'node:crypto';
import { SvcError } from '../core/errors.js';
import { canonicalJson } from '../util/canonical-json.js';
import type { BindingStore, BoundResponse } from './binding-store.js';

/** Binding lifetime: 24 hours (spec part 8). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Largest response body bound, bytes (admin answers are a few hundred bytes). */
export const MAX_BOUND_BODY_BYTES = 1024 * 1024;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** How a keyed request ended, for svc_idempotency_requests_total{outcome}. */
export type IdempotencyOutcome = 'bound' | 'replayed' | 'key_conflict' | 'in_progress' | 'released' | 'unbound';

/** The Idempotency-Key header: undefined when absent; 400 when empty, too long or not visible ASCII. */
export function parseIdempotencyKey(headers: Readonly<Record<string, string>>): string | undefined {
  const key = headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (!KEY_PATTERN.test(key)) throw new SvcError('request.invalid', 'Idempotency-Key must be 1 to 255 visible ASCII characters');
  return key;
}

/**
 * SHA-256 (hex) of a request: method, path with query, and body. A JSON body is hashed as
 * canonical JSON (keys sorted, no whitespace: the same document in another key order or layout is
 * the same request); other bodies by their bytes; no body is `{}`, as an empty JSON object.
 */
export function requestHash(method: string, pathWithQuery: string, body: { json: unknown } | { raw: Uint8Array }): string {
  const h = createHash('sha256').update(`${method.toUpperCase()}\n${pathWithQuery}\n`);
  if ('raw' in body) h.update('raw\n').update(body.raw);
  else h.update(canonicalJson(body.json ?? {}));
  return h.digest('hex');
}

export interface IdempotencyOptions {
  readonly store: Pick<BindingStore, 'get' | 'put'>;
  /** Default {@link IDEMPOTENCY_TTL_MS}. */
  readonly ttlMs?: number;
  readonly now?: () => number;
  /** Called once per keyed request with how it ended. */
  readonly onOutcome?: (outcome: IdempotencyOutcome) => void;
}

/** What `run` needs to bind a result and to turn a binding back into one. */
export interface BindingCodec<T> {
  /** The response to bind, or null when this result must not be bound (a stream). */
  toResponse(result: T): BoundResponse | null;
  fromResponse(response: BoundResponse): T;
}

export class Idempotency {
  readonly ttlMs: number;
  readonly #store: IdempotencyOptions['store'];
  readonly #now: () => number;
  readonly #onOutcome: (outcome: IdempotencyOutcome) => void;
  /** Reservations of requests running now: slot → request hash. */
  readonly #running = new Map<string, string>();

  constructor(opts: IdempotencyOptions) {
    this.ttlMs = opts.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.#store = opts.store;
    this.#now = opts.now ?? Date.now;
    this.#onOutcome = opts.onOutcome ?? (() => undefined);
  }

  /** Requests holding a reservation now. */
  get running(): number {
    return this.#running.size;
  }

  /**
   * Runs `fn` under (scope, key), or answers from the binding. Without a key, just runs `fn`.
   * Rejects with idempotency.key_conflict / idempotency.in_progress, or with `fn`'s error.
   */
  async run<T>(
    scope: string,
    key: string | undefined,
    hash: string,
    codec: BindingCodec<T>,
    fn: () => T | Promise<T>,
  ): Promise<{ readonly result: T; readonly replayed: boolean }> {
    if (key === undefined) return { result: await fn(), replayed: false };
    const id = `${scope}\u0000${key}`;
    const runningHash = this.#running.get(id);
    if (runningHash !== undefined) throw this.#refuse(runningHash === hash ? 'in_progress' : 'key_conflict', key);
    const bound = this.#store.get(scope, key, this.#now());
    if (bound !== undefined) {
      if (bound.requestHash !== hash) throw this.#refuse('key_conflict', key);
      this.#onOutcome('replayed');
      return { result: codec.fromResponse(bound.response), replayed: true };
    }
    this.#running.set(id, hash);
    try {
      let result: T;
      try {
        result = await fn();
      } catch (err) {
        this.#onOutcome('released');
        throw err;
      }
      const response = codec.toResponse(result);
      if (response === null || response.status < 200 || response.status > 299 || response.body.byteLength > MAX_BOUND_BODY_BYTES) {
        this.#onOutcome('unbound');
        return { result, replayed: false };
      }
      const nowMs = this.#now();
      this.#store.put({ scope, key, requestHash: hash, response, createdAtMs: nowMs, expiresAtMs: nowMs + this.ttlMs });
      this.#onOutcome('bound');
      return { result, replayed: false };
    } finally {
      this.#running.delete(id);
    }
  }

  #refuse(outcome: 'in_progress' | 'key_conflict', key: string): SvcError {
    this.#onOutcome(outcome);
    if (outcome === 'in_progress') {
      return new SvcError('idempotency.in_progress', 'a request with this Idempotency-Key is still running; retry shortly', {
        retryAfterSeconds: 1,
      });
    }
    return new SvcError('idempotency.key_conflict', `Idempotency-Key ${JSON.stringify(key.slice(0, 64))} was used for a different request`);
  }
}

/** The codec of a JSON answer `{status, json}` (the v1 sessions route): replays the JSON as sent. */
export const JSON_ANSWER_CODEC: BindingCodec<{ status: number; json: unknown }> = {
  toResponse: (r) => ({
    status: r.status,
    headers: {},
    contentType: 'application/json; charset=utf-8',
    body: new TextEncoder().encode(JSON.stringify(r.json)),
  }),
  fromResponse: (res) => ({ status: res.status, json: JSON.parse(new TextDecoder().decode(res.body)) as unknown }),
};
