/**
 * One libvirt host: its connection, its circuit breaker and its two call lanes.
 *
 * - The connection is opened on demand (by the first call, the poller or a health probe) and
 *   reopened the same way after it breaks. Attempts against a host that keeps failing are spaced
 *   by the breaker: a few tries, then cool-downs of 30 s, 60 s, 120 s ... (±20 % jitter, capped):
 *   that is the reconnect backoff.
 * - Every call has a budget (reads 2 s, writes 30 s by default). A call that misses it is answered
 *   with HYPERVISOR_UNAVAILABLE at once; the native call cannot be cancelled and keeps its lane
 *   slot until libvirt returns (see call-lane.ts), so a hung host pins at most
 *   readConcurrency + writeConcurrency libuv threads.
 * - Reads and writes have separate lanes so a slow domain start never delays list, get or the
 *   health probe.
 * - Timeouts and connection failures count for the breaker; answers (including "domain not
 *   found") reset it. Answers that arrive after their budget count for nothing: a host slower
 *   than its budget must stay open, not flap.
 */
import type { Hypervisor } from '@unraid/libvirt';
import type { Logger } from 'pino';
import { SvcError } from '../../core/errors.js';
import { TimeoutError, withDeadline } from '../../util/deadline.js';
import { CallLane } from '../call-lane.js';
import { CircuitBreaker, type CircuitBreakerOptions } from '../circuit-breaker.js';
import type { CircuitState } from '../port.js';
import { redactUri } from '../uri.js';
import { loadBinding } from './binding.js';
import { classifyFailure, isAvailabilityFailure, shortMessage } from './errors.js';

/** Makes an unopened connection for a URI (tests inject one to redirect or fail connections). */
export type ConnectionFactory = (uri: string) => Hypervisor | Promise<Hypervisor>;

export const defaultConnectionFactory: ConnectionFactory = async (uri) => new (await loadBinding()).Hypervisor({ uri });

export interface HostLinkOptions {
  /** Budget of a read (list, get, health probe), ms. Default 2000. */
  readBudgetMs?: number;
  /** Budget of a write (define, start, shutdown, destroy, undefine), ms. Default 30 000. */
  writeBudgetMs?: number;
  /** Budget of opening the connection, ms. Default: writeBudgetMs (a first qemu connect probes capabilities for ~8 s). */
  connectBudgetMs?: number;
  /** Native reads in flight at once (also the most pool threads a hung host can pin for reads). Default 2. */
  readConcurrency?: number;
  /** Native writes (and connection open/close) in flight at once. Default 2. */
  writeConcurrency?: number;
  breaker?: CircuitBreakerOptions;
  connectionFactory?: ConnectionFactory;
  logger?: Pick<Logger, 'info' | 'warn'>;
}

export type CallKind = 'read' | 'write';

export class HostLink {
  readonly uri: string;
  /** The URI as shown to users (no secrets). */
  readonly label: string;
  readonly readBudgetMs: number;
  readonly writeBudgetMs: number;
  readonly #connectBudgetMs: number;
  readonly #breaker: CircuitBreaker;
  readonly #lanes: Record<CallKind, CallLane>;
  readonly #factory: ConnectionFactory;
  readonly #logger: Pick<Logger, 'info' | 'warn'> | undefined;
  #conn: Hypervisor | null = null;
  #opening: Promise<Hypervisor> | null = null;
  /** The failure of the last shared open, counted once however many calls waited on it. */
  #countedOpenError: unknown = null;
  #closed = false;
  #lastCircuit: CircuitState = 'closed';

  constructor(uri: string, opts: HostLinkOptions = {}) {
    this.uri = uri;
    this.label = redactUri(uri);
    this.readBudgetMs = opts.readBudgetMs ?? 2000;
    this.writeBudgetMs = opts.writeBudgetMs ?? 30_000;
    this.#connectBudgetMs = opts.connectBudgetMs ?? this.writeBudgetMs;
    this.#breaker = new CircuitBreaker(opts.breaker);
    this.#lanes = { read: new CallLane(opts.readConcurrency ?? 2), write: new CallLane(opts.writeConcurrency ?? 2) };
    this.#factory = opts.connectionFactory ?? defaultConnectionFactory;
    this.#logger = opts.logger;
  }

  get circuit(): CircuitState {
    return this.#breaker.state;
  }

