/**
 * The activity store survives `kill -9` (issue 19): a child process ingests without pause while
 * the test kills `sandboxd serve` with SIGKILL at random points, 20 times, restarting it on the
 * same state directory each time. Afterwards:
 * - every acknowledged event is stored exactly once;
 * - nothing is stored that was not sent, and a batch cut by a kill is stored whole or not at all;
 * - each cut batch that is not stored is a recorded gap (coverage) and was reported as a sequence
 *   jump by the next acknowledgement; nothing else is a gap.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, test } from 'node:test';
import { kTestScope, scopeHeaders } from '../support/activity-events.js';
import { distRoot } from '../support/paths.js';
import { spawnServe, type ServeProcess } from '../support/serve-process.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

const INGESTER = join(distRoot, 'test', 'integration', 'activity-crash-ingester.js');
const kKills = 20;

interface Line {
  t: 'ack' | 'fail' | 'error' | 'stopped';
  batch: number;
  first: number;
  ids: string[];
  accepted?: string[];
  jumps?: { expected: number; got: number }[];
}

const stateDir = mkdtempSync(join(tmpdir(), 'sandboxd-activity-crash-'));
const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

function serve(): ServeProcess {
  const server = spawnServe(stateDir, { SVC_ADMIN_ADDR: 'off', LOG_LEVEL: 'warn' });
  children.add(server.child);
  void server.exit.finally(() => children.delete(server.child));
  return server;
}

describe('activity store under kill -9', () => {
  test(`${kKills} SIGKILLs while a client ingests: acknowledged events stored once, cut batches whole or a reported gap`, async () => {
    const ingester = spawn(process.execPath, [INGESTER], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.add(ingester);
    const lines: Line[] = [];
    createInterface({ input: ingester.stdout }).on('line', (l) => lines.push(JSON.parse(l) as Line));
    const acks = () => lines.filter((l) => l.t === 'ack').length;

    for (let round = 0; round <= kKills; round++) {
      const server = serve();
      ingester.stdin.write(`url ${await server.url()}\n`);
      const before = acks();
      // The client is ingesting against this server generation before it is killed.
      await waitFor('an acknowledgement from this server', () => acks() > before, { deadlineMs: DEADLINE_MS.process });
      assert.equal(
        lines.find((l) => l.t === 'error'),
        undefined,
        JSON.stringify(lines.find((l) => l.t === 'error')),
      );
      if (round === kKills) {
        ingester.stdin.write('stop\n');
        await waitFor('the ingester to stop', () => lines.some((l) => l.t === 'stopped'), { deadlineMs: DEADLINE_MS.process });
        const read = await readEverything(await server.url());
        server.child.kill('SIGTERM');
        await server.exit;
        check(lines, read);
        return;
      }
      // A random point: while batches are in flight, mid-commit or between an ack and the next post.
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 250)));
      server.child.kill('SIGKILL');
      await server.exit;
    }
  });
});

interface ReadBack {
  ids: string[];
  sequences: Map<string, number>;
  gaps: [number, number][];
}

async function readEverything(url: string): Promise<ReadBack> {
  const headers = scopeHeaders(kTestScope, false);
  const ids: string[] = [];
  const sequences = new Map<string, number>();
  let cursor: string | null = null;
  for (;;) {
    const res = await fetch(`${url}api/v2/activity/events?limit=5000${cursor === null ? '' : `&cursor=${cursor}`}`, { headers });
    assert.equal(res.status, 200);
    const page = (await res.json()) as {
      events: { event_id: string; integrity: { collector_sequence: number } }[];
      has_more: boolean;
      next_cursor: string | null;
    };
    for (const e of page.events) {
      ids.push(e.event_id);
      sequences.set(e.event_id, e.integrity.collector_sequence);
    }
    if (!page.has_more) break;
    cursor = page.next_cursor;
  }
  const cov = (await (await fetch(`${url}api/v2/activity/coverage`, { headers })).json()) as {
    coverage: { collector_id: string; sequence_gaps: { first_missing_sequence: number; last_missing_sequence: number }[] }[];
  };
  const runtime = cov.coverage.find((c) => c.collector_id === kTestScope.collector_id);
  assert.ok(runtime !== undefined, 'coverage lists the collector');
  return { ids, sequences, gaps: runtime.sequence_gaps.map((g) => [g.first_missing_sequence, g.last_missing_sequence]) };
}

function check(lines: readonly Line[], read: ReadBack): void {
  const stored = new Set(read.ids);
  assert.equal(stored.size, read.ids.length, 'no event is stored twice');
  const acked = lines.filter((l) => l.t === 'ack');
  const failed = lines.filter((l) => l.t === 'fail');
  assert.ok(failed.length >= kKills / 2, `kills cut batches in flight (${failed.length} failed requests)`);
  for (const a of acked) {
    for (const id of a.ids) assert.ok(stored.has(id), `acknowledged event ${id} (batch ${a.batch}) is stored`);
    assert.deepEqual(a.accepted, a.ids, `batch ${a.batch}: the acknowledgement accepted exactly the batch`);
  }
  const sent = new Set(lines.flatMap((l) => l.ids ?? []));
  for (const id of read.ids) assert.ok(sent.has(id), `stored event ${id} was sent`);
  // A cut batch is all or nothing; the missing ones are exactly the gaps.
  const missing: [number, number][] = [];
  for (const f of failed) {
    const present = f.ids.filter((id) => stored.has(id)).length;
    assert.ok(present === 0 || present === f.ids.length, `batch ${f.batch} is stored whole or not at all (${present} of ${f.ids.length})`);
    if (present === 0) missing.push([f.first, f.first + f.ids.length - 1]);
  }
  const merged: [number, number][] = [];
  for (const [a, b] of missing.sort((x, y) => x[0] - y[0])) {
    const last = merged.at(-1);
    if (last !== undefined && last[1] + 1 === a) last[1] = b;
    else merged.push([a, b]);
  }
  assert.deepEqual(read.gaps, merged, 'the recorded gaps are exactly the cut batches that were not stored');
  const reported = acked.flatMap((a) => a.jumps ?? []).map((j): [number, number] => [j.expected, j.got - 1]);
  assert.deepEqual(reported, merged, 'each gap was reported as a jump by the acknowledgement that followed it');
  // And the numbers add up: every sequence from 1 to the last is stored or a gap.
  const last = Math.max(...acked.map((a) => a.first + a.ids.length - 1));
  const covered = read.ids.length + merged.reduce((n, [a, b]) => n + b - a + 1, 0);
  const storedCutBatches = failed.filter((f) => f.ids.every((id) => stored.has(id))).length;
  assert.equal(
    covered,
    last,
    `sequences 1..${last}: each stored or a gap (${storedCutBatches} cut batches were committed before the kill)`,
  );
}
