/**
 * The PostgreSQL activity store's schema, as migrations: an ordered list of SQL steps, each applied
 * once and recorded in activity_schema_migrations, under an advisory lock (migrateActivitySchema). A step
 * is never edited once released; a change is a new step at the end. Each step is also written to be
 * harmless if run twice (IF NOT EXISTS), so a half-recorded step cannot wedge a database.
 *
 * Text columns use the "C" collation: ids compare and sort by code point, as in SQLite and in JS,
 * whatever the database's locale.
 */

import type pg from 'pg';

/** The advisory lock opens take turns on (its key hashed from a name that says what it guards). */
const kLockSchema = "SELECT pg_advisory_xact_lock(hashtextextended('sandboxd.activity.schema', 0))";

export interface ActivityPgMigration {
  /** 1, 2, 3, … in order. */
  readonly version: number;
  readonly description: string;
  readonly sql: string;
}

const scope = `
  tenant_id text COLLATE "C" NOT NULL,
  host_id text COLLATE "C" NOT NULL,
  instance_id text COLLATE "C" NOT NULL,
  agent_id text COLLATE "C" NOT NULL,
  collector_id text COLLATE "C" NOT NULL`;
const scopeKey = 'tenant_id, host_id, instance_id, agent_id, collector_id';

export const ACTIVITY_PG_MIGRATIONS: readonly ActivityPgMigration[] = [
  {
    version: 1,
    description: 'events in ingest order, sequence gaps, per-collector coverage',
    sql: `
CREATE TABLE IF NOT EXISTS activity_events (
  position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id text COLLATE "C" NOT NULL UNIQUE,${scope},
  collector_sequence bigint NOT NULL,
  event_name text COLLATE "C" NOT NULL,
  occurred_at_ms bigint NOT NULL,
  ingested_at_ms bigint NOT NULL,
  session_id text COLLATE "C",
  mission_id text COLLATE "C",
  task_id text COLLATE "C",
  tool_call_id text COLLATE "C",
  command_id text COLLATE "C",
  process_id text COLLATE "C",
  trace_id text COLLATE "C",
  canonical text NOT NULL,
  CONSTRAINT activity_events_collector_sequence UNIQUE (${scopeKey}, collector_sequence)
);
CREATE INDEX IF NOT EXISTS activity_events_tenant_position ON activity_events (tenant_id, position);
CREATE INDEX IF NOT EXISTS activity_events_collector_occurred ON activity_events (${scopeKey}, occurred_at_ms);
CREATE INDEX IF NOT EXISTS activity_events_ingested ON activity_events (ingested_at_ms);
CREATE INDEX IF NOT EXISTS activity_events_session ON activity_events (tenant_id, session_id, position) WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS activity_events_mission ON activity_events (tenant_id, mission_id, position) WHERE mission_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS activity_events_task ON activity_events (tenant_id, task_id, position) WHERE task_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS activity_events_trace ON activity_events (tenant_id, trace_id, position) WHERE trace_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS activity_sequence_gaps (${scope},
  first_missing_sequence bigint NOT NULL,
  last_missing_sequence bigint NOT NULL,
  recorded_at_ms bigint NOT NULL,
  PRIMARY KEY (${scopeKey}, first_missing_sequence)
);

CREATE TABLE IF NOT EXISTS activity_collectors (${scope},
  event_count bigint NOT NULL,
  first_sequence bigint,
  last_sequence bigint,
  durable_through_sequence bigint NOT NULL,
  first_occurred_at_ms bigint,
  last_occurred_at_ms bigint,
  last_ingested_at_ms bigint,
  jump_count bigint NOT NULL,
  PRIMARY KEY (${scopeKey})
);`,
  },
];

/**
 * Brings the schema up to date inside the caller's transaction: takes the schema lock (so servers
 * opening one database at once take turns: CREATE TABLE IF NOT EXISTS alone races), then applies
 * each step newer than the recorded version and records it. Throws when the database's schema is
 * newer than this build knows: an older server must not write into it.
 */
export async function migrateActivitySchema(c: pg.PoolClient): Promise<void> {
  await c.query(kLockSchema);
  await c.query(
    'CREATE TABLE IF NOT EXISTS activity_schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
  );
  const { rows } = await c.query<{ v: number }>('SELECT coalesce(max(version), 0)::int4 AS v FROM activity_schema_migrations');
  const current = rows[0]?.v ?? 0;
  const latest = ACTIVITY_PG_MIGRATIONS.at(-1)?.version ?? 0;
  if (current > latest)
    throw new Error(`its schema is at version ${current}, newer than this sandboxd knows (${latest}): run a newer sandboxd`);
  for (const m of ACTIVITY_PG_MIGRATIONS) {
    if (m.version <= current) continue;
    await c.query(m.sql);
    await c.query('INSERT INTO activity_schema_migrations (version, description) VALUES ($1, $2)', [m.version, m.description]);
  }
}
