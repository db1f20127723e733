/** Small timing helpers for bounded lifecycles. */

/**
 * Waits for `work` for at most `ms`; resolves true when it settled in time (whether it fulfilled
 * or rejected — the caller only wants the bound), false on timeout. Used by stop(): its timer is
 * deliberately ref'd, so a process whose last work is a hung stop handler still reaches the
 * code after `await stop()` when the deadline passes, instead of exiting mid-shutdown.
 */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
