/**
 * The ingesting client of activity-crash.test.ts, run as its own process: it posts batches of 100
 * consecutive events to POST /api/v2/activity/ingest without pause and reports each outcome as a
 * JSON line on stdout. Its stdin tells it where the server is (`url http://...`, again after every
 * restart) and when to stop (`stop`).
 *
 * After a failed request (the server was killed) it waits for the next URL and goes on with the
 * next sequences, as a collector that gave up a batch would: if the cut batch was never committed,
 * the server must record and report the skipped run.
 */
import { createInterface } from 'node:readline';
import { kTestScope, scopeHeaders, TestCollector } from '../support/activity-events.js';

const kBatch = 100;
let url: string | null = null;
let urlGeneration = 0;
let stopping = false;
const wakers: (() => void)[] = [];

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.startsWith('url ')) {
    url = line.slice(4).trim();
    urlGeneration++;
  } else if (line === 'stop') stopping = true;
  for (const w of wakers.splice(0)) w();
});

const out = (o: unknown): void => void process.stdout.write(`${JSON.stringify(o)}\n`);
const nextLine = (): Promise<void> => new Promise((r) => wakers.push(r));

const collector = new TestCollector(kTestScope);
for (let batch = 0; !stopping; batch++) {
  while (url === null && !stopping) await nextLine();
  if (stopping) break;
  const first = collector.next;
  const events = collector.batch(kBatch);
  const ids = events.map((e) => e['event_id'] as string);
  const generation = urlGeneration;
  try {
    const res = await fetch(`${url}api/v2/activity/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...scopeHeaders(kTestScope) },
      body: JSON.stringify({ events }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status !== 200) {
      out({ t: 'error', batch, status: res.status, body });
      process.exit(1);
    }
    out({ t: 'ack', batch, first, ids, accepted: body['accepted_event_ids'], jumps: body['sequence_jumps'] });
  } catch (err) {
    out({ t: 'fail', batch, first, ids, error: String((err as Error).cause ?? err).slice(0, 200) });
    // Wait for the restarted server before the next batch.
    while (urlGeneration === generation && !stopping) await nextLine();
  }
}
out({ t: 'stopped' });
