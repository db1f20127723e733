/**
 * The main thread's record of operations (spec 4.4): what GET /api/v1/operations/{id} reads.
 * Operations are driven elsewhere — by VM queue actors (their kFrameVmJob frames land here) or
 * by main-thread code through OperationTracker — and every change arrives as a snapshot with a
 * growing `seq`; an older snapshot than the one held is ignored, so frames and call results
 * that cross threads in any order cannot move an operation backwards.
 *
 * Retention (in memory, like every v1 resource): a finished operation (completed or failed) is
 * kept for `retentionMs` after it finished (default 1 hour), then purged by a sweep every
 * `sweepIntervalMs` (default 1 minute); after that its id is 404 OPERATION_NOT_FOUND. Beyond
 * `maxOperations` (default 10 000) the oldest finished ones go first. Unfinished operations are
 * never purged (each VM queue holds at most a few).
 */
import { SvcError } from '../core/errors.js';
import { isTerminal, operationJson, type OperationJson, type OperationSnapshot } from '../core/operation-state.js';

export interface OperationStoreOptions {
  /** How long a finished operation stays readable, ms. Default 3 600 000 (1 hour). */
  retentionMs?: number;
  /** Most operations kept, finished ones evicted oldest first. Default 10 000. */
  maxOperations?: number;
  /** Interval of the purge sweep, ms. Default 60 000. */
  sweepIntervalMs?: number;
  now?: () => number;
}

export type OperationListener = (s: OperationSnapshot) => void;

export const DEFAULT_OPERATION_RETENTION_MS = 3_600_000;

export class OperationStore {
  readonly #ops = new Map<string, OperationSnapshot>();
  readonly #listeners = new Set<OperationListener>();
  readonly #waiters = new Map<string, Set<(s: OperationSnapshot) => void>>();
  readonly #retentionMs: number;
  readonly #maxOperations: number;
  readonly #sweepIntervalMs: number;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | null = null;

  constructor(opts: OperationStoreOptions = {}) {
    this.#retentionMs = opts.retentionMs ?? DEFAULT_OPERATION_RETENTION_MS;
    this.#maxOperations = opts.maxOperations ?? 10_000;
    this.#sweepIntervalMs = opts.sweepIntervalMs ?? 60_000;
    this.#now = opts.now ?? Date.now;
  }

  /** Starts the purge sweep (unref'd). Idempotent. */
  start(): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => this.purge(), this.#sweepIntervalMs);
    this.#timer.unref();
  }

  /** Stops the sweep. Idempotent; the records stay readable. */
  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  get size(): number {
    return this.#ops.size;
  }

  /** Records a snapshot unless an equal or newer one is held. Returns whether it was taken. */
  upsert(s: OperationSnapshot): boolean {
    const held = this.#ops.get(s.id);
    if (held !== undefined && (held.seq >= s.seq || isTerminal(held.status))) return false;
    if (held === undefined && this.#ops.size >= this.#maxOperations) this.#evictOldestFinished();
    this.#ops.set(s.id, s);
    for (const l of this.#listeners) l(s);
    if (isTerminal(s.status)) {
      const waiters = this.#waiters.get(s.id);
      this.#waiters.delete(s.id);
      for (const w of waiters ?? []) w(s);
    }
    return true;
  }

  get(id: string): OperationSnapshot | undefined {
    return this.#ops.get(id);
  }

  /** The spec's JSON of an operation, or undefined. */
  json(id: string): OperationJson | undefined {
    const s = this.#ops.get(id);
    return s === undefined ? undefined : operationJson(s);
  }

  /**
   * Resolves with the operation once it is completed or failed (at once when it already is).
   * Rejects OPERATION_NOT_FOUND for an unknown id, server.timeout after `timeoutMs`, or the
   * signal's reason.
   */
  waitFor(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<OperationSnapshot> {
    const held = this.#ops.get(id);
    if (held === undefined) return Promise.reject(new SvcError('OPERATION_NOT_FOUND', `operation '${id}' not found`));
    if (isTerminal(held.status)) return Promise.resolve(held);
    return new Promise<OperationSnapshot>((resolve, reject) => {
      let set = this.#waiters.get(id);
      if (set === undefined) this.#waiters.set(id, (set = new Set()));
      const cleanup = (): void => {
        set.delete(done);
        if (set.size === 0 && this.#waiters.get(id) === set) this.#waiters.delete(id);
        if (timer !== null) clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      const done = (s: OperationSnapshot): void => {
        cleanup();
        resolve(s);
      };
      const onAbort = (): void => {
        cleanup();
        reject(
          opts.signal?.reason instanceof Error
            ? opts.signal.reason
            : new SvcError('server.timeout', `waiting for operation '${id}' was aborted`),
        );
      };
      const timer =
        opts.timeoutMs === undefined
          ? null
          : setTimeout(() => {
              cleanup();
              reject(new SvcError('server.timeout', `operation '${id}' did not finish within ${opts.timeoutMs} ms`, { operation_id: id }));
            }, opts.timeoutMs);
      timer?.unref();
      set.add(done);
      if (opts.signal?.aborted === true) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Called with every snapshot taken. Returns the unsubscribe function. */
  subscribe(listener: OperationListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Non-terminal operations (e.g. to fail them when their queue actor was lost). */
  unfinished(): OperationSnapshot[] {
    return [...this.#ops.values()].filter((s) => !isTerminal(s.status));
  }

  /** Drops finished operations older than the retention. Returns how many went. */
  purge(): number {
    const cutoff = this.#now() - this.#retentionMs;
    let n = 0;
    for (const [id, s] of this.#ops) {
      if (s.completedAtMs !== null && s.completedAtMs <= cutoff) {
        this.#ops.delete(id);
        n++;
      }
    }
    return n;
  }

  #evictOldestFinished(): void {
    let oldest: OperationSnapshot | undefined;
    for (const s of this.#ops.values()) {
      if (s.completedAtMs !== null && (oldest === undefined || s.completedAtMs < (oldest.completedAtMs ?? 0))) oldest = s;
    }
    if (oldest !== undefined) this.#ops.delete(oldest.id);
  }
}
