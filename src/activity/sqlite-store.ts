/**
 * The SQLite activity store (SVC_ACTIVITY_STORE=sqlite, the default): `<dir>/activity.db`, where the
 * component passes `<SVC_STATE_DIR>/activity` as dir. This is the main thread's side; the SQL runs in
 * a worker thread of its own (actors/activity/sqlite-activity.worker.ts, with actors/activity/activity-db.ts),
 * because a durable commit waits for an fsync and the main thread, which runs the streaming fanout,
 * must never block (DESIGN.md).
 *
 * Every call is one request on the worker's port, answered by id; the worker takes them in call
 * order, so an ingest that resolved is visible to every later read. Ingests that wait together
 * share one commit (group commit: one fsync for all; each batch still all or nothing on its own). If the worker dies,
 * every pending call rejects with activity.store_unavailable (nothing was acknowledged) and the next
 * call starts a new worker, which reopens the file. close() lets the calls made before it finish,
 * closes the database and ends the worker; calls after it reject with activity.store_unavailable.
 *
 * The worker does not keep the process alive (it is ref'd only while it opens the database and
 * while a call is pending).
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import {
  activityRowOf,
  type ActivityCall,
  type ActivityCallReadScope,
  type ActivityCallResults,
  type ActivityReply,
  type ActivityWorkerData,
} from '../../actors/protocol/activity-calls.js';
import { SvcError, fromWire } from '../core/errors.js';
import { errorMessage } from '../util/error-message.js';
import {
  ANY_SCOPE,
  type ActivityCollectorCoverage,
  type ActivityEventQuery,
  type ActivityIngestAck,
  type ActivityReadScope,
  type ActivityScope,
  type ActivityStore,
  type ActivityStorePage,
  type ValidatedEvent,
} from './store.js';

/** The database file in the store's directory. */
export const ACTIVITY_SQLITE_FILE = 'activity.db';

const kWorkerUrl = new URL('../../actors/activity/sqlite-activity.worker.js', import.meta.url);

export interface SqliteActivityStoreOptions {
  /** Clock, epoch ms: what ingest records as ingested_at (retention prunes by it). Default Date.now. */
  readonly now?: () => number;
  /** The worker entry; tests replace it. */
  readonly workerUrl?: URL;
}

type Op = ActivityCall['op'];
/** A call without its id (the id is added when it is posted). */
type CallOf<K extends Op> = Omit<Extract<ActivityCall, { op: K }>, 'id'>;

interface Pending {
  resolve: (value: ActivityCallResults[Op]) => void;
  reject: (err: Error) => void;
}

const unavailable = (message: string): SvcError => new SvcError('activity.store_unavailable', message);

export class SqliteActivityStore implements ActivityStore {
  readonly kind = 'sqlite' as const;
  readonly location: string;
  readonly #data: ActivityWorkerData;
  readonly #url: URL;
  readonly #now: () => number;
  readonly #pending = new Map<number, Pending>();
  #worker: Worker | undefined;
  #ready: Promise<void> = Promise.resolve();
  #nextId = 1;
  #closing: Promise<void> | undefined;

  /**
   * Opens (creating) `<dir>/activity.db` in the store's worker and resolves once it is open;
   * rejects with activity.store_unavailable when it cannot be (the directory or the file is not usable).
   */
  static async open(dir: string, opts: SqliteActivityStoreOptions = {}): Promise<SqliteActivityStore> {
    const store = new SqliteActivityStore(dir, opts);
    try {
      await store.ready();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /** Starts the worker, which opens the database in the background (calls made meanwhile wait for it). */
  constructor(dir: string, opts: SqliteActivityStoreOptions = {}) {
    this.location = join(dir, ACTIVITY_SQLITE_FILE);
    this.#data = { dir };
    this.#url = opts.workerUrl ?? kWorkerUrl;
    this.#now = opts.now ?? Date.now;
    this.#launch();
  }

  /** Resolves once the current worker has the database open; rejects with activity.store_unavailable if it died first. */
  ready(): Promise<void> {
    return this.#ready;
  }

  ingest(scope: ActivityScope, events: readonly ValidatedEvent[]): Promise<ActivityIngestAck> {
    const { tenant_id, host_id, instance_id, agent_id, collector_id } = scope;
    return this.#call<'ingest'>({
      op: 'ingest',
      scope: { tenant_id, host_id, instance_id, agent_id, collector_id },
      rows: events.map((v) => activityRowOf(v.event)),
      ingestedAtMs: this.#now(),
    });
  }

