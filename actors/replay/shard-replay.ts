/**
 * What the replay state of all agent actors in one thread shares: the settings, the global byte
 * budget (ReplayBudget), the retention queue that releases finished commands, and counters.
 *
 * A module is loaded once per shard worker, so in workers mode this is per shard; in inline mode
 * every shard runs on the main thread and they share one (the budget then bounds the process).
 * The main thread configures it through the `output-shard` actor (output-shard.actor.ts) before
 * any agent connects; before that, the defaults apply.
 */
import { Ticker } from '../runtime/ticker.js';
import type { ReplaySettings, ShardReplayStats } from '../protocol/output-calls.js';
import { ReplayBudget } from './replay-budget.js';

export const DEFAULT_REPLAY_SETTINGS: ReplaySettings = Object.freeze({
  ringBytes: 8 * 1024 * 1024,
  budgetBytes: 256 * 1024 * 1024,
  retentionMs: 5 * 60 * 1000,
  chatBytes: 1024 * 1024,
});

interface Due {
  readonly atMs: number;
  readonly release: () => void;
}

function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`replay ${name} must be a non-negative integer, got ${value}`);
  return value;
}

/** The thread's shared replay state. */
export class ShardReplay {
  #settings: ReplaySettings = DEFAULT_REPLAY_SETTINGS;
  #budget: ReplayBudget | undefined;
  readonly #due: Due[] = [];
  #dueHead = 0;
  readonly #ticker: Ticker;
  readonly #tick = { tick: (nowMs: number): void => this.releaseDue(nowMs) };
  gaps = 0;
  released = 0;
  chatProjections = 0;

  constructor(ticker: Ticker = new Ticker(1000)) {
    this.#ticker = ticker;
  }

  get settings(): ReplaySettings {
    return this.#settings;
  }

  /** The shard budget (created with the settings in force at the first ring). */
  get budget(): ReplayBudget {
    this.#budget ??= new ReplayBudget({ maxBytes: this.#settings.budgetBytes });
    return this.#budget;
  }

  /**
   * New settings. Ring size, retention and chat bytes apply to rings created from now on; the
   * budget can only change while no ring exists (it is the shard's bound, shared by all rings).
   * RangeError for a negative or fractional value.
   */
  configure(s: Partial<ReplaySettings>): void {
    const next: ReplaySettings = {
      ringBytes: positiveInt('ringBytes', s.ringBytes ?? this.#settings.ringBytes),
      budgetBytes: positiveInt('budgetBytes', s.budgetBytes ?? this.#settings.budgetBytes),
      retentionMs: positiveInt('retentionMs', s.retentionMs ?? this.#settings.retentionMs),
      chatBytes: positiveInt('chatBytes', s.chatBytes ?? this.#settings.chatBytes),
    };
    this.#settings = Object.freeze(next);
    if (this.#budget !== undefined && this.#budget.ringCount === 0 && this.#budget.maxBytes !== next.budgetBytes) this.#budget = undefined;
  }

  /** Runs `release` once `retentionMs` have passed (checked about once a second). */
  releaseLater(nowMs: number, release: () => void): void {
    this.#due.push({ atMs: nowMs + this.#settings.retentionMs, release });
    if (this.#due.length - this.#dueHead === 1) this.#ticker.add(this.#tick);
  }

  /** Releases what is due at `nowMs` (the ticker calls this; tests may too). */
  releaseDue(nowMs: number): void {
    const due = this.#due;
    // Retention is one setting for all, so the queue is (nearly) ordered: only the head is checked.
    while (this.#dueHead < due.length && (due[this.#dueHead] as Due).atMs <= nowMs) {
      const d = due[this.#dueHead] as Due;
      due[this.#dueHead++] = undefined as unknown as Due;
      try {
        d.release();
      } catch {
        // A release that throws must not block the ones behind it; the owner logs its own failures.
      }
    }
    if (this.#dueHead === due.length) {
      due.length = 0;
      this.#dueHead = 0;
      this.#ticker.delete(this.#tick);
    } else if (this.#dueHead > 1024 && this.#dueHead * 2 > due.length) {
      due.splice(0, this.#dueHead);
      this.#dueHead = 0;
    }
  }

  stats(): ShardReplayStats {
    const b = this.#budget;
    return {
      ringBytes: b?.usedBytes ?? 0,
      budgetBytes: b?.maxBytes ?? this.#settings.budgetBytes,
      rings: b?.ringCount ?? 0,
      budgetTrims: b?.trimCount ?? 0,
      gaps: this.gaps,
      released: this.released,
      chatProjections: this.chatProjections,
    };
  }
}

/** This thread's replay state. */
export const shardReplay = new ShardReplay();
