/**
 * The hypervisor port as background work (VM operation steps, start-up reaping) uses it: a read
 * (list, get, describe) that fails with HYPERVISOR_UNAVAILABLE is tried again after the error's
 * Retry-After, as long as the next try starts within `withinMs` of the first.
 *
 * Why: a read's budget (SVC_HYPERVISOR_READ_BUDGET_MS) includes its wait for a lane slot, so a
 * burst of operations on a loaded host can push one read past it although the host answers. An
 * API caller gets that 503 with Retry-After at once and decides; an operation has nobody to
 * decide, and failing a VM create over one late read is worse than asking again. An open circuit
 * carries a Retry-After of its cool-down (30 s and up), longer than `withinMs`: the step fails at
 * once, as before. Writes are never retried here: their effect may already have happened.
 */
import { SvcError } from '../core/errors.js';
import { sleep } from '../util/deadline.js';
import type { HypervisorPort } from './port.js';

/** Default window in which a failed read is tried again (ms). */
export const DEFAULT_READ_RETRY_WITHIN_MS = 20_000;

const READS = new Set<PropertyKey>(['list', 'get', 'describe']);

/** Retry-After of a HYPERVISOR_UNAVAILABLE error in ms, or null for any other error. */
function retryAfterMs(err: unknown): number | null {
  if (!(err instanceof SvcError) || err.code !== 'HYPERVISOR_UNAVAILABLE') return null;
  const s = err.details?.['retryAfterSeconds'];
  return typeof s === 'number' && Number.isFinite(s) && s >= 0 ? s * 1000 : 1000;
}

function signalOf(args: readonly unknown[]): AbortSignal | undefined {
  const last = args.at(-1);
  const s = typeof last === 'object' && last !== null ? (last as { signal?: unknown }).signal : undefined;
  return s instanceof AbortSignal ? s : undefined;
}

export function withRetriedReads(hv: HypervisorPort, opts: { withinMs?: number } = {}): HypervisorPort {
  const withinMs = opts.withinMs ?? DEFAULT_READ_RETRY_WITHIN_MS;
  return new Proxy(hv, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (!READS.has(key)) return method.bind(target);
      return async (...args: unknown[]): Promise<unknown> => {
        const until = Date.now() + withinMs;
        for (;;) {
          try {
            return await method.apply(target, args);
          } catch (err) {
            const wait = retryAfterMs(err);
            if (wait === null || Date.now() + wait > until) throw err;
            await sleep(wait, signalOf(args));
          }
        }
      };
    },
  });
}
