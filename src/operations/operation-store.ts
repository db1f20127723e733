/**
 * The main thread's record of operations (spec 4.4): what GET /api/v1/operations/{id} and
 * GET /api/v2/admin/operations/{id} read. Operations are driven elsewhere — by VM queue actors
 * (their kFrameVmJob frames land here) or by main-thread code through OperationTracker — and every
 * change arrives as a snapshot with a growing `seq`; an older snapshot than the one held is
 * ignored, so frames and call results that cross threads in any order cannot move an operation
 * backwards.
 *
 * Durability (with an OperationDb; without one, e.g. in unit tests, it is memory only):
 * - a snapshot that creates an operation or changes its status is written before upsert()
 *   returns (one small SQLite transaction, synchronous=FULL): a 202 that names an operation, and
 *   every completed or failed status anyone read, is on disk;
 * - a change of progress only is coalesced: the latest snapshot of each such operation is written
 *   at most `progressFlushMs` later (default 1 s), with the next status change, or at close(),
 *   whichever comes first — so a tight loop of progress ticks costs one write per interval;
 * - at construction the file is read: finished operations past the retention are deleted; the
 *   others are loaded as they were, and an operation still pending or running there (the previous
 *   sandboxd stopped or died while it ran; nothing resumes it) is loaded as **failed** with
 *   error_code `server.restarted`, its progress kept, completed_at = this start, `seq` + 1.
 *   `seq` is kept across restarts, so the monotonic rule holds for a loaded operation too.
 *
 * Retention: a finished operation (completed or failed) is kept for `retentionMs` after it
 * finished (default 1 hour), then purged — from memory and the file — by a sweep every
 * `sweepIntervalMs` (default 1 minute); after that its id is 404. Beyond `maxOperations` (default
 * 10 000) the oldest finished ones go first. Unfinished operations are never purged (each VM
 * queue holds at most a few).
 */
import type { Logger } from 'pino';
import { SvcError, type WireError } from '../core/errors.js';
import { isTerminal, operationJson, type OperationJson, type OperationSnapshot } from '../core/operation-state.js';
import { errorMessage } from '../util/error-message.js';
import type { OperationDb } from './operation-db.js';

/** The error of an operation that was pending or running when the previous sandboxd ended. */
export const RESTARTED_ERROR: WireError = {
  code: 'server.restarted',
  message: 'sandboxd restarted while this operation was running; its outcome is unknown — check the target',
};

