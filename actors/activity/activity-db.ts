/**
 * The SQLite activity store's SQL (spec 4.12; the rules are src/activity/store.ts's): `<dir>/activity.db`,
 * opened by openDurableDb (own 0700 directory, file 0600, WAL, synchronous=FULL), used by one
 * thread only (the store's worker, sqlite-activity.worker.ts), so every call here is synchronous
 * and runs alone.
 *
 * Tables:
 * - activity_events: one row per stored event, `position` (INTEGER PRIMARY KEY AUTOINCREMENT: the
 *   ingest order, never reused, so a cursor stays exact after pruning) plus the columns the filters
 *   match on, and the record as ingested (a replay is told from a conflict by comparing its
 *   canonical JSON with the stored record's). Its position is also its ingest order, which is what
 *   prune goes by (no index on ingested_at: one less B-tree for every insert).
 * - activity_collectors: per collector (tenant, host, instance, agent, collector) what coverage
 *   shows, kept up to date by ingest and prune, so coverage costs O(collectors) and never a scan.
 * - activity_sequence_gaps: every run of sequences a collector skipped (durable loss records).
 */
import type Database from 'better-sqlite3';
import { SvcError } from '../../src/core/errors.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { openDurableDb } from '../../src/util/durable-db.js';
import type {
  ActivityCollectorCoverage,
  ActivityEvent,
  ActivityIngestAck,
  ActivitySequenceGap,
  ActivitySequenceJump,
} from '../../src/wire/activity.js';
import { ACTIVITY_SCHEMA_VERSION } from '../../src/wire/activity.js';
import {
  activityRowOf,
  type ActivityCallPage,
  type ActivityCallQuery,
  type ActivityCallReadScope,
  type ActivityCallScope,
  type ActivityRow,
} from '../protocol/activity-calls.js';

export const ACTIVITY_DB_FILE = 'activity.db';
/** PRAGMA user_version of the schema below. */
const kSchemaVersion = 1;
/** Prepared reads kept (one per combination of filters). */
const kMaxCachedReads = 128;

/** The correlation ids with an index each (exact-match filters), in the column order of the table. */
const CORRELATION_FILTERS = ['session_id', 'mission_id', 'task_id', 'tool_call_id', 'command_id', 'process_id', 'trace_id'] as const;
/** The same, most selective first: the one whose index a filtered read walks. */
const CORRELATION_BY_SELECTIVITY = ['tool_call_id', 'command_id', 'process_id', 'trace_id', 'task_id', 'session_id', 'mission_id'] as const;
const SCOPE_COLUMNS = 'tenant_id, host_id, instance_id, agent_id, collector_id';
const SCOPE_MATCH =
  'tenant_id = @tenant_id AND host_id = @host_id AND instance_id = @instance_id AND agent_id = @agent_id AND collector_id = @collector_id';

/** The tables and indexes (also the bench ceiling's, native-bench/scenarios/activity-ingest.ts: raw inserts into the same schema). */
export const ACTIVITY_DB_SCHEMA = `
  CREATE TABLE IF NOT EXISTS activity_events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    host_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    collector_id TEXT NOT NULL,
    collector_sequence INTEGER NOT NULL,
    event_name TEXT NOT NULL,
    occurred_at_ms INTEGER NOT NULL,
    ingested_at_ms INTEGER NOT NULL,
    ${CORRELATION_FILTERS.map((c) => `${c} TEXT`).join(',\n    ')},
    record TEXT NOT NULL
  );
  CREATE UNIQUE INDEX IF NOT EXISTS activity_events_sequence ON activity_events (${SCOPE_COLUMNS}, collector_sequence);
  CREATE INDEX IF NOT EXISTS activity_events_occurred ON activity_events (${SCOPE_COLUMNS}, occurred_at_ms);
  CREATE INDEX IF NOT EXISTS activity_events_name ON activity_events (tenant_id, event_name);
  CREATE INDEX IF NOT EXISTS activity_events_scope ON activity_events (tenant_id, host_id, instance_id, agent_id);
  ${CORRELATION_FILTERS.map((c) => `CREATE INDEX IF NOT EXISTS activity_events_${c} ON activity_events (${c}) WHERE ${c} IS NOT NULL;`).join('\n  ')}
  CREATE TABLE IF NOT EXISTS activity_collectors (
    tenant_id TEXT NOT NULL,
    host_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    collector_id TEXT NOT NULL,
    durable_through_sequence INTEGER NOT NULL,
    event_count INTEGER NOT NULL,
    first_sequence INTEGER,
    last_sequence INTEGER,
    first_occurred_at_ms INTEGER,
    last_occurred_at_ms INTEGER,
    last_ingested_at_ms INTEGER,
    jump_count INTEGER NOT NULL,
    PRIMARY KEY (${SCOPE_COLUMNS})
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS activity_sequence_gaps (
    tenant_id TEXT NOT NULL,
    host_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    collector_id TEXT NOT NULL,
    first_missing_sequence INTEGER NOT NULL,
    last_missing_sequence INTEGER NOT NULL,
    recorded_at_ms INTEGER NOT NULL,
    PRIMARY KEY (${SCOPE_COLUMNS}, first_missing_sequence)
  ) WITHOUT ROWID;
`;