  events(scope: ActivityReadScope, query: ActivityEventQuery): Promise<ActivityStorePage> {
    return this.#call<'events'>({ op: 'events', scope: readScope(scope), query });
  }

  coverage(scope: ActivityReadScope, collectorId?: string): Promise<ActivityCollectorCoverage[]> {
    return this.#call<'coverage'>({ op: 'coverage', scope: readScope(scope), collectorId: collectorId ?? null });
  }

  prune(beforeMs: number, maxRows: number): Promise<number> {
    return this.#call<'prune'>({ op: 'prune', beforeMs, maxRows });
  }

  /** Finishes the calls made before it, closes the database and ends the worker. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const worker = this.#worker;
      if (worker === undefined) return;
      try {
        await this.#post<'close'>(worker, { op: 'close' });
      } catch {
        // The worker died meanwhile: there is nothing left to close.
      }
      this.#worker = undefined;
      await worker.terminate();
    })();
    return this.#closing;
  }

  #call<K extends Op>(call: CallOf<K>): Promise<ActivityCallResults[K]> {
    if (this.#closing !== undefined) return Promise.reject(unavailable('the activity store is closed'));
    if (this.#worker === undefined) this.#launch();
    return this.#post(this.#worker as Worker, call);
  }

  #post<K extends Op>(worker: Worker, call: CallOf<K>): Promise<ActivityCallResults[K]> {
    const id = this.#nextId++;
    return new Promise<ActivityCallResults[K]>((resolve, reject) => {
      try {
        worker.postMessage({ ...call, id });
      } catch (err) {
        reject(unavailable(`the activity store could not take the call: ${errorMessage(err)}`));
        return;
      }
      this.#pending.set(id, { resolve: resolve as Pending['resolve'], reject });
      // A pending answer keeps the process alive, so `await store.ingest()` cannot be cut short.
      if (this.#pending.size === 1) worker.ref();
    });
  }

  #launch(): void {
    // Ref'd until the database is open, so `await SqliteActivityStore.open()` cannot be cut short either.
    const worker = new Worker(this.#url, { workerData: this.#data, name: 'activity-store' });
    this.#worker = worker;
    let lastError: unknown;
    let markReady: () => void = () => undefined;
    let failReady: (err: Error) => void = () => undefined;
    this.#ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    // Nobody need wait for ready(): calls report the same failure.
    this.#ready.catch(() => undefined);
    worker.on('message', (msg: ActivityReply) => {
      if (msg.t === 'ready') {
        if (this.#pending.size === 0) worker.unref();
        markReady();
        return;
      }
      const pending = this.#pending.get(msg.id);
      if (pending === undefined) return;
      this.#pending.delete(msg.id);
      if (this.#pending.size === 0) worker.unref();
      if (msg.ok) pending.resolve(msg.value);
      else pending.reject(fromWire(msg.error));
    });
    worker.on('error', (err) => {
      lastError = err;
    });
    worker.on('exit', (code) => {
      if (this.#worker === worker) this.#worker = undefined;
      const err = unavailable(
        `the activity store's worker stopped (exit code ${code}${lastError === undefined ? '' : `: ${errorMessage(lastError)}`}); nothing pending was acknowledged`,
      );
      failReady(err);
      const all = [...this.#pending.values()];
      this.#pending.clear();
      for (const p of all) p.reject(err);
    });
  }
}

function readScope(s: ActivityReadScope): ActivityCallReadScope {
  const any = (v: string): string | null => (v === ANY_SCOPE ? null : v);
  return { tenant_id: s.tenant_id, host_id: any(s.host_id), instance_id: any(s.instance_id), agent_id: any(s.agent_id) };
}
