/**
 * The events view's model: the filter (type prefix, agent, VM) as the query of
 * GET /api/v1/events, and a bounded, de-duplicated list of received events.
 *
 * Resume rule: the stream is resumed with `since=<last id>`. The event store is in memory, so a
 * restarted server numbers events from 1 again, and `since=<old cursor>` would silently skip its
 * first events. Before resuming, the view therefore compares the server's last_event_id with the
 * cursor (`checkServerCursor`): lower means "restarted", the cursor restarts at 0 and the log
 * says so.
 */

/** Spec part 6 event types grouped by prefix, for the filter's suggestions. */
export const EVENT_TYPE_PREFIXES = ['vm.', 'agent.', 'agent.command.', 'agent.pty.', 'session.', 'mission.'] as const;

export interface EventFilter {
  /** An exact type (`vm.started`) or a prefix ending in `.` (`vm.`); empty for all. */
  readonly type: string;
  readonly agentId: string;
  readonly vmName: string;
}

export interface EventRow {
  readonly id: number;
  readonly event_type: string;
  readonly vm_name: string;
  readonly agent_id: string;
  readonly timestamp: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly trace_id: string | null;
}

/** A line in the log: an event, or a marker the view renders as a divider. */
export type LogEntry =
  { readonly kind: 'event'; readonly event: EventRow } | { readonly kind: 'marker'; readonly text: string; readonly key: string };

export function filterFromQuery(q: URLSearchParams): EventFilter {
  return { type: q.get('type') ?? '', agentId: q.get('agent') ?? '', vmName: q.get('vm') ?? '' };
}

/** The hash query for a filter (empty fields left out). */
export function filterToQuery(f: EventFilter): URLSearchParams {
  const q = new URLSearchParams();
  if (f.type.trim() !== '') q.set('type', f.type.trim());
  if (f.agentId.trim() !== '') q.set('agent', f.agentId.trim());
  if (f.vmName.trim() !== '') q.set('vm', f.vmName.trim());
  return q;
}

/**
 * Query parameters of GET /api/v1/events for a filter. A type ending in `.` (or `*`) is a prefix
 * (the server's syntax is `vm.*`); anything else is exact. Characters the server refuses in a type
 * are left out rather than sent to earn a 400.
 */
export function eventsApiQuery(f: EventFilter, opts: { since?: number; follow?: boolean; limit?: number } = {}): URLSearchParams {
  const q = new URLSearchParams();
  const t = f.type
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9_.*]/g, '');
  if (t !== '') q.set('event_type', t.endsWith('.') ? `${t}*` : t.endsWith('*') ? `${t.replace(/\*+$/, '')}*` : t);
  if (f.agentId.trim() !== '') q.set('agent_id', f.agentId.trim());
  if (f.vmName.trim() !== '') q.set('vm_name', f.vmName.trim());
  if (opts.since !== undefined) q.set('since', String(opts.since));
  if (opts.limit !== undefined) q.set('limit', String(opts.limit));
  if (opts.follow === true) q.set('follow', 'true');
  return q;
}

/** A bounded list of log entries, newest last. */
export class EventLog {
  #entries: LogEntry[] = [];
  #lastId = 0;
  #markers = 0;
  readonly #maxEntries: number;

  /** `maxEntries` default 2000: older lines fall off the top. */
  constructor(maxEntries = 2000) {
    this.#maxEntries = maxEntries;
  }

  /** The cursor to resume from (`since`), 0 before any event. */
  get lastId(): number {
    return this.#lastId;
  }

  get entries(): readonly LogEntry[] {
    return this.#entries;
  }

  /** Adds events in arrival order, skipping any at or below the cursor (duplicates). Returns the entries added. */
  add(events: readonly EventRow[]): LogEntry[] {
    const added: LogEntry[] = [];
    for (const e of events) {
      if (e.id <= this.#lastId) continue;
      this.#lastId = e.id;
      added.push({ kind: 'event', event: e });
    }
    this.#push(added);
    return added;
  }

  /**
   * Checks the server's newest id (last_event_id of GET /api/v1/events) before resuming: below
   * the cursor means the server restarted and numbers from 1 again. Then the cursor restarts and
   * a marker says so; returns that marker (null when nothing happened).
   */
  checkServerCursor(serverLastId: number): LogEntry | null {
    if (serverLastId >= this.#lastId) return null;
    this.#lastId = 0;
    return this.mark('The server restarted here: its event numbers start again');
  }

  /** Adds a divider line (e.g. "connection lost at 14:02:11"). */
  mark(text: string): LogEntry {
    const m = this.#marker(text);
    this.#push([m]);
    return m;
  }

  clear(): void {
    this.#entries = [];
  }

  #marker(text: string): LogEntry {
    return { kind: 'marker', text, key: `m${++this.#markers}` };
  }

  #push(entries: readonly LogEntry[]): void {
    if (entries.length === 0) return;
    this.#entries.push(...entries);
    if (this.#entries.length > this.#maxEntries) this.#entries.splice(0, this.#entries.length - this.#maxEntries);
  }
}

/** One-line summary of an event's details for the table (`key=value …`, long values cut). */
export function detailsSummary(details: Readonly<Record<string, unknown>>, maxChars = 160): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(details)) {
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(`${k}=${text === undefined ? '' : text.length > 60 ? `${text.slice(0, 57)}…` : text}`);
  }
  const s = parts.join(' ');
  return s.length > maxChars ? `${s.slice(0, maxChars - 1)}…` : s;
}
