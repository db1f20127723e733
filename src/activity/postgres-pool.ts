/**
 * The PostgreSQL activity store's connections: a small `pg` pool with the bounds the store needs,
 * the schema brought up to date on open, and the two ways the store uses a connection (a read, a
 * transaction), each turning any failure to reach or use the database into
 * activity.store_unavailable. The password of the URL never leaves open(): `location` and every
 * message name the database without it.
 */
import pg from 'pg';
import { SvcError } from '../core/errors.js';
import { migrateActivitySchema } from './postgres-schema.js';

/** Connections in the pool: ingests take turns anyway; the others serve reads and prune. */
const kPoolSize = 4;
/** A database that does not answer a connection within this is unavailable, ms. */
const kConnectTimeoutMs = 10_000;
/**
 * Server-side bounds on one statement and on a transaction left idle, ms: a wedged peer (a process
 * stopped mid-transaction) cannot hold the ingest lock longer than this.
 */
const kStatementTimeoutMs = 60_000;
const kIdleInTransactionMs = 60_000;

/** bigint as a JS number: every bigint here is a safe integer (sequences, counts, epoch ms). */
const kTypes = new pg.TypeOverrides();
kTypes.setTypeParser(pg.types.builtins.INT8, Number);

/** The URL without its passwords (userinfo, and query parameters such as `password` or `sslpassword`), for logs and /healthz. */
export function redactPostgresUrl(url: string): string {
  const u = new URL(url);
  u.password = '';
  for (const k of [...u.searchParams.keys()]) if (/password/i.test(k)) u.searchParams.delete(k);
  return u.toString();
}

function unavailable(location: string, what: string, err: unknown): SvcError {
  const why = err instanceof Error ? err.message : String(err);
  return new SvcError('activity.store_unavailable', `the activity store (PostgreSQL at ${location}) could not ${what}: ${why}`);
}

export class ActivityPgPool {
  /** The URL without its password. */
  readonly location: string;
  readonly #pool: pg.Pool;
  #closed = false;

  private constructor(pool: pg.Pool, location: string) {
    this.#pool = pool;
    this.location = location;
  }

  /**
   * Connects to `url` (postgres:// or postgresql://) and creates or migrates the schema. Rejects
   * with activity.store_unavailable when the URL is not a PostgreSQL URL, the database cannot be
   * reached, or its schema is newer than this build knows.
   */
  static async open(url: string): Promise<ActivityPgPool> {
    let location: string;
    try {
      location = redactPostgresUrl(url);
      if (!/^postgres(ql)?:$/.test(new URL(url).protocol)) throw new Error('not a postgres:// URL');
    } catch {
      // The message never repeats the URL: it may hold a password.
      throw new SvcError('activity.store_unavailable', 'the activity store URL is not a valid postgres:// or postgresql:// URL');
    }
    const pool = new pg.Pool({
      connectionString: url,
      max: kPoolSize,
      connectionTimeoutMillis: kConnectTimeoutMs,
      statement_timeout: kStatementTimeoutMs,
      idle_in_transaction_session_timeout: kIdleInTransactionMs,
      keepAlive: true,
      application_name: 'sandboxd-activity',
      types: kTypes,
    });
    // A connection that breaks while idle in the pool, or between two queries of ours, emits
    // 'error'; unheard, that would end the process. The pool drops it; the next query reports.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    const db = new ActivityPgPool(pool, location);
    try {
      await db.transaction('migrate its schema', migrateActivitySchema);
    } catch (err) {
      await db.end();
      throw err;
    }
    return db;
  }

  /** Closes every connection; later calls are activity.store_unavailable. Idempotent. */
  async end(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end().catch(() => undefined);
  }

  /** Runs `fn` on a pooled connection outside a transaction (each statement its own snapshot). */
  async read<T>(what: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.#connect(what);
    try {
      const out = await fn(c);
      c.release();
      return out;
    } catch (err) {
      c.release(true);
      throw unavailable(this.location, what, err);
    }
  }

  /**
   * Runs `fn` in a transaction and commits. A refusal (an SvcError of `fn`) rolls back and passes
   * through; any other failure, COMMIT's included, drops the connection (the server rolls back
   * what was open) and is activity.store_unavailable: nothing was acknowledged.
   */
  async transaction<T>(what: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.#connect(what);
    try {
      await c.query('BEGIN');
      const out = await fn(c);
      await c.query('COMMIT');
      c.release();
      return out;
    } catch (err) {
      if (err instanceof SvcError) {
        await c.query('ROLLBACK').then(
          () => c.release(),
          () => c.release(true),
        );
        throw err;
      }
      c.release(true);
      throw unavailable(this.location, what, err);
    }
  }

  async #connect(what: string): Promise<pg.PoolClient> {
    if (this.#closed) throw new SvcError('activity.store_unavailable', `the activity store is closed; could not ${what}`);
    try {
      return await this.#pool.connect();
    } catch (err) {
      throw unavailable(this.location, what, err);
    }
  }
}
