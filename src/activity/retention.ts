/**
 * Activity retention (issue 19 part 5): events ingested more than SVC_ACTIVITY_RETENTION_DAYS days
 * ago are deleted, shortly after start and then every interval, without holding up ingest.
 *
 * A pass fixes its cut-off (now − retention) once, then calls store.prune(cutOff, chunkRows) until a
 * call deletes fewer than chunkRows. Each call is one short transaction of its own, and between calls
 * the pass yields: the SQLite store's worker serves the ingests and reads queued meanwhile, and the
 * main thread gets a turn. Passes never overlap (a timer that fires during one waits for the next
 * interval; runOnce() during one joins it). A failed prune ends the pass (logged); the next interval
 * tries again.
 */
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { errorMessage } from '../util/error-message.js';
import type { ActivityStore } from './store.js';

const kDayMs = 86_400_000;

export interface ActivityRetentionOptions {
  readonly store: Pick<ActivityStore, 'prune'>;
  /** SVC_ACTIVITY_RETENTION_DAYS: events ingested longer ago than this are deleted (days, > 0; fractions allowed). */
  readonly retentionDays: number;
  /** Time between the end of one pass and the start of the next, ms. Default 10 minutes. */
  readonly intervalMs?: number;
  /** Time from start() to the first pass, ms. Default 30 s (after start-up's own work). */
  readonly firstRunDelayMs?: number;
  /** Events deleted per prune call (one transaction), 1 or more. Default 2000. */
  readonly chunkRows?: number;
  /** Clock, epoch ms. Default Date.now. */
  readonly now?: () => number;
  /** Where a pass that deleted something (info) and a failed pass (error) are reported. Default: nowhere. */
  readonly logger?: { info(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
}

export interface ActivityRetentionStats {
  /** Passes finished (with or without an error). */
  passes: number;
  /** Events deleted since start. */
  prunedEvents: number;
  /** Passes that ended with an error. */
  failedPasses: number;
  /** When the last pass ended, epoch ms (null before the first). */
  lastPassEndedAtMs: number | null;
}

export const kDefaultRetentionIntervalMs = 10 * 60_000;
export const kDefaultRetentionFirstRunDelayMs = 30_000;
export const kDefaultRetentionChunkRows = 2000;

export class ActivityRetention {
  readonly #store: Pick<ActivityStore, 'prune'>;
  readonly #retentionMs: number;
  readonly #intervalMs: number;
  readonly #firstRunDelayMs: number;
  readonly #chunkRows: number;
  readonly #now: () => number;
  readonly #logger: ActivityRetentionOptions['logger'];
  readonly #stats: ActivityRetentionStats = { passes: 0, prunedEvents: 0, failedPasses: 0, lastPassEndedAtMs: null };
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<number> | undefined;
  #started = false;
  #stopped = false;

  constructor(o: ActivityRetentionOptions) {
    if (!(o.retentionDays > 0) || !Number.isFinite(o.retentionDays))
      throw new RangeError(`retentionDays must be a number of days above 0, got ${o.retentionDays}`);
    const chunkRows = o.chunkRows ?? kDefaultRetentionChunkRows;
    if (!Number.isSafeInteger(chunkRows) || chunkRows < 1)
      throw new RangeError(`chunkRows must be a whole number of at least 1, got ${chunkRows}`);
    this.#store = o.store;
    this.#retentionMs = o.retentionDays * kDayMs;
    this.#intervalMs = o.intervalMs ?? kDefaultRetentionIntervalMs;
    this.#firstRunDelayMs = o.firstRunDelayMs ?? kDefaultRetentionFirstRunDelayMs;
    this.#chunkRows = chunkRows;
    this.#now = o.now ?? Date.now;
    this.#logger = o.logger;
  }

  /** Schedules the first pass (after firstRunDelayMs) and the ones after it. Idempotent; no-op after stop(). */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#schedule(this.#firstRunDelayMs);
  }

  /**
   * Runs a pass now, or joins the one running; resolves to the events it deleted (0 once stopped).
   * Never rejects: a failed prune ends the pass, is logged and counted.
   */
  runOnce(): Promise<number> {
    if (this.#stopped) return Promise.resolve(0);
    this.#pass ??= this.#runPass().finally(() => {
      this.#pass = undefined;
    });
    return this.#pass;
  }

  /** Cancels the timer and waits for a running pass, which ends after its current prune call. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#pass;
  }

  stats(): ActivityRetentionStats {
    return { ...this.#stats };
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.runOnce().then(() => this.#schedule(this.#intervalMs));
    }, delayMs);
    this.#timer.unref();
  }

  async #runPass(): Promise<number> {
    const cutOffMs = this.#now() - this.#retentionMs;
    let pruned = 0;
    try {
      while (!this.#stopped) {
        const n = await this.#store.prune(cutOffMs, this.#chunkRows);
        pruned += n;
        this.#stats.prunedEvents += n;
        if (n < this.#chunkRows) break;
        await yieldTurn();
      }
      if (pruned > 0)
        this.#logger?.info(
          { prunedEvents: pruned, ingestedBefore: new Date(cutOffMs).toISOString() },
          'activity retention deleted events older than the retention period',
        );
    } catch (err) {
      this.#stats.failedPasses++;
      this.#logger?.error(
        { err: errorMessage(err), prunedEvents: pruned },
        'activity retention could not prune the activity store; trying again next interval',
      );
    }
    this.#stats.passes++;
    this.#stats.lastPassEndedAtMs = this.#now();
    return pruned;
  }
}
