/**
 * Bounded waiting: every stop() and blocking call in sandboxd finishes within a deadline.
 */

/** Resolves with the promise's value, or rejects with a TimeoutError after `timeoutMs`. */
export function withDeadline<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/** A promise that resolves after `ms` (unref'd, so it never keeps the process alive). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    t.unref();
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
