/**
 * The one guarded transition helper every lifecycle uses (STYLE point 8): a state enum, a table
 * of allowed moves, and `transition(from[], to, cause)` that checks the guard, logs, counts and
 * hands the move to whoever emits the event.
 *
 * Two kinds of refusal, told apart on purpose:
 * - the current state is not in `from`: the caller's guard did not match (a heartbeat that finds
 *   the agent already Stale, say). Normal; counted as `skipped`, not logged.
 * - the current state is in `from` but the table forbids the move: a programming error. Counted
 *   as `rejected` and logged at warn.
 */

/** A logger with pino's `(obj, msg)` shape; the actor logger fits. */
export interface TransitionLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/** Allowed moves: state → the states it may move to. */
export type TransitionTable<S extends string> = Readonly<Record<S, readonly S[]>>;

/** One completed move. */
export interface Transition<S extends string> {
  readonly from: S;
  readonly to: S;
  /** Why (a short snake_case word: `heartbeat`, `stream_ended`, …). */
  readonly cause: string;
  /** When, in Unix ms. */
  readonly atMs: number;
}

export interface StateMachineOptions<S extends string> {
  /** What the machine tracks, for log lines (`agent status`). */
  readonly name: string;
  readonly initial: S;
  readonly table: TransitionTable<S>;
  readonly logger?: TransitionLogger;
  /** Bound into every log line (`{ agent: id }`). */
  readonly logFields?: object;
  /** Called after every completed move (emit the event here). Exceptions propagate. */
  readonly onTransition?: (t: Transition<S>) => void;
  /** Clock, Unix ms. Default Date.now. */
  readonly now?: () => number;
}

/** Counters of a machine (for stats calls and tests). */
export interface TransitionCounts {
  /** Completed moves by `from->to`. */
  readonly moves: ReadonlyMap<string, number>;
  /** Guard did not match (current state not in `from`). */
  readonly skipped: number;
  /** Guard matched but the table forbids the move (logged). */
  readonly rejected: number;
}

export class StateMachine<S extends string> {
  readonly #opts: StateMachineOptions<S>;
  readonly #moves = new Map<string, number>();
  #state: S;
  #skipped = 0;
  #rejected = 0;

  constructor(opts: StateMachineOptions<S>) {
    this.#opts = opts;
    this.#state = opts.initial;
  }

  get state(): S {
    return this.#state;
  }

  /** True when the table allows moving from the current state to `to`. */
  canMoveTo(to: S): boolean {
    return this.#opts.table[this.#state].includes(to);
  }

  /**
   * Moves to `to` when the current state is one of `from`, differs from `to`, and the table
   * allows it. Returns whether the state changed. See the file comment for the refusals.
   * `fields` are added to this move's log line (a task's state message, say).
   */
  transition(from: readonly S[], to: S, cause: string, fields?: object): boolean {
    const current = this.#state;
    if (current === to) return false;
    if (!from.includes(current)) {
      this.#skipped++;
      return false;
    }
    if (!this.canMoveTo(to)) {
      this.#rejected++;
      this.#opts.logger?.warn(
        { ...this.#opts.logFields, ...fields, machine: this.#opts.name, from: current, to, cause },
        `${this.#opts.name}: transition not allowed`,
      );
      return false;
    }
    this.#state = to;
    const key = `${current}->${to}`;
    this.#moves.set(key, (this.#moves.get(key) ?? 0) + 1);
    this.#opts.logger?.info(
      { ...this.#opts.logFields, ...fields, machine: this.#opts.name, from: current, to, cause },
      `${this.#opts.name}: ${current} -> ${to}`,
    );
    this.#opts.onTransition?.({ from: current, to, cause, atMs: (this.#opts.now ?? Date.now)() });
    return true;
  }

  counts(): TransitionCounts {
    return { moves: new Map(this.#moves), skipped: this.#skipped, rejected: this.#rejected };
  }
}

/**
 * The table as Markdown (one row per state, its allowed next states and, when given, the cause
 * of each move), for the README. `causes[from][to]` names what triggers a move.
 */
export function transitionTableMarkdown<S extends string>(
  table: TransitionTable<S>,
  causes: Partial<Record<S, Partial<Record<S, string>>>> = {},
): string {
  const rows: string[] = ['| From | To | Trigger |', '|---|---|---|'];
  for (const from of Object.keys(table) as S[]) {
    for (const to of table[from]) rows.push(`| ${from} | ${to} | ${causes[from]?.[to] ?? ''} |`);
  }
  return rows.join('\n');
}
