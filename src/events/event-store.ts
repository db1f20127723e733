/**
 * The v1 event store (spec 4.5, part 6): an in-memory, bounded log of recent events across VMs,
 * agents and sessions. Bounded by count and by bytes; the oldest events go first. Every event
 * gets a monotonic integer id, which is the cursor for polling (`since`) and for live tails.
 */
import type { EventPage, EventRecord as WireEventRecord } from '../wire/events.js';

/** An event as stored and served: the spec's v1 record plus our cursor `id` (src/wire/events.ts). */
export type StoredEvent = WireEventRecord;

/** The spec's v1 event record, before the store gives it its cursor. */
export type EventRecord = Omit<StoredEvent, 'id'>;

export interface EventQuery {
  /** Only events with id > since. */
  since?: number;
  /** Exact type, or a prefix ending in `*` (`agent.*`). */
  eventType?: string;
  agentId?: string;
  vmName?: string;
  /** Newest `limit` matches are returned, oldest first. */
  limit: number;
}

/** GET /api/v1/events (src/wire/events.ts). */
export type { EventPage };

export interface EventStoreOptions {
  /** Default 10 000 events. */
  maxEvents?: number;
  /** Default 16 MiB of JSON. */
  maxBytes?: number;
  /** Sampling: at most one agent.heartbeat per agent per this many ms. Default 60 000. */
  heartbeatSampleMs?: number;
  now?: () => number;
}

/** Where an event came from: sandboxd itself, or a client's POST /api/v1/events (the VM event bridge). */
export type EventOrigin = 'internal' | 'api';

type Listener = (event: StoredEvent, origin: EventOrigin) => void;

export class EventStore {
  readonly #events: { event: StoredEvent; bytes: number }[] = [];
  #head = 0;
  #bytes = 0;
  #nextId = 1;
  #evicted = 0;
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #heartbeatSampleMs: number;
  readonly #lastHeartbeat = new Map<string, number>();
  readonly #listeners = new Set<Listener>();
  readonly #now: () => number;

  constructor(opts: EventStoreOptions = {}) {
    this.#maxEvents = opts.maxEvents ?? 10_000;
    this.#maxBytes = opts.maxBytes ?? 16 * 1024 * 1024;
    this.#heartbeatSampleMs = opts.heartbeatSampleMs ?? 60_000;
    this.#now = opts.now ?? Date.now;
  }

  /**
   * Appends an event (fields default to empty strings, now, {} and null) and notifies live
   * listeners. agent.heartbeat is sampled per agent; a dropped sample returns null. `origin`
   * tells listeners whether sandboxd saw it happen (what the activity self-collector records).
   */
  append(input: Partial<EventRecord> & { event_type: string }, origin: EventOrigin = 'internal'): StoredEvent | null {
    const nowMs = this.#now();
    if (input.event_type === 'agent.heartbeat') {
      const key = input.agent_id ?? '';
      const last = this.#lastHeartbeat.get(key);
      if (last !== undefined && nowMs - last < this.#heartbeatSampleMs) return null;
      this.#lastHeartbeat.set(key, nowMs);
    }
    const event: StoredEvent = {
      id: this.#nextId++,
      event_type: input.event_type,
      vm_name: input.vm_name ?? '',
      timestamp: input.timestamp ?? new Date(nowMs).toISOString(),
      details: input.details ?? {},
      agent_id: input.agent_id ?? '',
      trace_id: input.trace_id ?? null,
    };
    const bytes = JSON.stringify(event).length;
    this.#events.push({ event, bytes });
    this.#bytes += bytes;
    this.#evict();
    for (const l of this.#listeners) l(event, origin);
    return event;
  }

  query(q: EventQuery): EventPage {
    const matches: StoredEvent[] = [];
    for (let i = this.#head; i < this.#events.length; i++) {
      const e = (this.#events[i] as { event: StoredEvent }).event;
      if (q.since !== undefined && e.id <= q.since) continue;
      if (q.agentId !== undefined && e.agent_id !== q.agentId) continue;
      if (q.vmName !== undefined && e.vm_name !== q.vmName) continue;
      if (q.eventType !== undefined && !typeMatches(e.event_type, q.eventType)) continue;
      matches.push(e);
    }
    return {
      events: matches.slice(Math.max(0, matches.length - q.limit)),
      total_count: matches.length,
      last_event_id: this.#nextId - 1,
    };
  }

  /** Live tail; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Forgets heartbeat sampling state of an agent (called when it is removed). */
  forgetAgent(agentId: string): void {
    this.#lastHeartbeat.delete(agentId);
  }

  stats(): { retained: number; bytes: number; evicted: number; lastEventId: number } {
    return { retained: this.#events.length - this.#head, bytes: this.#bytes, evicted: this.#evicted, lastEventId: this.#nextId - 1 };
  }

  #evict(): void {
    while (this.#events.length - this.#head > this.#maxEvents || (this.#bytes > this.#maxBytes && this.#events.length - this.#head > 1)) {
      const gone = this.#events[this.#head] as { bytes: number };
      this.#bytes -= gone.bytes;
      this.#head++;
      this.#evicted++;
    }
    // Compact the backing array once the dead prefix dominates, so memory stays bounded.
    if (this.#head > 1024 && this.#head * 2 > this.#events.length) {
      this.#events.splice(0, this.#head);
      this.#head = 0;
    }
  }
}

export function typeMatches(type: string, pattern: string): boolean {
  return pattern.endsWith('*') ? type.startsWith(pattern.slice(0, -1)) : type === pattern;
}