interface CollectorRow {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  collector_id: string;
  durable_through_sequence: number;
  event_count: number;
  first_sequence: number | null;
  last_sequence: number | null;
  first_occurred_at_ms: number | null;
  last_occurred_at_ms: number | null;
  last_ingested_at_ms: number | null;
  jump_count: number;
}

interface GapRow {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  collector_id: string;
  first_missing_sequence: number;
  last_missing_sequence: number;
}

/** One ingest call: a batch of one scope, stamped with the server's clock (epoch ms). */
export interface IngestBatch {
  readonly scope: ActivityCallScope;
  readonly rows: readonly ActivityRow[];
  readonly nowMs: number;
}

export type IngestOutcome = { readonly ok: true; readonly ack: ActivityIngestAck } | { readonly ok: false; readonly error: SvcError };

type Scope5 = Pick<CollectorRow, 'tenant_id' | 'host_id' | 'instance_id' | 'agent_id' | 'collector_id'>;

const scopeKey = (s: Scope5): string => JSON.stringify([s.tenant_id, s.host_id, s.instance_id, s.agent_id, s.collector_id]);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export class ActivityDb {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #byId: Database.Statement<[string]>;
  readonly #collector: Database.Statement<[Scope5]>;
  readonly #putCollector: Database.Statement<[CollectorRow]>;
  readonly #putGap: Database.Statement;
  readonly #cursor: Database.Statement<[string, string]>;
  readonly #pruneRows: Database.Statement<[{ beforeMs: number; maxRows: number }]>;
  readonly #bounds: Database.Statement<[Scope5]>;
  /** Prepared reads by SQL text (one per combination of filters used). */
  readonly #reads = new Map<string, Database.Statement>();
  readonly #ingestGroupTx: (batches: readonly IngestBatch[]) => IngestOutcome[];
  readonly #pruneTx: (beforeMs: number, maxRows: number) => number;

  /** Opens (creating) `<dir>/activity.db`. Throws when the directory or the file cannot be used. */
  constructor(dir: string) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, ACTIVITY_DB_FILE));
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion)
      throw new Error(`${this.path} has schema version ${version}; this server knows up to ${kSchemaVersion} (a newer server wrote it)`);
    this.#db.exec(ACTIVITY_DB_SCHEMA);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#insert = this.#db.prepare(`
      INSERT INTO activity_events (event_id, ${SCOPE_COLUMNS}, collector_sequence, event_name, occurred_at_ms,
        ingested_at_ms, ${CORRELATION_FILTERS.join(', ')}, record)
      VALUES (${Array(11 + CORRELATION_FILTERS.length)
        .fill('?')
        .join(', ')})
      ON CONFLICT DO NOTHING`);
    this.#byId = this.#db.prepare('SELECT record FROM activity_events WHERE event_id = ?');
    this.#collector = this.#db.prepare(`SELECT * FROM activity_collectors WHERE ${SCOPE_MATCH}`);
    this.#putCollector = this.#db.prepare(`
      INSERT OR REPLACE INTO activity_collectors (${SCOPE_COLUMNS}, durable_through_sequence, event_count, first_sequence,
        last_sequence, first_occurred_at_ms, last_occurred_at_ms, last_ingested_at_ms, jump_count)
      VALUES (@tenant_id, @host_id, @instance_id, @agent_id, @collector_id, @durable_through_sequence, @event_count, @first_sequence,
        @last_sequence, @first_occurred_at_ms, @last_occurred_at_ms, @last_ingested_at_ms, @jump_count)`);
    this.#putGap = this.#db.prepare(`
      INSERT INTO activity_sequence_gaps (${SCOPE_COLUMNS}, first_missing_sequence, last_missing_sequence, recorded_at_ms)
      VALUES (@tenant_id, @host_id, @instance_id, @agent_id, @collector_id, @first, @last, @now)`);
    this.#cursor = this.#db.prepare('SELECT position FROM activity_events WHERE event_id = ? AND tenant_id = ?');
    this.#pruneRows = this.#db.prepare(`
      DELETE FROM activity_events WHERE position IN (
        SELECT position FROM (SELECT position, ingested_at_ms FROM activity_events ORDER BY position LIMIT @maxRows)
        WHERE ingested_at_ms < @beforeMs)
      RETURNING ${SCOPE_COLUMNS}`);
    // Four scalar subqueries, each one index lookup: SQLite's min/max shortcut takes one aggregate
    // per SELECT (MIN and MAX together would walk the collector's whole index range).
    const edge = (fn: 'MIN' | 'MAX', col: string): string => `(SELECT ${fn}(${col}) FROM activity_events WHERE ${SCOPE_MATCH})`;
    this.#bounds = this.#db.prepare(
      `SELECT ${edge('MIN', 'collector_sequence')} AS first_sequence, ${edge('MAX', 'collector_sequence')} AS last_sequence,
        ${edge('MIN', 'occurred_at_ms')} AS first_occurred_at_ms, ${edge('MAX', 'occurred_at_ms')} AS last_occurred_at_ms`,
    );
    // BEGIN IMMEDIATE: the write lock is taken at the start, so a transaction never fails half way for want of it.
    // Inside the group's transaction each batch runs in a SAVEPOINT of its own (better-sqlite3
    // nests a transaction function that way): a refused batch is rolled back alone.
    const batchTx = this.#db.transaction(this.#ingestIn.bind(this));
    const groupTx = this.#db.transaction((batches: readonly IngestBatch[]) =>
      batches.map((b): IngestOutcome => {
        try {
          return { ok: true, ack: batchTx(b.scope, b.rows, b.nowMs) };
        } catch (err) {
          // A refusal is this batch's answer; anything else (an I/O error) fails the whole group.
          if (err instanceof SvcError) return { ok: false, error: err };
          throw err;
        }
      }),
    );
    this.#ingestGroupTx = (batches) => groupTx.immediate(batches);
    const pruneTx = this.#db.transaction(this.#pruneIn.bind(this));
    this.#pruneTx = (beforeMs, maxRows) => pruneTx.immediate(beforeMs, maxRows);
  }

  get open(): boolean {
    return this.#db.open;
  }

  /** Stores a batch of one scope in one transaction (see src/activity/store.ts); returns once it committed. */
  ingest(scope: ActivityCallScope, events: readonly ActivityEvent[], nowMs: number): ActivityIngestAck {
    events.forEach((event, index) => {
      const corr = event.correlation;
      if (
        corr.tenant_id !== scope.tenant_id ||
        corr.host_id !== scope.host_id ||
        corr.instance_id !== scope.instance_id ||
        corr.agent_id !== scope.agent_id ||
        event.source.collector !== scope.collector_id
      )
        throw new SvcError('activity.scope_mismatch', `events[${index}] (${event.event_id}): its scope differs from the batch's`, {
          event_index: index,
          event_id: event.event_id,
        });
    });
    const [outcome] = this.ingestGroup([{ scope, rows: events.map(activityRowOf), nowMs }]);
    if (outcome === undefined || !outcome.ok) throw outcome?.error ?? new Error('no outcome');
    return outcome.ack;
  }

  /**
   * Stores several batches in one transaction, so one commit (one fsync) makes them all durable:
   * the group commit of the worker, which hands over every ingest already waiting. Each batch is
   * still all or nothing on its own (a SAVEPOINT each): a refused batch gets its SvcError and the
   * others are stored; the outcomes are in batch order and none is an acknowledgement until this
   * returns. Throws (nothing stored) when the transaction itself fails.
   */
  ingestGroup(batches: readonly IngestBatch[]): IngestOutcome[] {
    return this.#ingestGroupTx(batches);
  }

  #ingestIn(scope: ActivityCallScope, rows: readonly ActivityRow[], nowMs: number): ActivityIngestAck {
    const prev = this.#collector.get(scope) as CollectorRow | undefined;
    const state: CollectorRow = prev ?? {
      ...pickScope(scope),
      durable_through_sequence: 0,
      event_count: 0,
      first_sequence: null,
      last_sequence: null,
      first_occurred_at_ms: null,
      last_occurred_at_ms: null,
      last_ingested_at_ms: null,
      jump_count: 0,
    };
    const accepted: { id: string; sequence: number }[] = [];
    const duplicates: string[] = [];
    rows.forEach((row, index) => {
      const [eventId, sequence, eventName, occurredMs, session, mission, task, toolCall, command, process, trace, record] = row;
      // Positional, in the column order of #insert (binding by name costs a lookup per column).
      const inserted = this.#insert.run(
        eventId,
        scope.tenant_id,
        scope.host_id,
        scope.instance_id,
        scope.agent_id,
        scope.collector_id,
        sequence,
        eventName,
        occurredMs,
        nowMs,
        session,
        mission,
        task,
        toolCall,
        command,
        process,
        trace,
        record,
      );
      if (inserted.changes === 1) {
        accepted.push({ id: eventId, sequence });
        state.event_count++;
        if (state.first_sequence === null || sequence < state.first_sequence) state.first_sequence = sequence;
        if (state.last_sequence === null || sequence > state.last_sequence) state.last_sequence = sequence;
        if (state.first_occurred_at_ms === null || occurredMs < state.first_occurred_at_ms) {
          state.first_occurred_at_ms = occurredMs;
        }
        if (state.last_occurred_at_ms === null || occurredMs > state.last_occurred_at_ms) {
          state.last_occurred_at_ms = occurredMs;
        }
        return;
      }
      // Not inserted: its event_id or its (scope, sequence) is taken.
      const stored = this.#byId.get(eventId) as { record: string } | undefined;
      if (stored !== undefined) {
        // A replay: the same record whatever the order of its keys (only replays pay for this).
        if (canonicalJson(JSON.parse(stored.record)) === canonicalJson(JSON.parse(record))) {
          duplicates.push(eventId);
          return;
        }
        throw new SvcError(
          'activity.event_id_conflict',
          `events[${index}] (${eventId}): the event_id is already stored with different content; a replay must be identical`,
          { event_index: index, event_id: eventId },
        );
      }
      throw new SvcError(
        'activity.sequence_conflict',
        `events[${index}] (${eventId}): collector ${scope.collector_id} already stored sequence ${sequence} under another event_id`,
        { event_index: index, event_id: eventId, collector_sequence: sequence },
      );
    });

    // Gaps in sequence order, so a batch that carries its sequences out of order skips none of them.
    const gaps: ActivitySequenceGap[] = [];
    const jumps: ActivitySequenceJump[] = [];
    let highest = state.durable_through_sequence;
    for (const a of [...accepted].sort((x, y) => x.sequence - y.sequence)) {
      if (a.sequence > highest + 1) {
        const gap = { collector_id: scope.collector_id, first_missing_sequence: highest + 1, last_missing_sequence: a.sequence - 1 };
        this.#putGap.run({ ...pickScope(scope), first: gap.first_missing_sequence, last: gap.last_missing_sequence, now: nowMs });
        gaps.push(gap);
        jumps.push({ collector_id: scope.collector_id, event_id: a.id, expected: highest + 1, got: a.sequence });
      }
      if (a.sequence > highest) highest = a.sequence;
    }
    state.durable_through_sequence = highest;
    state.jump_count += jumps.length;
    if (accepted.length > 0) {
      state.last_ingested_at_ms = nowMs;
      this.#putCollector.run(state);
    }
    return {
      schema_version: ACTIVITY_SCHEMA_VERSION,
      accepted: accepted.length,
      duplicates: duplicates.length,
      accepted_event_ids: accepted.map((a) => a.id),
      duplicate_event_ids: duplicates,
      durable_through_sequence: highest,
      sequence_gaps_recorded: gaps,
      sequence_jumps: jumps,
    };
  }

  /** A page of events in ingest order (see ActivityStore.events). */
  events(scope: ActivityCallReadScope, query: ActivityCallQuery): ActivityCallPage {
    const { sql, params, cursorFound } = this.#page(scope, query);
    const rows = this.#read(sql).all(params) as { record: string }[];
    const hasMore = rows.length > query.limit;
    if (hasMore) rows.length = query.limit;
    const events = rows.map((r) => JSON.parse(r.record) as ActivityCallPage['events'][number]);
    return { events, next_cursor: events.at(-1)?.event_id ?? null, has_more: hasMore, cursor_found: cursorFound };
  }

  /** How SQLite reads a page (EXPLAIN QUERY PLAN, one line per step): for tests and diagnosis. */
  pagePlan(scope: ActivityCallReadScope, query: ActivityCallQuery): string[] {
    const { sql, params } = this.#page(scope, query);
    return (this.#db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail);
  }

  #page(
    scope: ActivityCallReadScope,
    query: ActivityCallQuery,
  ): { sql: string; params: Record<string, string | number>; cursorFound: boolean | null } {
    const where = ['tenant_id = @tenant_id'];
    const params: Record<string, string | number> = { tenant_id: scope.tenant_id, limit: query.limit + 1 };
    for (const k of ['host_id', 'instance_id', 'agent_id'] as const) {
      const v = scope[k];
      if (v !== null) {
        where.push(`${k} = @${k}`);
        params[k] = v;
      }
    }
    for (const k of ['event_name', 'collector_id', ...CORRELATION_FILTERS] as const) {
      const v = query[k];
      if (v === undefined) continue;
      // A read scope's collector would clash with the filter of the same name: filters get an f_ prefix.
      where.push(`${k} = @f_${k}`);
      params[`f_${k}`] = v;
    }
    if (query.since_ms !== undefined) {
      where.push('occurred_at_ms >= @since_ms');
      params['since_ms'] = query.since_ms;
    }
    if (query.until_ms !== undefined) {
      where.push('occurred_at_ms <= @until_ms');
      params['until_ms'] = query.until_ms;
    }
    let cursorFound: boolean | null = null;
    if (query.cursor !== undefined) {
      const at = this.#cursor.get(query.cursor, scope.tenant_id) as { position: number } | undefined;
      cursorFound = at !== undefined;
      if (at !== undefined) {
        where.push('position > @after');
        params['after'] = at.position;
      }
    }
    const sql = `SELECT record FROM activity_events ${pageIndex(scope, query)} WHERE ${where.join(' AND ')} ORDER BY position LIMIT @limit`;
    return { sql, params, cursorFound };
  }

  /** Coverage of every collector in the read scope (optionally one), ordered by scope then collector. */
  coverage(scope: ActivityCallReadScope, collectorId: string | null): ActivityCollectorCoverage[] {
    const where = ['tenant_id = @tenant_id'];
    const params: Record<string, string> = { tenant_id: scope.tenant_id };
    for (const k of ['host_id', 'instance_id', 'agent_id'] as const) {
      const v = scope[k];
      if (v !== null) {
        where.push(`${k} = @${k}`);
        params[k] = v;
      }
    }
    if (collectorId !== null) {
      where.push('collector_id = @collector_id');
      params['collector_id'] = collectorId;
    }
    const order = `ORDER BY ${SCOPE_COLUMNS}`;
    const collectors = this.#read(`SELECT * FROM activity_collectors WHERE ${where.join(' AND ')} ${order}`).all(params) as CollectorRow[];
    const gapRows = this.#read(
      `SELECT ${SCOPE_COLUMNS}, first_missing_sequence, last_missing_sequence FROM activity_sequence_gaps WHERE ${where.join(' AND ')} ${order}, first_missing_sequence`,
    ).all(params) as GapRow[];
    const gaps = new Map<string, ActivitySequenceGap[]>();
    for (const g of gapRows) {
      const key = scopeKey(g);
      let list = gaps.get(key);
      if (list === undefined) gaps.set(key, (list = []));
      list.push({
        collector_id: g.collector_id,
        first_missing_sequence: g.first_missing_sequence,
        last_missing_sequence: g.last_missing_sequence,
      });
    }
    return collectors.map((c) => ({
      ...pickScope(c),
      event_count: c.event_count,
      first_sequence: c.first_sequence,
      last_sequence: c.last_sequence,
      durable_through_sequence: c.durable_through_sequence,
      first_occurred_at: iso(c.first_occurred_at_ms),
      last_occurred_at: iso(c.last_occurred_at_ms),
      last_ingested_at: iso(c.last_ingested_at_ms),
      sequence_gaps: gaps.get(scopeKey(c)) ?? [],
      jump_count: c.jump_count,
    }));
  }

  /**
   * Deletes, of the `maxRows` oldest events (by position: the ingest order), those ingested before
   * `beforeMs`, in one transaction; returns how many went. It looks at no more than `maxRows` rows,
   * so a call costs the same however large the store and however little is due. With a clock that
   * only moves forward (ingested_at follows the position) this is exactly "the oldest due ones";
   * after the clock stepped back, rows behind a younger one wait until it is due too.
   */
  prune(beforeMs: number, maxRows: number): number {
    return this.#pruneTx(beforeMs, maxRows);
  }

  #pruneIn(beforeMs: number, maxRows: number): number {
    const gone = this.#pruneRows.all({ beforeMs, maxRows }) as Scope5[];
    const perCollector = new Map<string, { scope: Scope5; n: number }>();
    for (const s of gone) {
      const key = scopeKey(s);
      const entry = perCollector.get(key);
      if (entry === undefined) perCollector.set(key, { scope: s, n: 1 });
      else entry.n++;
    }
    for (const { scope, n } of perCollector.values()) {
      const state = this.#collector.get(scope) as CollectorRow | undefined;
      if (state === undefined) continue;
      // The bounds of what is left; durable_through_sequence stays: retention is not loss.
      const left = this.#bounds.get(scope) as Pick<
        CollectorRow,
        'first_sequence' | 'last_sequence' | 'first_occurred_at_ms' | 'last_occurred_at_ms'
      >;
      this.#putCollector.run({ ...state, ...left, event_count: Math.max(0, state.event_count - n) });
    }
    return gone.length;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }

  #read(sql: string): Database.Statement {
    let st = this.#reads.get(sql);
    if (st === undefined) {
      // Bounded: the combinations of filters are many, the ones in use few.
      if (this.#reads.size >= kMaxCachedReads) this.#reads.delete(this.#reads.keys().next().value as string);
      this.#reads.set(sql, (st = this.#db.prepare(sql)));
    }
    return st;
  }
}

