/**
 * Entry of the SQLite activity store's worker (loaded by URL from src/activity/sqlite-store.ts,
 * never imported): opens `<dir>/activity.db` and answers the calls of actors/protocol/activity-calls.ts
 * in the order they come. A durable commit (an fsync) blocks this thread, never the main one.
 *
 * Group commit: when a call arrives, every call already waiting is taken too (receiveMessageOnPort),
 * and each run of consecutive ingests (up to kMaxGroupEvents events) is stored in one transaction,
 * each batch in a savepoint of its own, so one fsync acknowledges them all. Replies go out only
 * after that commit, in call order; a read after an ingest still sees it.
 *
 * An error a call raises is its reply (SvcError as it is; anything else, such as SQLITE_FULL or
 * SQLITE_IOERR, as activity.store_unavailable with SQLite's message); the database stays open. A
 * database that cannot be opened ends the worker with that error, which the main side reports.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { SvcError, toWire, type WireError } from '../../src/core/errors.js';
import { errorMessage } from '../../src/util/error-message.js';
import type { ActivityCall, ActivityCallResults, ActivityReply, ActivityWorkerData } from '../protocol/activity-calls.js';
import { ActivityDb, type IngestBatch } from './activity-db.js';

/** Events in one group commit at most (a bound on how long one transaction holds the file). */
const kMaxGroupEvents = 5000;

if (parentPort === null) throw new Error('sqlite-activity.worker must run in a worker thread');
const port = parentPort;
const db = new ActivityDb((workerData as ActivityWorkerData).dir);

type IngestCall = Extract<ActivityCall, { op: 'ingest' }>;

function handle(call: Exclude<ActivityCall, IngestCall>): ActivityCallResults[ActivityCall['op']] {
  switch (call.op) {
    case 'events':
      return db.events(call.scope, call.query);
    case 'coverage':
      return db.coverage(call.scope, call.collectorId);
    case 'prune':
      return db.prune(call.beforeMs, call.maxRows);
    case 'close':
      db.close();
      return null;
  }
}

function wireError(err: unknown): WireError {
  if (err instanceof SvcError) return toWire(err);
  return { code: 'activity.store_unavailable', message: `the activity store failed: ${errorMessage(err)}` };
}

function reply(id: number, run: () => ActivityCallResults[ActivityCall['op']]): void {
  let msg: ActivityReply;
  try {
    msg = { t: 'reply', id, ok: true, value: run() };
  } catch (err) {
    msg = { t: 'reply', id, ok: false, error: wireError(err) };
  }
  port.postMessage(msg);
}

/** Stores a run of ingests in one transaction and answers each once it committed. */
function ingestGroup(calls: readonly IngestCall[]): void {
  const batches: IngestBatch[] = calls.map((c) => ({ scope: c.scope, rows: c.rows, nowMs: c.ingestedAtMs }));
  let outcomes;
  try {
    outcomes = db.ingestGroup(batches);
  } catch (err) {
    const error = wireError(err);
    for (const c of calls) port.postMessage({ t: 'reply', id: c.id, ok: false, error } satisfies ActivityReply);
    return;
  }
  outcomes.forEach((o, i) => {
    const id = (calls[i] as IngestCall).id;
    port.postMessage(
      (o.ok
        ? { t: 'reply', id, ok: true, value: o.ack }
        : { t: 'reply', id, ok: false, error: wireError(o.error) }) satisfies ActivityReply,
    );
  });
}

port.on('message', (first: ActivityCall) => {
  const calls: ActivityCall[] = [first];
  for (let next = receiveMessageOnPort(port); next !== undefined; next = receiveMessageOnPort(port))
    calls.push(next.message as ActivityCall);
  for (let i = 0; i < calls.length;) {
    const call = calls[i] as ActivityCall;
    if (call.op !== 'ingest') {
      reply(call.id, () => handle(call));
      i++;
      continue;
    }
    const group: IngestCall[] = [call];
    let events = call.rows.length;
    for (let j = i + 1; j < calls.length; j++) {
      const next = calls[j] as ActivityCall;
      if (next.op !== 'ingest' || events + next.rows.length > kMaxGroupEvents) break;
      group.push(next);
      events += next.rows.length;
    }
    ingestGroup(group);
    i += group.length;
  }
});

port.postMessage({ t: 'ready', path: db.path } satisfies ActivityReply);
