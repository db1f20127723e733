/**
 * The self-collector: sandboxd records what it sees (commands, sessions, tasks' tool calls;
 * self-records.ts maps them) as activity.event/v1 records of collector `sandboxd`, through
 * ActivityService.ingest — the validation and the store every other collector goes through.
 *
 * - Scope: tenant and host are the service's (SVC_TENANT_ID, SVC_HOST_ID); instance is the agent's
 *   VM instance id when the agents registry knows it, else the agent id; agent is the agent id.
 * - Sequences: one per scope, from 1, one more per event. At start the collector reads what the
 *   store already holds for its scopes (coverage: the stores keep the highest accepted sequence even
 *   after retention pruned the rows) and continues after it, so a restart neither conflicts nor
 *   jumps. Events seen before that read succeeds wait unnumbered.
 * - Batching: a flush sends the oldest `batchEvents` (default 100) queued events, one ingest per
 *   scope, when that many are queued or `flushIntervalMs` (default 250) after the first one. One
 *   flush at a time, so a scope's batches reach the store in order.
 * - Store down: the flush is retried with jittered exponential backoff (to `maxRetryDelayMs`). The
 *   queue is bounded (`maxQueuedEvents`, default 10,000): beyond it the oldest event is dropped.
 *   Its sequence number was taken, so the store records the skipped run as a gap when the next
 *   event of that scope arrives — the honest report of what was lost.
 * - A sequence conflict (another writer used this collector's scope) re-reads the scope's last
 *   sequence and renumbers what is queued; any other refusal (4xx) drops that batch with an error
 *   log. A record that fails validation when built is never queued (counted `refused`).
 * - Never on the hot path: it sees v1 events and tool calls (a few per command), never output
 *   chunks; recording is a push onto the queue.
 *
 * svc_activity_self_events_total{result}: `recorded` (acknowledged by the store), `dropped`
 * (queue overflow, or not flushed within stop's deadline), `refused` (invalid when built, or
 * refused by the store).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { SvcError } from '../core/errors.js';
import type { EventOrigin, StoredEvent } from '../events/event-store.js';
import type { TaskToolCall } from '../tasks/orchestrator.js';
import { errorMessage } from '../util/error-message.js';
import { ACTIVITY_SCHEMA_VERSION, type ActivityEvent } from '../wire/activity.js';
import { validateEvent, type ActivityScope } from './record.js';
import { draftOfEvent, draftOfToolCall, scopeId, type SelfDraft } from './self-records.js';
import type { ActivityService } from './service.js';

/** The collector id (X-Svc-Collector-Id, source.collector) of what sandboxd records itself. */
export const SELF_COLLECTOR_ID = 'sandboxd';

export interface SelfCollectorOptions {
  readonly service: Pick<ActivityService, 'ingest' | 'store' | 'tenantId' | 'hostId' | 'readScope'>;
  readonly logger: Logger;
  /** The VM instance id of an agent, when known (the agents registry). */
  readonly instanceOf?: (agentId: string) => string | undefined;
  /** Events per flush. Default 100. */
  readonly batchEvents?: number;
  /** Longest wait before a queued event is flushed (ms). Default 250. */
  readonly flushIntervalMs?: number;
  /** Events queued at most; the oldest goes beyond. Default 10,000. */
  readonly maxQueuedEvents?: number;
  /** Longest backoff between retries while the store fails (ms). Default 30,000. */
  readonly maxRetryDelayMs?: number;
  /** svc_activity_self_events_total{result}. */
  readonly counter?: Counter<'result'>;
}

interface Entry {
  readonly key: string;
  readonly scope: ActivityScope;
  readonly event: ActivityEvent;
  numbered: boolean;
  inFlight: boolean;
  acked: boolean;
}

/** Commands whose session is remembered (for the session_id of command events). */
const MAX_SESSION_COMMANDS = 10_000;
const FIRST_RETRY_MS = 250;

