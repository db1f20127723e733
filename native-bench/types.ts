/**
 * The scenario contract of the bench suite. A scenario is a module in ./scenarios exporting one
 * BenchScenario, registered in ./scenarios/index.ts; the harness (./harness.ts) runs it under a
 * time bound and prints its one result line (see README.md, "Result line").
 */

/** A value that survives JSON.stringify unchanged. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** What a scenario is judged against; the harness turns it into the line's `target` and `pass`. */
export type BenchTarget =
  | { readonly ratioAtLeast: number }
  /** For latencies against a ceiling latency: value ÷ ceiling must stay at or below it. */
  | { readonly ratioAtMost: number }
  | { readonly valueAtMost: number }
  | { readonly valueAtLeast: number };

/** Passed to BenchScenario.run. */
export interface BenchRunOptions {
  /** Measuring time the scenario should spend, seconds (harness default 5). */
  readonly seconds: number;
  /**
   * Aborted at the hard limit (3 × seconds + 10 s) or on Ctrl-C. The scenario stops its workers
   * and rejects; the harness has already reported it as failed.
   */
  readonly signal: AbortSignal;
}

/** What BenchScenario.run resolves with. */
export interface BenchResult {
  /** The measured figure, in the scenario's unit. */
  readonly value: number;
  /** The same figure for the ceiling measured in the same run, or null when there is none. */
  readonly ceiling: number | null;
  /** Extra fields for the result line (after the contract fields), e.g. records, lost, notes. */
  readonly extra?: Readonly<Record<string, JsonValue>>;
  /** Correctness problems seen while measuring (lost or corrupt records, ...); any fails the line. */
  readonly problems?: readonly string[];
}

/** One benchmark scenario. */
export interface BenchScenario {
  /** kebab-case, unique; what `npm run bench -- NAME` selects. */
  readonly name: string;
  /** One line for `--list` and the README. */
  readonly description: string;
  /** Unit of value and ceiling, e.g. 'MB/s' (10^6 bytes per second), 'ms', 'agents'. */
  readonly unit: string;
  readonly target?: BenchTarget;
  /** Measures; rejects on failure. Must honour `signal` and finish in about `seconds`. */
  run(opts: BenchRunOptions): Promise<BenchResult>;
}

/** The one line a scenario prints. Contract fields first, then the scenario's extras, then `seconds`. */
export interface ResultLine {
  scenario: string;
  /** null when the scenario failed (then `error` says why). */
  value: number | null;
  unit: string;
  ceiling: number | null;
  /** value ÷ ceiling; null without a ceiling or on failure. */
  ratio: number | null;
  /** The target in words, e.g. "ratio >= 0.8"; null when the scenario has none. */
  target: string | null;
  /** Target met and no problems (false on failure). */
  pass: boolean;
  [extra: string]: JsonValue;
}