/**
 * The index a page walks. Each one named here keeps its entries of equal key in rowid (position)
 * order, so the page comes out in ingest order straight from the index, from the cursor on, and
 * stops after limit + 1 rows; left to itself, SQLite (with no statistics) picks an index on the
 * tenant alone and sorts the whole tenant for every page. The most selective exact filter wins:
 * a correlation id, then the exact read scope (host, instance and agent given), then the event
 * name; with none of them the page walks the table itself from the cursor (NOT INDEXED), keeping
 * what matches (the fleet-wide timeline, a collector, time bounds).
 */
function pageIndex(scope: ActivityCallReadScope, query: ActivityCallQuery): string {
  const corr = CORRELATION_BY_SELECTIVITY.find((c) => query[c] !== undefined);
  if (corr !== undefined) return `INDEXED BY activity_events_${corr}`;
  if (scope.host_id !== null && scope.instance_id !== null && scope.agent_id !== null) return 'INDEXED BY activity_events_scope';
  if (query.event_name !== undefined) return 'INDEXED BY activity_events_name';
  return 'NOT INDEXED';
}

function pickScope(s: Scope5): Scope5 {
  return { tenant_id: s.tenant_id, host_id: s.host_id, instance_id: s.instance_id, agent_id: s.agent_id, collector_id: s.collector_id };
}