  /** Whole seconds until a retry may succeed (at least 1). */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.#breaker.retryAfterMs() / 1000));
  }

  /** True while a connection is open. */
  get connected(): boolean {
    return this.#conn !== null;
  }

  /**
   * Runs `fn` on the open connection within the kind's budget. Rejects with SvcError
   * HYPERVISOR_UNAVAILABLE (circuit open, timeout, broken connection, stopped) or with the
   * binding's own failure for domain-level errors (callers map those with the VM name).
   */
  async call<T>(
    kind: CallKind,
    what: string,
    fn: (conn: Hypervisor) => Promise<T>,
    opts: { signal?: AbortSignal; budgetMs?: number } = {},
  ): Promise<T> {
    if (this.#closed) throw this.#unavailable(`${what}: the hypervisor connection is stopped`);
    const admission = this.#breaker.admit();
    this.#noteCircuit();
    if (!admission.ok) {
      throw this.#unavailable(
        `circuit open after ${this.#breaker.consecutiveFailures} consecutive failures (last: ${this.#breaker.lastError})`,
      );
    }
    const budgetMs = opts.budgetMs ?? (kind === 'read' ? this.readBudgetMs : this.writeBudgetMs);
    const deadlineMs = Date.now() + budgetMs;
    let conn: Hypervisor | null = null;
    try {
      conn = await this.#connection(deadlineMs, what, opts.signal);
      const c = conn;
      const result = await this.#lanes[kind].run(() => fn(c), deadlineMs, `${what} on ${this.label}`, opts.signal);
      this.#breaker.success();
      this.#noteCircuit();
      return result;
    } catch (err) {
      if (opts.signal?.aborted === true && err === opts.signal.reason) {
        if (admission.probe) this.#breaker.releaseProbe();
        throw err;
      }
      const failure = classifyFailure(err);
      if (!isAvailabilityFailure(failure)) {
        this.#breaker.success(); // the host answered; the domain said no
        this.#noteCircuit();
        throw err;
      }
      if (err !== this.#countedOpenError || admission.probe) this.#breaker.failure(shortMessage(err), admission.probe);
      if (failure === 'unavailable' && conn !== null) this.#invalidate(conn);
      this.#noteCircuit();
      throw this.#unavailable(err instanceof TimeoutError ? `${what} took longer than ${budgetMs} ms` : `${what}: ${shortMessage(err)}`);
    }
  }

  /** Closes the connection (waiting at most `deadlineMs`); later calls fail with HYPERVISOR_UNAVAILABLE. Idempotent. */
  async close(timeoutMs = 5000): Promise<void> {
    this.#closed = true;
    const opening = this.#opening;
    if (opening !== null) {
      // An open against a hung host may never settle: wait for it, but only within the deadline.
      await withDeadline(opening, timeoutMs, `open ${this.label}`).catch(() => undefined);
    }
    const conn = this.#conn;
    this.#conn = null;
    if (conn === null) return;
    await this.#lanes.write.run(() => conn.connectClose(), Date.now() + timeoutMs, `close ${this.label}`).catch(() => undefined);
  }

  async #connection(deadlineMs: number, what: string, signal: AbortSignal | undefined): Promise<Hypervisor> {
    if (this.#conn !== null) return this.#conn;
    this.#opening ??= this.#open().finally(() => {
      this.#opening = null;
    });
    const opening = this.#opening;
    const remainingMs = deadlineMs - Date.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`${what}: connecting to ${this.label} took too long`)), Math.max(0, remainingMs));
      timer.unref();
    });
    const aborted =
      signal === undefined
        ? null
        : new Promise<never>((_, reject) => {
            if (signal.aborted) reject(signal.reason as Error);
            signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
          });
    try {
      return await Promise.race(aborted === null ? [opening, timeout] : [opening, timeout, aborted]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #open(): Promise<Hypervisor> {
    let conn: Hypervisor;
    try {
      conn = await this.#factory(this.uri);
      const c = conn;
      await this.#lanes.write.run(() => c.connectOpen(), Date.now() + this.#connectBudgetMs, `connect to ${this.label}`);
    } catch (err) {
      this.#countedOpenError = err;
      this.#breaker.failure(shortMessage(err));
      this.#noteCircuit();
      throw err;
    }
    if (this.#closed) {
      void this.#lanes.write.run(() => conn.connectClose(), Date.now() + 5000, `close ${this.label}`).catch(() => undefined);
      throw new Error('the hypervisor connection was stopped while opening');
    }
    this.#conn = conn;
    this.#logger?.info({ hypervisor: this.label }, 'hypervisor connection open');
    return conn;
  }

  /** Drops a broken connection so the next call reopens it (closing the old one in the background). */
  #invalidate(conn: Hypervisor): void {
    if (this.#conn !== conn) return;
    this.#conn = null;
    this.#logger?.warn({ hypervisor: this.label }, 'hypervisor connection lost; reopening on the next call');
    void this.#lanes.write.run(() => conn.connectClose(), Date.now() + 5000, `close ${this.label}`).catch(() => undefined);
  }

  #unavailable(message: string): SvcError {
    const retryAfterSeconds =
      this.#breaker.state === 'closed' ? Math.max(1, Math.ceil(this.readBudgetMs / 1000)) : this.retryAfterSeconds();
    return new SvcError('HYPERVISOR_UNAVAILABLE', `hypervisor ${this.label} unavailable: ${message}`, {
      host: this.label,
      retryAfterSeconds,
    });
  }

  #noteCircuit(): void {
    const now = this.#breaker.state;
    if (now === this.#lastCircuit) return;
    const before = this.#lastCircuit;
    this.#lastCircuit = now;
    if (now === 'open')
      this.#logger?.warn(
        { hypervisor: this.label, retry_after_s: this.retryAfterSeconds(), last_error: this.#breaker.lastError },
        'hypervisor circuit open',
      );
    else if (now === 'closed' && before !== 'closed') this.#logger?.info({ hypervisor: this.label }, 'hypervisor circuit closed');
  }
}
