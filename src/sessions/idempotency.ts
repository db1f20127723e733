/**
 * Idempotency-Key for POST /api/v1/agents/{id}/sessions (spec 4.2, rules of 4.11, limit of part 8).
 *
 * - The key (header `Idempotency-Key`, 1..255 visible ASCII characters) is scoped: the sessions
 *   route uses the agent id, so the same key on two agents is two bindings.
 * - The binding is (scope, key) → SHA-256 of the request (method, path, canonical JSON body: keys
 *   sorted, so key order and whitespace do not matter; no body = `{}`), held for 24 hours.
 * - Same key, same request, original succeeded → the stored status and body again; the route adds
 *   `Idempotency-Replayed: true`.
 * - Same key, different request → 409 idempotency.key_conflict (also while the original runs).
 * - Same key, same request, original still running → 409 idempotency.in_progress with
 *   details.retryAfterSeconds 1 (rendered as Retry-After: 1).
 * - A failed original releases the key: only successful responses are bound, so a retry after a
 *   failure really retries.
 *
 * Bound: at most `maxEntries` bindings (default 10,000); the oldest go first, expired ones are
 * swept as new ones arrive. With a store, bindings survive a restart of sandboxd.
 */
import { canonicalJson } from '../util/canonical-json.js';
import { createHash } from 'node:crypto';
import { SvcError } from '../core/errors.js';
import type { SessionStore } from './session-store.js';

/** Binding lifetime: 24 hours (spec part 8). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const DEFAULT_IDEMPOTENCY_MAX_ENTRIES = 10_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** A response worth replaying. */
export interface IdempotentResponse {
  readonly status: number;
  readonly json: unknown;
}

export interface IdempotencyOutcome extends IdempotentResponse {
  /** True when this is a stored response (send Idempotency-Replayed: true). */
  readonly replayed: boolean;
}

export interface IdempotencyCacheOptions {
  /** Default {@link IDEMPOTENCY_TTL_MS}. */
  ttlMs?: number;
  /** Default {@link DEFAULT_IDEMPOTENCY_MAX_ENTRIES}. */
  maxEntries?: number;
  store?: Pick<SessionStore, 'loadIdempotency' | 'putIdempotency' | 'deleteIdempotency'>;
  now?: () => number;
}

interface Binding {
  readonly requestHash: string;
  readonly status: number;
  readonly responseJson: string;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
}

/** The Idempotency-Key header: undefined when absent; 400 when empty, too long or not visible ASCII. */
export function parseIdempotencyKey(headers: Readonly<Record<string, string>>): string | undefined {
  const key = headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (!KEY_PATTERN.test(key)) throw new SvcError('request.invalid', 'Idempotency-Key must be 1 to 255 visible ASCII characters');
  return key;
}

/** JSON with object keys sorted at every level (stable for hashing): src/util/canonical-json.ts. */
export { canonicalJson };

/** SHA-256 (hex) of method, path and canonical body. */
export function requestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method.toUpperCase()}\n${path}\n${canonicalJson(body ?? {})}`)
    .digest('hex');
}

export class IdempotencyCache {
  readonly ttlMs: number;
  readonly maxEntries: number;
  readonly #store: IdempotencyCacheOptions['store'];
  readonly #now: () => number;
  /** Insertion order = creation order (the TTL is constant), so the first entry expires first. */
  readonly #bound = new Map<string, Binding & { scope: string; key: string }>();
  readonly #running = new Map<string, string>();

  constructor(opts: IdempotencyCacheOptions = {}) {
    this.ttlMs = opts.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.maxEntries = opts.maxEntries ?? DEFAULT_IDEMPOTENCY_MAX_ENTRIES;
    this.#store = opts.store;
    this.#now = opts.now ?? Date.now;
    const loaded = this.#store?.loadIdempotency(this.#now()) ?? [];
    for (const e of [...loaded].sort((a, b) => a.createdAtMs - b.createdAtMs)) {
      this.#bound.set(slot(e.scope, e.key), { ...e });
    }
  }

  /** Bindings held (completed responses). */
  get size(): number {
    return this.#bound.size;
  }

  /**
   * Runs `fn` under the key, or answers from the binding. Without a key, just runs `fn`.
   * Rejects with idempotency.key_conflict / idempotency.in_progress, or with `fn`'s error.
   */
  async run(scope: string, key: string | undefined, hash: string, fn: () => Promise<IdempotentResponse>): Promise<IdempotencyOutcome> {
    if (key === undefined) return { ...(await fn()), replayed: false };
    const id = slot(scope, key);
    const nowMs = this.#now();
    this.#sweep(nowMs);
    const bound = this.#bound.get(id);
    if (bound !== undefined) {
      if (bound.requestHash !== hash) throw conflict(key);
      return { status: bound.status, json: JSON.parse(bound.responseJson) as unknown, replayed: true };
    }
    const runningHash = this.#running.get(id);
    if (runningHash !== undefined) {
      if (runningHash !== hash) throw conflict(key);
      throw new SvcError('idempotency.in_progress', 'a request with this Idempotency-Key is still running; retry shortly', {
        retryAfterSeconds: 1,
      });
    }
    this.#running.set(id, hash);
    try {
      const res = await fn();
      const binding = {
        scope,
        key,
        requestHash: hash,
        status: res.status,
        responseJson: JSON.stringify(res.json),
        createdAtMs: nowMs,
        expiresAtMs: nowMs + this.ttlMs,
      };
      this.#bound.set(id, binding);
      this.#store?.putIdempotency(binding);
      this.#evictOverflow();
      return { ...res, replayed: false };
    } finally {
      this.#running.delete(id);
    }
  }

  #sweep(nowMs: number): void {
    for (const [id, b] of this.#bound) {
      if (b.expiresAtMs > nowMs) break;
      this.#bound.delete(id);
      this.#store?.deleteIdempotency(b.scope, b.key);
    }
  }

  #evictOverflow(): void {
    for (const [id, b] of this.#bound) {
      if (this.#bound.size <= this.maxEntries) break;
      this.#bound.delete(id);
      this.#store?.deleteIdempotency(b.scope, b.key);
    }
  }
}

function slot(scope: string, key: string): string {
  return `${scope}\u0000${key}`;
}

function conflict(key: string): SvcError {
  return new SvcError('idempotency.key_conflict', `Idempotency-Key ${JSON.stringify(key.slice(0, 64))} was used for a different request`);
}
