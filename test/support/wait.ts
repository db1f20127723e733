/**
 * The one way a test waits: for a condition (polled, or re-checked at once when `wake` reports a
 * change) or for an event, until a named deadline. A timeout says what was awaited and the last
 * state seen — the frames or screen received, the server log tail — so one CI log is enough to
 * start on the cause:
 *
 *   timed out after 30000 ms waiting for output matching /hello-42/; last state: "…$ "
 *
 *   await waitFor('the agent to be Ready', async () => (await agentOf(id))?.status === 'Ready', {
 *     deadlineMs: DEADLINE_MS.agent,
 *     lastState: async () => JSON.stringify(await agentOf(id)),
 *   });
 *
 * Deadlines are generous (2-core machines shared with other work, where a step that takes 50 ms
 * alone can take seconds); a passing test never waits for them, so a larger one costs nothing.
 * A fixed sleep is allowed only when the pause is the behaviour under test ("nothing arrives
 * within 300 ms", backpressure); it then says so in a comment.
 */
import type { EventEmitter } from 'node:events';

/** Named deadlines (ms): pick by what the wait involves, not by how long it takes when idle. */
export const DEADLINE_MS = {
  /** In-process work: a callback, a frame from a server in this process, a state change. */
  local: 15_000,
  /** Child processes: a shell, tmux, a command on an agent, a CLI run. */
  process: 30_000,
  /** An agent process starting and connecting, a VM created with its agent Ready. */
  agent: 90_000,
  /** A task through its states, a browser view showing what a server produced. */
  endToEnd: 120_000,
} as const;

export interface WaitOptions {
  /** Give up after this long (ms); see {@link DEADLINE_MS}. */
  readonly deadlineMs: number;
  /** Re-check at least this often (ms). Default 25. */
  readonly intervalMs?: number;
  /** The last state seen, for the timeout message: frames, the screen, a log tail. */
  readonly lastState?: () => string | Promise<string>;
  /**
   * Subscribes `recheck` to whatever changes the condition (a frame arrived, output was
   * written) and returns the unsubscribe function: the condition is then checked at once
   * instead of at the next poll.
   */
  readonly wake?: (recheck: () => void) => () => void;
}

/** A condition's answer: anything but undefined, null and false is "done" and is returned. */
export type Check<T> = () => T | undefined | null | false | Promise<T | undefined | null | false>;

/** The tail of a long text for a message (the last `chars` characters, JSON-quoted). */
export function tail(text: string, chars = 600): string {
  return JSON.stringify(text.length > chars ? `…${text.slice(-chars)}` : text);
}

/**
 * Resolves with the first value of `check` that is not undefined, null or false. A check that
 * throws counts as "not yet" (its last error is in the timeout message). Rejects after
 * `deadlineMs` with `timed out after N ms waiting for <what>; last state: <lastState()>`.
 */
export async function waitFor<T>(what: string, check: Check<T>, opts: WaitOptions): Promise<T> {
  const startedMs = Date.now();
  const intervalMs = opts.intervalMs ?? 25;
  let lastError: unknown;
  let woken: (() => void) | undefined;
  let dirty: boolean;
  const unsubscribe = opts.wake?.(() => {
    dirty = true;
    woken?.();
  });
  try {
    for (;;) {
      dirty = false;
      try {
        const v = await check();
        if (v !== undefined && v !== null && v !== false) return v;
      } catch (err) {
        lastError = err;
      }
      const leftMs = startedMs + opts.deadlineMs - Date.now();
      if (leftMs <= 0) break;
      if (dirty) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(intervalMs, leftMs));
        function done(): void {
          clearTimeout(timer);
          woken = undefined;
          resolve();
        }
        woken = done;
      });
    }
  } finally {
    unsubscribe?.();
  }
  throw new Error(await timeoutMessage(what, opts.deadlineMs, opts.lastState, lastError));
}

/**
 * Resolves with the arguments of the first `event` of `emitter` that `filter` accepts (default:
 * any); rejects after `deadlineMs` like {@link waitFor}, and at once when the emitter emits
 * 'error' while waiting for something else.
 */
export function waitForEvent(
  emitter: Pick<EventEmitter, 'on' | 'off'>,
  event: string,
  what: string,
  opts: Omit<WaitOptions, 'wake' | 'intervalMs'> & { filter?: (...args: unknown[]) => boolean },
): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const onEvent = (...args: unknown[]): void => {
      if (opts.filter !== undefined && !opts.filter(...args)) return;
      finish();
      resolve(args);
    };
    const onError = (err: unknown): void => {
      finish();
      reject(err instanceof Error ? err : new Error(describe(err)));
    };
    const timer = setTimeout(() => {
      finish();
      void timeoutMessage(what, opts.deadlineMs, opts.lastState, undefined).then((m) => reject(new Error(m)));
    }, opts.deadlineMs);
    function finish(): void {
      clearTimeout(timer);
      emitter.off(event, onEvent);
      if (event !== 'error') emitter.off('error', onError);
    }
    emitter.on(event, onEvent);
    if (event !== 'error') emitter.on('error', onError);
  });
}

/**
 * Resolves with `promise`'s value once it settles (a process exited, a socket closed), or
 * rejects after `deadlineMs` like {@link waitFor}; a rejection of `promise` passes through.
 */
export async function settled<T>(what: string, promise: Promise<T>, opts: Omit<WaitOptions, 'wake' | 'intervalMs'>): Promise<T> {
  let outcome: { value: T } | { error: unknown } | undefined;
  let recheck: (() => void) | undefined;
  promise.then(
    (value) => {
      outcome = { value };
      recheck?.();
    },
    (error: unknown) => {
      outcome = { error };
      recheck?.();
    },
  );
  const done = await waitFor(what, () => outcome, { ...opts, intervalMs: 1000, wake: (r) => ((recheck = r), () => (recheck = undefined)) });
  if ('error' in done) throw done.error;
  return done.value;
}

/**
 * For a waiter another library provides (Playwright's `locator.waitFor`, which watches the page
 * itself): runs `wait(deadlineMs)`, and turns its timeout (an error named TimeoutError) into this
 * module's message with the last state. Other errors pass through unchanged.
 */
export async function waitWithin<T>(
  what: string,
  wait: (deadlineMs: number) => Promise<T>,
  opts: Omit<WaitOptions, 'wake' | 'intervalMs'>,
): Promise<T> {
  try {
    return await wait(opts.deadlineMs);
  } catch (err) {
    if (!(err instanceof Error && err.name === 'TimeoutError')) throw err;
    throw new Error(await timeoutMessage(what, opts.deadlineMs, opts.lastState, undefined), { cause: err });
  }
}

async function timeoutMessage(what: string, deadlineMs: number, lastState: WaitOptions['lastState'], lastError: unknown): Promise<string> {
  let state = '';
  if (lastState !== undefined) {
    try {
      state = `; last state: ${await lastState()}`;
    } catch (err) {
      state = `; last state unavailable (${describe(err)})`;
    }
  }
  const error = lastError === undefined ? '' : `; last error: ${describe(lastError)}`;
  return `timed out after ${deadlineMs} ms waiting for ${what}${state}${error}`;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : typeof err === 'string' ? err : JSON.stringify(err);
}
