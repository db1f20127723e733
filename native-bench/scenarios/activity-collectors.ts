/**
 * The activity collectors of the activity-ingest scenario, run in the bench client process (so the
 * JSON they build and the HTTP they speak cost the client's CPU, not the server's): each collector
 * posts batches of consecutive events to POST /api/v2/activity/ingest, one batch in flight, until
 * the round's time is up. Collectors keep their sequence between rounds.
 */
import { performance } from 'node:perf_hooks';
import { kTestScope, scopeHeaders, TestCollector } from '../../test/support/activity-events.js';

const collectors = new Map<string, TestCollector>();
/** Events acknowledged per agent id, over all rounds. */
const acked = new Map<string, number>();

export interface ActivityPostResult {
  readonly events: number;
  readonly ms: number;
  readonly acked: Record<string, number>;
  readonly problems: string[];
}

/** args: base (http://host:port), agents (one collector each), batch, ms. */
export async function postActivity(a: Record<string, unknown>): Promise<ActivityPostResult> {
  const base = String(a['base']);
  const agents = a['agents'] as string[];
  const batch = Number(a['batch']);
  const t0 = performance.now();
  const deadline = t0 + Number(a['ms']);
  const problems: string[] = [];
  let events = 0;
  await Promise.all(
    agents.map(async (agent) => {
      let c = collectors.get(agent);
      if (c === undefined) collectors.set(agent, (c = new TestCollector({ ...kTestScope, agent_id: agent })));
      do {
        const res = await fetch(`${base}/api/v2/activity/ingest`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...scopeHeaders(c.scope) },
          body: JSON.stringify({ events: c.batch(batch) }),
        });
        const ack = (await res.json()) as { accepted?: number };
        if (res.status !== 200 || ack.accepted !== batch)
          problems.push(`ingest answered ${res.status} ${JSON.stringify(ack).slice(0, 200)}`);
        else {
          events += batch;
          acked.set(agent, (acked.get(agent) ?? 0) + batch);
        }
      } while (performance.now() < deadline && problems.length === 0);
    }),
  );
  return { events, ms: performance.now() - t0, acked: Object.fromEntries(acked), problems };
}
