/**
 * The activity store on PostgreSQL (SVC_ACTIVITY_STORE=postgres://...; issue 19 part 4): the port's
 * rules (store.ts) on a few pooled connections of the `pg` driver.
 *
 * - The schema is created and migrated on open: an ordered list of SQL steps, each applied once and
 *   recorded in activity_schema_migrations, all under a transaction-scoped advisory lock, so
 *   servers opening the same database at once take turns instead of racing.
 * - Every ingest is one transaction that first takes one advisory lock for the whole store and
 *   holds it to COMMIT. That serialises the duplicate, conflict and sequence checks (two concurrent
 *   copies of a batch: the second finds the first's rows), and it makes positions (the identity
 *   column that orders pages) follow commit order: without it, a transaction that drew position 10
 *   could commit after a reader had paged past 11, and a cursor would skip it for good. The cost is
 *   that commits of one database do not overlap; one commit per batch of up to 1000 events.
 * - The promise of ingest resolves only after COMMIT returned, with synchronous_commit on for that
 *   transaction whatever the server's default: an acknowledged event is on disk.
 * - Events keep their canonical JSON as text (jsonb would reorder keys and rewrite numbers), with the
 *   filterable fields beside it as columns; times are epoch milliseconds (bigint).
 * - activity_collectors holds each collector's coverage, updated by ingest and prune, so coverage
 *   reads O(collectors) rows, never the events.
 * - Any failure to reach or use the database is activity.store_unavailable (503): nothing was
 *   acknowledged, the caller retries, and a replay is a no-op. The password never leaves open().
 */
import type pg from 'pg';
import { SvcError } from '../core/errors.js';
import { ACTIVITY_SCHEMA_VERSION, type ActivitySequenceGap, type ActivitySequenceJump } from '../wire/activity.js';
import {
  ANY_SCOPE,
  type ActivityCollectorCoverage,
  type ActivityEvent,
  type ActivityEventFilter,
  type ActivityEventQuery,
  type ActivityIngestAck,
  type ActivityReadScope,
  type ActivityScope,
  type ActivityStore,
  type ActivityStorePage,
  type ValidatedEvent,
} from './store.js';
import { ActivityPgPool } from './postgres-pool.js';

/** The advisory lock every ingest and prune holds to COMMIT (its key hashed from a name that says what it guards). */
const kLockIngest = "SELECT pg_advisory_xact_lock(hashtextextended('sandboxd.activity.ingest', 0))";

const SCOPE_COLUMNS = ['tenant_id', 'host_id', 'instance_id', 'agent_id', 'collector_id'] as const;
const CORRELATION_COLUMNS = ['session_id', 'mission_id', 'task_id', 'tool_call_id', 'command_id', 'process_id', 'trace_id'] as const;
/** Exact-match filters of a read, by column. */
const FILTER_COLUMNS = ['event_name', 'collector_id', ...CORRELATION_COLUMNS] as const satisfies readonly (keyof ActivityEventFilter)[];

/** `col = $n` for the scope's exact values (a `*` host, instance or agent matches all), with their params. */
function scopeWhere(scope: ActivityReadScope, params: unknown[], table = ''): string[] {
  const where: string[] = [];
  for (const k of ['tenant_id', 'host_id', 'instance_id', 'agent_id'] as const) {
    if (k !== 'tenant_id' && scope[k] === ANY_SCOPE) continue;
    params.push(scope[k]);
    where.push(`${table}${k} = $${params.length}`);
  }
  return where;
}

