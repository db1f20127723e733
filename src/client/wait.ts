/**
 * Polling until something finishes (operations, tasks), tolerant of brief outages: a retryable
 * failure (network, 5xx) is retried with backoff up to `maxConsecutiveErrors` times in a row;
 * any other failure rejects at once.
 */
import { ApiError } from './api-error.js';
import { abortError } from './http-transport.js';
import { backoffDelayMs } from './sse-stream.js';

export interface PollOptions<T> {
  signal?: AbortSignal;
  /** Interval between polls, ms. Default 500. */
  pollMs?: number;
  /** Give up (ApiError `timeout`) after this long, ms. Default none. */
  timeoutMs?: number;
  /** Consecutive retryable failures tolerated. Default 10. */
  maxConsecutiveErrors?: number;
  /** Every poll whose result differs (by JSON) from the previous one, including the first. */
  onUpdate?: (value: T) => void;
  /** A retryable failure that will be retried. */
  onRetry?: (err: ApiError, attempt: number) => void;
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortError());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Calls `get` until `done(value)`; resolves with that value. Rejects with AbortError on abort. */
export async function pollUntil<T>(
  get: (signal: AbortSignal | undefined) => Promise<T>,
  done: (value: T) => boolean,
  opts: PollOptions<T> = {},
): Promise<T> {
  const pollMs = opts.pollMs ?? 500;
  const maxErrors = opts.maxConsecutiveErrors ?? 10;
  const deadline = opts.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + opts.timeoutMs;
  let last: string | undefined;
  let errors = 0;
  for (;;) {
    let value: T;
    try {
      value = await get(opts.signal);
      errors = 0;
    } catch (err) {
      if (!(err instanceof ApiError) || !err.retryable || ++errors > maxErrors) throw err;
      opts.onRetry?.(err, errors);
      await delay(backoffDelayMs(errors, pollMs, 10_000), opts.signal);
      continue;
    }
    const text = JSON.stringify(value);
    if (text !== last) {
      last = text;
      opts.onUpdate?.(value);
    }
    if (done(value)) return value;
    if (Date.now() >= deadline) throw new ApiError(0, 'timeout', `still not finished after ${opts.timeoutMs ?? 0} ms`);
    await delay(pollMs, opts.signal);
  }
}
