/**
 * Entry of the SQLite activity store's worker (loaded by URL from src/activity/sqlite-store.ts,
 * never imported): opens `<dir>/activity.db` and answers the calls of actors/protocol/activity-calls.ts
 * one at a time, in the order they come. A durable commit (an fsync) blocks this thread, never the
 * main one.
 *
 * An error a call raises is its reply (SvcError as it is; anything else, such as SQLITE_FULL or
 * SQLITE_IOERR, as activity.store_unavailable with SQLite's message); the database stays open. A
 * database that cannot be opened ends the worker with that error, which the main side reports.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { SvcError, toWire, type WireError } from '../../src/core/errors.js';
import { errorMessage } from '../../src/util/error-message.js';
import type { ActivityCall, ActivityCallResults, ActivityReply, ActivityWorkerData } from '../protocol/activity-calls.js';
import { ActivityDb } from './activity-db.js';

if (parentPort === null) throw new Error('sqlite-activity.worker must run in a worker thread');
const port = parentPort;
const db = new ActivityDb((workerData as ActivityWorkerData).dir);

function handle(call: ActivityCall): ActivityCallResults[ActivityCall['op']] {
  switch (call.op) {
    case 'ingest':
      return db.ingest(call.scope, call.events, call.ingestedAtMs);
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

port.on('message', (call: ActivityCall) => {
  let reply: ActivityReply;
  try {
    reply = { t: 'reply', id: call.id, ok: true, value: handle(call) };
  } catch (err) {
    reply = { t: 'reply', id: call.id, ok: false, error: wireError(err) };
  }
  // After the close reply the main side posts nothing more and terminates this thread.
  port.postMessage(reply);
});

port.postMessage({ t: 'ready', path: db.path } satisfies ActivityReply);