interface CollectorRow {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  collector_id: string;
  event_count: number;
  first_sequence: number | null;
  last_sequence: number | null;
  durable_through_sequence: number;
  first_occurred_at_ms: number | null;
  last_occurred_at_ms: number | null;
  last_ingested_at_ms: number | null;
  jump_count: number;
  gaps: [number, number][];
}

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export class PostgresActivityStore implements ActivityStore {
  readonly kind = 'postgres' as const;
  readonly location: string;
  readonly #db: ActivityPgPool;

  private constructor(db: ActivityPgPool) {
    this.#db = db;
    this.location = db.location;
  }

  /**
   * Connects to `url` (postgres:// or postgresql://), creates or migrates the schema, and resolves
   * to the store. Rejects with activity.store_unavailable when the database cannot be reached, the
   * URL is not a PostgreSQL URL, or the schema is newer than this build knows.
   */
  static async open(url: string): Promise<PostgresActivityStore> {
    return new PostgresActivityStore(await ActivityPgPool.open(url));
  }

  async ingest(scope: ActivityScope, events: readonly ValidatedEvent[]): Promise<ActivityIngestAck> {
    const ingestedAtMs = Date.now();
    const scopeValues = SCOPE_COLUMNS.map((k) => scope[k]);
    const scopeMatch = SCOPE_COLUMNS.map((k, i) => `${k} = $${i + 1}`).join(' AND ');
    return this.#db.transaction('store the batch', async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      await c.query(kLockIngest);
      const ids = events.map((v) => v.event.event_id);
      const stored = await c.query<{ event_id: string; canonical: string }>(
        'SELECT event_id, canonical FROM activity_events WHERE event_id = ANY($1::text[])',
        [ids],
      );
      const canonicalOf = new Map(stored.rows.map((r) => [r.event_id, r.canonical]));
      const fresh = events.filter((v) => !canonicalOf.has(v.event.event_id));
      const taken = await c.query<{ collector_sequence: number; event_id: string }>(
        `SELECT collector_sequence, event_id FROM activity_events WHERE ${scopeMatch} AND collector_sequence = ANY($6::bigint[])`,
        [...scopeValues, fresh.map((v) => v.event.integrity.collector_sequence)],
      );
      const ownerOf = new Map(taken.rows.map((r) => [r.collector_sequence, r.event_id]));
      const state = await c.query<{ durable_through_sequence: number }>(
        `SELECT durable_through_sequence FROM activity_collectors WHERE ${scopeMatch}`,
        scopeValues,
      );
      // Every sequence up to the highest ever stored is stored or recorded as a gap (each jump
      // records its run), so the highest is also how far the collector is settled.
      let highest = state.rows[0]?.durable_through_sequence ?? 0;

      const accepted: ValidatedEvent[] = [];
      const duplicates: string[] = [];
      const gaps: ActivitySequenceGap[] = [];
      const jumps: ActivitySequenceJump[] = [];
      for (const [index, v] of events.entries()) {
        const id = v.event.event_id;
        const seq = v.event.integrity.collector_sequence;
        const prior = canonicalOf.get(id);
        if (prior !== undefined) {
          if (prior !== v.canonical)
            throw new SvcError('activity.event_id_conflict', `events[${index}] (${id}): event_id is already stored with other content`, {
              event_index: index,
              event_id: id,
            });
          duplicates.push(id);
          continue;
        }
        if (ownerOf.has(seq))
          throw new SvcError(
            'activity.sequence_conflict',
            `events[${index}] (${id}): collector_sequence ${seq} of collector ${scope.collector_id} is already stored under another event_id`,
            { event_index: index, event_id: id, collector_sequence: seq },
          );
        ownerOf.set(seq, id);
        if (seq > highest + 1) {
          gaps.push({ collector_id: scope.collector_id, first_missing_sequence: highest + 1, last_missing_sequence: seq - 1 });
          jumps.push({ collector_id: scope.collector_id, event_id: id, expected: highest + 1, got: seq });
        }
        highest = Math.max(highest, seq);
        accepted.push(v);
      }

      if (accepted.length > 0) await this.#store(c, scopeValues, accepted, gaps, ingestedAtMs);
      return {
        schema_version: ACTIVITY_SCHEMA_VERSION,
        accepted: accepted.length,
        duplicates: duplicates.length,
        accepted_event_ids: accepted.map((v) => v.event.event_id),
        duplicate_event_ids: duplicates,
        durable_through_sequence: highest,
        sequence_gaps_recorded: gaps,
        sequence_jumps: jumps,
      };
    });
  }

  /** The rows of an ingest: events (positions in batch order), gaps, and the collector's coverage. */
  async #store(
    c: pg.PoolClient,
    scopeValues: readonly string[],
    accepted: readonly ValidatedEvent[],
    gaps: readonly ActivitySequenceGap[],
    ingestedAtMs: number,
  ): Promise<void> {
    const seqs = accepted.map((v) => v.event.integrity.collector_sequence);
    const occurred = accepted.map((v) => Date.parse(v.event.occurred_at));
    const columns = [
      accepted.map((v) => v.event.event_id),
      seqs,
      accepted.map((v) => v.event.event_name),
      occurred,
      ...CORRELATION_COLUMNS.map((k) => accepted.map((v) => v.event.correlation[k] ?? null)),
      accepted.map((v) => v.canonical),
    ];
    const unnested = ['event_id', 'collector_sequence', 'event_name', 'occurred_at_ms', ...CORRELATION_COLUMNS, 'canonical'];
    const arrayTypes = ['text', 'bigint', 'text', 'bigint', ...CORRELATION_COLUMNS.map(() => 'text'), 'text'];
    await c.query(
      `INSERT INTO activity_events (${SCOPE_COLUMNS.join(', ')}, ingested_at_ms, ${unnested.join(', ')})
       SELECT $1, $2, $3, $4, $5, $6, ${unnested.map((k) => `e.${k}`).join(', ')}
       FROM unnest(${arrayTypes.map((t, i) => `$${i + 7}::${t}[]`).join(', ')}) WITH ORDINALITY AS e(${unnested.join(', ')}, ord)
       ORDER BY e.ord`,
      [...scopeValues, ingestedAtMs, ...columns],
    );
    if (gaps.length > 0)
      await c.query(
        `INSERT INTO activity_sequence_gaps (${SCOPE_COLUMNS.join(', ')}, first_missing_sequence, last_missing_sequence, recorded_at_ms)
         SELECT $1, $2, $3, $4, $5, f, l, $8 FROM unnest($6::bigint[], $7::bigint[]) AS g(f, l)`,
        [...scopeValues, gaps.map((g) => g.first_missing_sequence), gaps.map((g) => g.last_missing_sequence), ingestedAtMs],
      );
    await c.query(
      `INSERT INTO activity_collectors AS c (${SCOPE_COLUMNS.join(', ')}, event_count, first_sequence, last_sequence,
         durable_through_sequence, first_occurred_at_ms, last_occurred_at_ms, last_ingested_at_ms, jump_count)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12)
       ON CONFLICT (${SCOPE_COLUMNS.join(', ')}) DO UPDATE SET
         event_count = c.event_count + EXCLUDED.event_count,
         first_sequence = LEAST(c.first_sequence, EXCLUDED.first_sequence),
         last_sequence = GREATEST(c.last_sequence, EXCLUDED.last_sequence),
         durable_through_sequence = GREATEST(c.durable_through_sequence, EXCLUDED.durable_through_sequence),
         first_occurred_at_ms = LEAST(c.first_occurred_at_ms, EXCLUDED.first_occurred_at_ms),
         last_occurred_at_ms = GREATEST(c.last_occurred_at_ms, EXCLUDED.last_occurred_at_ms),
         last_ingested_at_ms = EXCLUDED.last_ingested_at_ms,
         jump_count = c.jump_count + EXCLUDED.jump_count`,
      [
        ...scopeValues,
        accepted.length,
        Math.min(...seqs),
        Math.max(...seqs),
        Math.min(...occurred),
        Math.max(...occurred),
        ingestedAtMs,
        gaps.length,
      ],
    );
  }

  async events(scope: ActivityReadScope, query: ActivityEventQuery): Promise<ActivityStorePage> {
    const params: unknown[] = [];
    const where = scopeWhere(scope, params);
    for (const k of FILTER_COLUMNS) {
      const v = query[k];
      if (v === undefined) continue;
      params.push(v);
      where.push(`${k} = $${params.length}`);
    }
    if (query.since_ms !== undefined) where.push(`occurred_at_ms >= $${params.push(query.since_ms)}`);
    if (query.until_ms !== undefined) where.push(`occurred_at_ms <= $${params.push(query.until_ms)}`);
    return this.#db.read('read events', async (c) => {
      let cursorFound: boolean | null = null;
      if (query.cursor !== undefined) {
        // Only an event of the reader's tenant can be a cursor: another tenant's ids stay unknown.
        const at = await c.query<{ position: number }>('SELECT position FROM activity_events WHERE event_id = $1 AND tenant_id = $2', [
          query.cursor,
          scope.tenant_id,
        ]);
        const position = at.rows[0]?.position;
        cursorFound = position !== undefined;
        if (position !== undefined) where.push(`position > $${params.push(position)}`);
      }
      const { rows } = await c.query<{ event_id: string; canonical: string }>(
        `SELECT event_id, canonical FROM activity_events WHERE ${where.join(' AND ')} ORDER BY position LIMIT $${params.push(query.limit + 1)}`,
        params,
      );
      const page = rows.slice(0, query.limit);
      return {
        events: page.map((r) => JSON.parse(r.canonical) as ActivityEvent),
        next_cursor: page.at(-1)?.event_id ?? null,
        has_more: rows.length > query.limit,
        cursor_found: cursorFound,
      };
    });
  }

  async coverage(scope: ActivityReadScope, collectorId?: string): Promise<ActivityCollectorCoverage[]> {
    const params: unknown[] = [];
    const where = scopeWhere(scope, params, 'c.');
    if (collectorId !== undefined) where.push(`c.collector_id = $${params.push(collectorId)}`);
    const gapOfCollector = SCOPE_COLUMNS.map((k) => `g.${k} = c.${k}`).join(' AND ');
    // One statement, one snapshot: the gaps agree with the counts.
    const { rows } = await this.#db.read('read coverage', (c) =>
      c.query<CollectorRow>(
        `SELECT c.*, coalesce((SELECT json_agg(json_build_array(g.first_missing_sequence, g.last_missing_sequence)
                                  ORDER BY g.first_missing_sequence)
                               FROM activity_sequence_gaps g WHERE ${gapOfCollector}), '[]'::json) AS gaps
         FROM activity_collectors c WHERE ${where.join(' AND ')}
         ORDER BY c.host_id, c.instance_id, c.agent_id, c.collector_id`,
        params,
      ),
    );
    return rows.map((r) => ({
      tenant_id: r.tenant_id,
      host_id: r.host_id,
      instance_id: r.instance_id,
      agent_id: r.agent_id,
      collector_id: r.collector_id,
      event_count: r.event_count,
      first_sequence: r.first_sequence,
      last_sequence: r.last_sequence,
      durable_through_sequence: r.durable_through_sequence,
      first_occurred_at: isoOrNull(r.first_occurred_at_ms),
      last_occurred_at: isoOrNull(r.last_occurred_at_ms),
      last_ingested_at: isoOrNull(r.last_ingested_at_ms),
      sequence_gaps: r.gaps.map(([first, last]) => ({
        collector_id: r.collector_id,
        first_missing_sequence: first,
        last_missing_sequence: last,
      })),
      jump_count: r.jump_count,
    }));
  }

  async prune(beforeMs: number, maxRows: number): Promise<number> {
    if (maxRows <= 0) return 0;
    return this.#db.transaction('prune events', async (c) => {
      // Under the ingest lock: the coverage rows change with the events, as ingest changes them.
      await c.query(kLockIngest);
      const { rows } = await c.query<{
        tenant_id: string;
        host_id: string;
        instance_id: string;
        agent_id: string;
        collector_id: string;
        n: number;
      }>(
        `WITH gone AS (
           DELETE FROM activity_events WHERE position IN
             (SELECT position FROM activity_events WHERE ingested_at_ms < $1 ORDER BY position LIMIT $2)
           RETURNING ${SCOPE_COLUMNS.join(', ')})
         SELECT ${SCOPE_COLUMNS.join(', ')}, count(*) AS n FROM gone GROUP BY ${SCOPE_COLUMNS.join(', ')}`,
        [beforeMs, maxRows],
      );
      if (rows.length === 0) return 0;
      const ofCollector = SCOPE_COLUMNS.map((k) => `e.${k} = c.${k}`).join(' AND ');
      const edge = (fn: 'min' | 'max', col: string): string => `(SELECT ${fn}(e.${col}) FROM activity_events e WHERE ${ofCollector})`;
      // The sequence and time bounds come from what is left (index lookups); durable_through stays:
      // retention is not loss.
      await c.query(
        `UPDATE activity_collectors c SET
           event_count = c.event_count - g.n,
           first_sequence = ${edge('min', 'collector_sequence')},
           last_sequence = ${edge('max', 'collector_sequence')},
           first_occurred_at_ms = ${edge('min', 'occurred_at_ms')},
           last_occurred_at_ms = ${edge('max', 'occurred_at_ms')}
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) AS g(${SCOPE_COLUMNS.join(', ')}, n)
         WHERE ${SCOPE_COLUMNS.map((k) => `c.${k} = g.${k}`).join(' AND ')}`,
        [...SCOPE_COLUMNS.map((k) => rows.map((r) => r[k])), rows.map((r) => r.n)],
      );
      return rows.reduce((sum, r) => sum + r.n, 0);
    });
  }

  async close(): Promise<void> {
    await this.#db.end();
  }
}