export interface OperationStoreOptions {
  /** How long a finished operation stays readable, ms. Default 3 600 000 (1 hour). */
  retentionMs?: number;
  /** Most operations kept, finished ones evicted oldest first. Default 10 000. */
  maxOperations?: number;
  /** Interval of the purge sweep, ms. Default 60 000. */
  sweepIntervalMs?: number;
  /** The file operations are kept in; none: memory only. The store closes it in close(). */
  db?: OperationDb;
  /** Longest a progress-only change waits to be written, ms. Default 1000. */
  progressFlushMs?: number;
  /** Where a failed write and the operations failed at load are reported. */
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
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
  readonly #progressFlushMs: number;
  readonly #logger: OperationStoreOptions['logger'];
  /** Null when memory only, or once closed. */
  #db: OperationDb | null;
  /** Operations whose latest snapshot (a progress change) is not written yet. */
  readonly #dirty = new Set<string>();
  #flushTimer: NodeJS.Timeout | null = null;
  #writeFailures = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(opts: OperationStoreOptions = {}) {
    this.#retentionMs = opts.retentionMs ?? DEFAULT_OPERATION_RETENTION_MS;
    this.#maxOperations = opts.maxOperations ?? 10_000;
    this.#sweepIntervalMs = opts.sweepIntervalMs ?? 60_000;
    this.#progressFlushMs = opts.progressFlushMs ?? 1000;
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#db = opts.db ?? null;
    if (this.#db !== null) this.#load(this.#db);
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

  /**
   * Stops the sweep, writes the pending progress changes and closes the file. Idempotent; the
   * records stay readable and later changes are kept in memory only.
   */
  close(): void {
    this.stop();
    this.flush();
    this.#db?.close();
    this.#db = null;
  }

  get size(): number {
    return this.#ops.size;
  }

  /** Writes that failed since start (the log says why); the operation stays in memory. */
  get writeFailures(): number {
    return this.#writeFailures;
  }

  /** Writes the progress changes not written yet (at once; normally a timer does it). */
  flush(): void {
    if (this.#flushTimer !== null) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
    if (this.#dirty.size === 0) return;
    const list: OperationSnapshot[] = [];
    for (const id of this.#dirty) {
      const s = this.#ops.get(id);
      if (s !== undefined) list.push(s);
    }
    this.#dirty.clear();
    this.#write(list);
  }

  /** Records a snapshot unless an equal or newer one is held. Returns whether it was taken. */
  upsert(s: OperationSnapshot): boolean {
    const held = this.#ops.get(s.id);
    if (held !== undefined && (held.seq >= s.seq || isTerminal(held.status))) return false;
    if (held === undefined && this.#ops.size >= this.#maxOperations) this.#evictOldestFinished();
    this.#ops.set(s.id, s);
    this.#persist(s, held);
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

  /** Drops finished operations older than the retention, from memory and the file. Returns how many went from memory. */
  purge(): number {
    const cutoff = this.#now() - this.#retentionMs;
    let n = 0;
    for (const [id, s] of this.#ops) {
      if (s.completedAtMs !== null && s.completedAtMs <= cutoff) {
        this.#ops.delete(id);
        this.#dirty.delete(id);
        n++;
      }
    }
    this.#guard('purge', (db) => db.purgeFinishedBefore(cutoff));
    return n;
  }

  /** Drops the finished operation that finished first; false when none is finished. */
  #evictOldestFinished(): boolean {
    let oldest: OperationSnapshot | undefined;
    for (const s of this.#ops.values()) {
      if (s.completedAtMs !== null && (oldest === undefined || s.completedAtMs < (oldest.completedAtMs ?? 0))) oldest = s;
    }
    if (oldest === undefined) return false;
    const id = oldest.id;
    this.#ops.delete(id);
    this.#dirty.delete(id);
    this.#guard('evict', (db) => db.delete([id]));
    return true;
  }

  /** Creation and status changes are written now; progress-only changes within progressFlushMs. */
  #persist(s: OperationSnapshot, held: OperationSnapshot | undefined): void {
    if (this.#db === null) return;
    if (held !== undefined && held.status === s.status) {
      this.#dirty.add(s.id);
      if (this.#flushTimer === null) {
        this.#flushTimer = setTimeout(() => this.flush(), this.#progressFlushMs);
        this.#flushTimer.unref();
      }
      return;
    }
    this.#dirty.delete(s.id);
    this.#write([s]);
  }

  #write(list: readonly OperationSnapshot[]): void {
    this.#guard('write', (db) => db.put(list), list.length === 1 ? list[0]?.id : undefined);
  }

  /** Runs a file step; a failure is logged and counted, never thrown (frame handlers call upsert). */
  #guard(what: string, step: (db: OperationDb) => unknown, operation?: string): void {
    if (this.#db === null) return;
    try {
      step(this.#db);
    } catch (err) {
      this.#writeFailures++;
      this.#logger?.error(
        { what, operation, err: errorMessage(err) },
        'the operations file could not be changed; the operation is kept in memory only',
      );
    }
  }

  /** Reads the file (see the file comment): purge, load, fail what the previous process left running. */
  #load(db: OperationDb): void {
    const now = this.#now();
    db.purgeFinishedBefore(now - this.#retentionMs);
    const restarted: OperationSnapshot[] = [];
    for (const s of db.loadAll()) {
      if (isTerminal(s.status)) {
        this.#ops.set(s.id, s);
        continue;
      }
      const failed: OperationSnapshot = {
        ...s,
        status: 'failed',
        completedAtMs: now,
        result: null,
        error: RESTARTED_ERROR,
        seq: s.seq + 1,
      };
      this.#ops.set(s.id, failed);
      restarted.push(failed);
    }
    db.put(restarted);
    while (this.#ops.size > this.#maxOperations && this.#evictOldestFinished());
    if (restarted.length > 0) {
      this.#logger?.warn(
        { operations: restarted.map((r) => ({ id: r.id, type: r.type, target: r.target })) },
        'operations left pending or running by the previous sandboxd are failed (server.restarted)',
      );
    }
    this.#logger?.info({ operations: this.#ops.size, restarted: restarted.length, file: db.path }, 'operations loaded');
  }
}
