/**
 * activity-ingest: activity events per second acknowledged by POST /api/v2/activity/ingest of an
 * in-process sandboxd with the default SQLite store (batches of 100, each acknowledged only after
 * its durable commit: WAL, synchronous=FULL), against a ceiling measured in the same run: raw
 * better-sqlite3 inserts of the same rows into the store's own schema (ACTIVITY_DB_SCHEMA: the
 * same table and indexes), one transaction of 100 per commit, same durability, on this thread. So
 * the ratio is what the service costs on top of SQLite (HTTP, validation, the worker hop, the
 * store's per-collector bookkeeping), not what the indexes that serve the queries cost.
 *
 * Eight collectors post at once (one batch in flight each), as collectors on eight agents would,
 * from the bench's client process (their JSON and HTTP cost is not the server's);
 * the ceiling commits the same number of batches one after the other (SQLite has one writer).
 * Value and ceiling take turns in rounds (V C C V C V V C) so a load that drifts hits both alike.
 * After the run every acknowledged event must be readable through GET /api/v2/activity/events
 * exactly once (checked by count per collector via coverage).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { ACTIVITY_DB_SCHEMA } from '../../actors/activity/activity-db.js';
import { activityComponent } from '../../src/activity/component.js';
import { authComponent } from '../../src/auth/component.js';
import { loadConfig } from '../../src/config/load.js';
import { startServer } from '../../src/main.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { kTestScope, scopeHeaders, TestCollector } from '../../test/support/activity-events.js';
import type { ActivityPostResult } from './activity-collectors.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import type { BenchScenario } from '../types.js';

const kBatch = 100;
const kCollectors = 8;
const ORDER = 'VCCVCVVC';

interface Tally {
  events: number;
  ms: number;
}

export const activityIngest: BenchScenario = {
  name: 'activity-ingest',
  description:
    'activity events/s acknowledged through POST /api/v2/activity/ingest (batches of 100, durable SQLite commit, 8 collectors) vs raw SQLite inserts of the same rows with the same durability',
  unit: 'events/s',
  target: { ratioAtLeast: 0.7 },
  async run({ seconds, signal }) {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-bench-activity-'));
    const server = await startServer(
      loadConfig({
        SVC_STATE_DIR: join(dir, 'state'),
        SVC_HTTP_ADDR: '127.0.0.1:0',
        SVC_WS_ADDR: '127.0.0.1:0',
        SVC_GRPC_ADDR: '127.0.0.1:0',
        SVC_ADMIN_ADDR: 'off',
        LOG_LEVEL: 'silent',
      }),
      pino({ level: 'silent' }),
      { components: [authComponent, activityComponent(), httpComponent] },
    );
    const raw = new Database(join(dir, 'raw.db'));
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = FULL');
    // The store's own tables and indexes: the ratio measures the service (HTTP, validation, the
    // worker hop, the store's bookkeeping), not the indexes every query needs.
    raw.exec(ACTIVITY_DB_SCHEMA);
    const insert = raw.prepare(`
      INSERT INTO activity_events (event_id, tenant_id, host_id, instance_id, agent_id, collector_id, collector_sequence, event_name,
        occurred_at_ms, ingested_at_ms, session_id, mission_id, task_id, tool_call_id, command_id, process_id, trace_id, record)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const insertBatch = raw.transaction((rows: Record<string, unknown>[]) => {
      const now = Date.now();
      for (const e of rows) {
        const c = e['correlation'] as Record<string, string | undefined>;
        const seq = (e['integrity'] as { collector_sequence: number }).collector_sequence;
        insert.run(
          e['event_id'],
          c['tenant_id'],
          c['host_id'],
          c['instance_id'],
          c['agent_id'],
          (e['source'] as { collector: string }).collector,
          seq,
          e['event_name'],
          Date.parse(e['occurred_at'] as string),
          now,
          c['session_id'] ?? null,
          c['mission_id'] ?? null,
          c['task_id'] ?? null,
          c['tool_call_id'] ?? null,
          c['command_id'] ?? null,
          c['process_id'] ?? null,
          c['trace_id'] ?? null,
          JSON.stringify(e),
        );
      }
    });
    const base = `http://127.0.0.1:${server.ports.http}`;
    const agents = Array.from({ length: kCollectors }, (_, i) => `bench-${i}`);
    const client = BenchClient.start();
    stopOnAbort(client, signal);
    const rawCollector = new TestCollector({ ...kTestScope, agent_id: 'raw' });
    const value: Tally = { events: 0, ms: 0 };
    const ceiling: Tally = { events: 0, ms: 0 };
    let acked: Record<string, number> = {};
    const problems: string[] = [];

    async function postRound(ms: number, counted: boolean): Promise<void> {
      const r = await client.call<ActivityPostResult>('activity.post', { base, agents, batch: kBatch, ms });
      problems.push(...r.problems);
      acked = r.acked;
      if (counted) {
        value.events += r.events;
        value.ms += r.ms;
      }
    }

    function rawRound(ms: number, counted: boolean): void {
      const t0 = performance.now();
      const deadline = t0 + ms;
      let events = 0;
      do {
        insertBatch(rawCollector.batch(kBatch));
        events += kBatch;
      } while (performance.now() < deadline && !signal.aborted);
      if (counted) {
        ceiling.events += events;
        ceiling.ms += performance.now() - t0;
      }
    }

    try {
      await postRound(300, false);
      rawRound(300, false);
      const roundMs = (seconds * 1000) / ORDER.length;
      for (const m of ORDER) {
        signal.throwIfAborted();
        if (m === 'V') await postRound(roundMs, true);
        else rawRound(roundMs, true);
      }
      const cov = (await (
        await fetch(`${base}/api/v2/activity/coverage`, { headers: { ...scopeHeaders(kTestScope, false), 'x-svc-agent-id': '*' } })
      ).json()) as { coverage: { agent_id: string; event_count: number }[] };
      for (const [agent, n] of Object.entries(acked)) {
        const stored = cov.coverage.find((x) => x.agent_id === agent)?.event_count ?? 0;
        if (stored !== n) problems.push(`${agent}: ${n} events acknowledged, ${stored} stored`);
      }
      const perSecond = (t: Tally) => Math.round((t.events / t.ms) * 1000);
      return {
        value: perSecond(value),
        ceiling: perSecond(ceiling),
        extra: { batch: kBatch, collectors: kCollectors, acknowledged: value.events, raw_inserted: ceiling.events },
        problems,
      };
    } finally {
      await client.stop();
      raw.close();
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }
  },
};