/** A UUIDv7: 48 bits of Unix milliseconds, then random bits (time-ordered ids, as the schema recommends). */
export function uuidV7(nowMs: number = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(nowMs, 0, 6);
  b[6] = 0x70 | ((b[6] as number) & 0x0f);
  b[8] = 0x80 | ((b[8] as number) & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export class SelfCollector {
  readonly #o: SelfCollectorOptions;
  readonly #log: Logger;
  readonly #batch: number;
  readonly #intervalMs: number;
  readonly #maxQueued: number;
  readonly #maxRetryMs: number;
  #queue: Entry[] = [];
  /** Next sequence per scope key; null until the store's coverage was read. */
  #next: Map<string, number> | null = null;
  readonly #sessionOfCommand = new Map<string, string>();
  #timer: NodeJS.Timeout | null = null;
  #retrying = false;
  #failures = 0;
  #inFlight: Promise<boolean> | null = null;
  #loading: Promise<boolean> | null = null;
  #stopped = false;
  readonly #stats = { recorded: 0, dropped: 0, refused: 0 };

  constructor(o: SelfCollectorOptions) {
    this.#o = o;
    this.#log = o.logger;
    this.#batch = o.batchEvents ?? 100;
    this.#intervalMs = o.flushIntervalMs ?? 250;
    this.#maxQueued = o.maxQueuedEvents ?? 10_000;
    this.#maxRetryMs = o.maxRetryDelayMs ?? 30_000;
  }

  /** Reads where each scope's sequence stands (retried in the background when the store fails). */
  async start(): Promise<void> {
    if (!(await this.#loadSequences())) this.#retryLater();
  }

  /** A v1 event (EventStore.subscribe). Events clients posted (origin `api`) are not what sandboxd saw: not recorded. */
  event(e: StoredEvent, origin: EventOrigin = 'internal'): void {
    if (this.#stopped || origin !== 'internal') return;
    const d = e.details;
    // The session a PTY command belongs to, so its command events carry the session_id too.
    if (
      e.event_type === 'agent.pty.created' &&
      typeof d['session_id'] === 'string' &&
      typeof d['command_id'] === 'string' &&
      d['session_id'] !== ''
    ) {
      if (this.#sessionOfCommand.size >= MAX_SESSION_COMMANDS)
        this.#sessionOfCommand.delete(this.#sessionOfCommand.keys().next().value as string);
      this.#sessionOfCommand.set(d['command_id'], d['session_id']);
    }
    const draft = draftOfEvent(e, { sessionOfCommand: (id) => this.#sessionOfCommand.get(id) });
    if (e.event_type === 'agent.command.completed' && typeof d['command_id'] === 'string') this.#sessionOfCommand.delete(d['command_id']);
    if (draft !== null) this.record(draft);
  }

  /** A task's tool call (TaskOrchestrator.subscribeToolCalls). */
  toolCall(c: TaskToolCall): void {
    if (this.#stopped) return;
    const draft = draftOfToolCall(c);
    if (draft !== null) this.record(draft);
  }

  /** Queues one event (validated now; numbered now when the sequences are known). */
  record(draft: SelfDraft): void {
    if (this.#stopped) return;
    const agent = scopeId(draft.agentId);
    const known = this.#o.instanceOf?.(draft.agentId);
    const instance = scopeId(known !== undefined && known !== '' ? known : draft.agentId);
    const scope: ActivityScope = {
      tenant_id: this.#o.service.tenantId,
      host_id: this.#o.service.hostId,
      instance_id: instance,
      agent_id: agent,
      collector_id: SELF_COLLECTOR_ID,
    };
    const now = Date.now();
    const event: ActivityEvent = {
      schema_version: ACTIVITY_SCHEMA_VERSION,
      event_id: uuidV7(now),
      event_name: draft.eventName,
      plane: draft.plane,
      occurred_at: draft.occurredAt,
      observed_at: new Date(now).toISOString(),
      source: { collector: SELF_COLLECTOR_ID, layer: 'control-plane', runtime: 'host', trust: 'observed' },
      correlation: { tenant_id: scope.tenant_id, host_id: scope.host_id, instance_id: instance, agent_id: agent, ...draft.correlation },
      ...(draft.outcome !== undefined && { outcome: draft.outcome }),
      sensitivity: 'metadata',
      retention_class: 'standard',
      payload: draft.payload,
      integrity: { collector_sequence: 1 },
    };
    try {
      validateEvent(event, 0, scope);
    } catch (err) {
      this.#count('refused');
      this.#log.warn({ event_name: draft.eventName, err: errorMessage(err) }, 'a self-recorded activity event is invalid; not recorded');
      return;
    }
    const entry: Entry = { key: `${instance}\u0000${agent}`, scope, event, numbered: false, inFlight: false, acked: false };
    if (this.#next !== null) this.#number(entry, this.#next);
    this.#queue.push(entry);
    if (this.#queue.length > this.#maxQueued) this.#dropOldest();
    this.#schedule();
  }

  /** Counts so far (and what is queued). */
  stats(): { recorded: number; dropped: number; refused: number; queued: number } {
    return { ...this.#stats, queued: this.#queue.length };
  }

  /** Flushes what is queued (retrying while the store fails) within `timeoutMs`; what is left is counted dropped. Idempotent. */
  async stop(timeoutMs = 5000): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const until = Date.now() + timeoutMs;
    if (this.#inFlight !== null) await this.#inFlight;
    while (this.#queue.length > 0 && Date.now() < until) {
      if (this.#next === null && !(await this.#loadSequences())) {
        await sleepMs(Math.min(500, until - Date.now()));
        continue;
      }
      if (!(await this.#flushOnce())) await sleepMs(Math.min(500, Math.max(0, until - Date.now())));
    }
    if (this.#queue.length > 0) {
      this.#log.warn({ events: this.#queue.length }, 'activity events sandboxd recorded were not stored before the deadline of stop');
      this.#count('dropped', this.#queue.length);
      this.#queue = [];
    }
  }

  #count(result: 'recorded' | 'dropped' | 'refused', n = 1): void {
    if (n <= 0) return;
    this.#stats[result] += n;
    this.#o.counter?.inc({ result }, n);
  }

  #number(e: Entry, next: Map<string, number>): void {
    const seq = next.get(e.key) ?? 1;
    next.set(e.key, seq + 1);
    e.event.integrity.collector_sequence = seq;
    e.numbered = true;
  }

  #dropOldest(): void {
    const i = this.#queue.findIndex((e) => !e.inFlight);
    if (i < 0) return;
    this.#queue.splice(i, 1);
    this.#count('dropped');
    // Logged at 1, 2, 4, 8, … drops: visible without flooding while the store is down.
    const n = this.#stats.dropped;
    if ((n & (n - 1)) === 0)
      this.#log.warn(
        { dropped: n, queued: this.#queue.length },
        'activity store unreachable: the oldest self-recorded events were dropped (recorded as a sequence gap)',
      );
  }

  async #loadSequences(): Promise<boolean> {
    this.#loading ??= (async () => {
      try {
        const svc = this.#o.service;
        const coverage = await svc.store.coverage(svc.readScope({ host_id: svc.hostId }), SELF_COLLECTOR_ID);
        const next = new Map<string, number>();
        for (const c of coverage)
          next.set(`${c.instance_id}\u0000${c.agent_id}`, Math.max(c.last_sequence ?? 0, c.durable_through_sequence) + 1);
        for (const e of this.#queue) if (!e.numbered) this.#number(e, next);
        this.#next = next;
        return true;
      } catch (err) {
        this.#log.warn({ err: errorMessage(err) }, 'could not read where the self-collector sequences stand; retrying');
        return false;
      } finally {
        this.#loading = null;
      }
    })();
    return this.#loading;
  }

  /** Re-reads one scope's last sequence and renumbers its queued events after it (after a sequence conflict). */
  async #renumber(scope: ActivityScope, key: string): Promise<void> {
    const svc = this.#o.service;
    const [c] = await svc.store.coverage(
      { tenant_id: scope.tenant_id, host_id: scope.host_id, instance_id: scope.instance_id, agent_id: scope.agent_id },
      SELF_COLLECTOR_ID,
    );
    const next = this.#next;
    if (next === null) return;
    next.set(key, Math.max(c?.last_sequence ?? 0, c?.durable_through_sequence ?? 0) + 1);
    for (const e of this.#queue) if (e.key === key && !e.inFlight) this.#number(e, next);
  }

  #schedule(): void {
    if (this.#stopped || this.#inFlight !== null || this.#retrying || this.#next === null) return;
    if (this.#queue.length >= this.#batch) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timer = null;
      this.#kick();
    } else if (this.#timer === null && this.#queue.length > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.#kick();
      }, this.#intervalMs);
      this.#timer.unref();
    }
  }

  #kick(): void {
    if (this.#stopped || this.#inFlight !== null) return;
    const run = this.#flushOnce();
    this.#inFlight = run;
    void run.then((ok) => {
      this.#inFlight = null;
      if (ok) {
        this.#failures = 0;
        this.#schedule();
      } else this.#retryLater();
    });
  }

  #retryLater(): void {
    if (this.#stopped) return;
    this.#failures++;
    const delay = Math.min(this.#maxRetryMs, FIRST_RETRY_MS * 2 ** Math.min(this.#failures - 1, 16)) * (0.5 + Math.random() / 2);
    this.#retrying = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#retrying = false;
      if (this.#next === null) {
        void this.#loadSequences().then((ok) => (ok ? this.#schedule() : this.#retryLater()));
        return;
      }
      this.#kick();
    }, delay);
    this.#timer.unref();
  }

  /** Sends the oldest batch, one ingest per scope. Resolves true when every scope's ingest settled for good. Never rejects. */
  async #flushOnce(): Promise<boolean> {
    const batch = this.#queue.slice(0, this.#batch).filter((e) => e.numbered);
    if (batch.length === 0) return true;
    const groups = new Map<string, Entry[]>();
    for (const e of batch) {
      e.inFlight = true;
      const g = groups.get(e.key);
      if (g === undefined) groups.set(e.key, [e]);
      else g.push(e);
    }
    let ok = true;
    const renumber: Entry[] = [];
    await Promise.all(
      [...groups.values()].map(async (g) => {
        const scope = (g[0] as Entry).scope;
        try {
          const ack = await this.#o.service.ingest(
            scope,
            g.map((e) => e.event),
          );
          for (const e of g) e.acked = true;
          this.#count('recorded', g.length);
          if (ack.sequence_gaps_recorded.length > 0)
            this.#log.warn(
              { agent: scope.agent_id, gaps: ack.sequence_gaps_recorded },
              'self-recorded activity has a sequence gap (events dropped earlier)',
            );
        } catch (err) {
          if (err instanceof SvcError && err.httpStatus < 500) {
            if (err.code === 'activity.sequence_conflict') {
              renumber.push(g[0] as Entry);
              ok = false;
              return;
            }
            for (const e of g) e.acked = true;
            this.#count('refused', g.length);
            this.#log.error(
              { agent: scope.agent_id, code: err.code, err: err.message, events: g.length },
              'the activity store refused self-recorded events; they are dropped',
            );
            return;
          }
          ok = false;
          if (this.#failures === 0 || (this.#failures & (this.#failures - 1)) === 0)
            this.#log.warn(
              { err: errorMessage(err), failures: this.#failures + 1 },
              'the activity store did not take self-recorded events; retrying with backoff',
            );
        }
      }),
    );
    for (const e of batch) e.inFlight = false;
    this.#queue = this.#queue.filter((e) => !e.acked);
    for (const e of renumber) {
      try {
        await this.#renumber(e.scope, e.key);
      } catch (err) {
        this.#log.warn({ err: errorMessage(err) }, 'could not re-read a self-collector sequence after a conflict; retrying');
      }
    }
    return ok;
  }
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)).unref());
}
