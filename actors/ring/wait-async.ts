/**
 * Non-blocking waits on a shared Int32 slot, for the SAB ring. Atomics.waitAsync never blocks the
 * thread, but a pending waitAsync does not keep a Node thread alive either: a worker whose only
 * pending work is "wait for the ring" would silently exit mid-stream. So while any wait is
 * pending, one shared interval timer is ref'd (toggling ref/unref costs no allocation); when no
 * wait is pending it is unref'd and the ring holds nothing open.
 */

/** Atomics.waitAsync (ES2024; in Node 20, missing from the ES2023 lib this project compiles against). */
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (
  Atomics as unknown as { waitAsync(ta: Int32Array, index: number, value: number, timeoutMs: number): WaitAsyncResult }
).waitAsync.bind(Atomics);

/**
 * Longest single wait (ms). Callers loop and look again after every wake-up, so a wait that ends
 * without a notify costs one look. It bounds what a notify that never arrives can cost: once in
 * CI a worker call stalled for good (a burst whose last frames never left the worker, the test in
 * actor-system.test.ts), as if a notify were lost between the two threads. One such loss was
 * found and closed since (a flag lowered between a waiter's raise and its registration, layout.ts
 * "Waking"); this bound stays as the backstop. An idle ring wakes its waiter 10 times a second
 * for nothing; a lost notify delays its side by at most this much, never forever.
 */
export const kWaitSliceMs = 100;

let keepAliveTimer: NodeJS.Timeout | undefined;
let pendingWaits = 0;

function acquireKeepAlive(): void {
  if (pendingWaits++ === 0) {
    keepAliveTimer ??= setInterval(() => undefined, 2 ** 30);
    keepAliveTimer.ref();
  }
}

function releaseKeepAlive(): void {
  if (--pendingWaits === 0) keepAliveTimer?.unref();
}

/**
 * Resolves when `ctrl[index]` is notified or no longer holds `expected` (at once if it already
 * differs), after at most kWaitSliceMs, or when `signal` aborts (it then notifies the slot itself
 * to release the waiter; the caller re-checks `signal.aborted`). `recheck` runs right after the
 * waiter is registered: when it returns true the waiter is released at once — it closes the
 * window between the caller's last look at other slots (kClosed) and the registration. Spurious
 * wake-ups are possible; callers loop.
 */
export async function waitForChange(
  ctrl: Int32Array,
  index: number,
  expected: number,
  signal: AbortSignal | undefined,
  recheck: () => boolean,
): Promise<void> {
  const result = waitAsync(ctrl, index, expected, kWaitSliceMs);
  if (!result.async) return;
  const wake = (): void => {
    Atomics.notify(ctrl, index);
  };
  signal?.addEventListener('abort', wake, { once: true });
  acquireKeepAlive();
  try {
    // Notifying our own slot wakes only waiters of this side (the other side waits on the other
    // counter), and they all loop and re-check, so a self-notify is harmless.
    if (recheck() || signal?.aborted === true) wake();
    await result.value;
  } finally {
    releaseKeepAlive();
    signal?.removeEventListener('abort', wake);
  }
}
