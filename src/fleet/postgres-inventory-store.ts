/**
 * The fleet inventory on PostgreSQL: used when SVC_ACTIVITY_STORE is a postgres:// URL (the
 * activity store's database; issue 21 part 1), in two tables of that database next to the
 * activity tables.
 *
 * - **One inventory per host.** Rows are keyed by a scope, the server's host id (SVC_HOST_ID, default
 *   the host name), so servers of several hosts share one database without sharing an inventory.
 *   Two servers with the same scope would both number revisions: the first to open holds a session
 *   advisory lock on the scope for its lifetime and a second is refused at start, by name.
 * - **Write-behind, in order.** Like the SQLite store, every record is held in memory and a change
 *   takes its revision synchronously on the main thread (so 100 concurrent changes take 100
 *   increasing revisions); the change is then queued and one writer commits the queue in order,
 *   each batch one transaction (rows, then the stored revision raised to the batch's last). A
 *   database that goes away keeps the changes queued and retried (with a back-off, one log line
 *   per failure streak); `committed()` resolves once every change made before the call is durable,
 *   and the routes that record what an operator asked for wait for it before they answer
 *   (intent-middleware.ts).
 * - A store that cannot reach its database at start fails the start with the reason, the URL
 *   named without its password.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { redactPostgresUrl } from '../activity/postgres-pool.js';
import { errorMessage } from '../util/error-message.js';
import { HeldInventory, recordOf, type HeldState, type InventoryChange } from './inventory-store.js';

/** bigint as a JS number: revisions are safe integers. */
const kTypes = new pg.TypeOverrides();
kTypes.setTypeParser(pg.types.builtins.INT8, Number);

/** The advisory-lock key space of the inventory (hashtextextended of this prefix and the scope). */
const kLockPrefix = 'sandboxd-fleet-inventory:';
/** A database that does not answer a connection within this is unreachable, ms. */
const kConnectTimeoutMs = 10_000;
/** Retry back-off of a failed batch: first wait and the most, ms. */
const kRetryFirstMs = 200;
const kRetryMostMs = 5_000;
/** How long close() waits for the queue to drain before it gives up on it, ms. */
const kCloseDrainMs = 5_000;

const kSchema = `
  CREATE TABLE IF NOT EXISTS fleet_inventory_meta (
    scope TEXT NOT NULL, key TEXT NOT NULL, value BIGINT NOT NULL, PRIMARY KEY (scope, key));
  CREATE TABLE IF NOT EXISTS fleet_workloads (
    scope TEXT NOT NULL, name TEXT NOT NULL, content TEXT NOT NULL, revision BIGINT NOT NULL, PRIMARY KEY (scope, name));
`;

type Queued = InventoryChange | { readonly adopted: true };

export class PostgresInventoryStore extends HeldInventory {
  readonly kind = 'postgres' as const;
  /** The database URL without its password. */
  readonly location: string;
  readonly scope: string;
  readonly #pool: pg.Pool;
  /** The connection holding the scope's advisory lock (released with it at close). */
  readonly #lock: pg.PoolClient;
  readonly #logger: Logger | undefined;
  readonly #queue: Queued[] = [];
  /** Changes queued since open, and how many of them are durable. */
  #queued = 0;
  #durable = 0;
  readonly #waiters: { upTo: number; resolve: () => void }[] = [];
  #writing = false;
  #closed = false;

  private constructor(
    db: { pool: pg.Pool; lock: pg.PoolClient; location: string; scope: string; logger: Logger | undefined },
    held: HeldState,
  ) {
    super(held);
    this.#pool = db.pool;
    this.#lock = db.lock;
    this.location = db.location;
    this.scope = db.scope;
    this.#logger = db.logger;
  }

  /**
   * Connects, creates the tables when missing, takes the scope's lock and loads the scope's
   * inventory. Rejects (the URL without its password in the message) when the database cannot be
   * reached or another server holds the scope.
   */
  static async open(url: string, scope: string, logger?: Logger): Promise<PostgresInventoryStore> {
    const location = redactPostgresUrl(url);
    const pool = new pg.Pool({
      connectionString: url,
      max: 3,
      connectionTimeoutMillis: kConnectTimeoutMs,
      keepAlive: true,
      application_name: 'sandboxd-fleet',
      types: kTypes,
    });
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    let lock: pg.PoolClient | undefined;
    try {
      lock = await pool.connect();
      const got = await lock.query<{ held: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS held', [
        kLockPrefix + scope,
      ]);
      if (got.rows[0]?.held !== true)
        throw new Error(
          `another sandboxd holds the fleet inventory of host '${scope}' in this database (set SVC_HOST_ID to tell hosts apart)`,
        );
      await lock.query('BEGIN');
      // Two servers creating the tables at once would race in the catalog: one at a time.
      await lock.query("SELECT pg_advisory_xact_lock(hashtextextended('sandboxd-fleet-schema', 0))");
      await lock.query(kSchema);
      await lock.query('COMMIT');
      const meta = await lock.query<{ key: string; value: number }>('SELECT key, value FROM fleet_inventory_meta WHERE scope = $1', [
        scope,
      ]);
      const values = new Map(meta.rows.map((m) => [m.key, m.value]));
      const rows = await lock.query<{ name: string; content: string; revision: number }>(
        'SELECT name, content, revision FROM fleet_workloads WHERE scope = $1 ORDER BY name',
        [scope],
      );
      return new PostgresInventoryStore(
        { pool, lock, location, scope, logger },
        {
          records: rows.rows.map((r) => recordOf(r.name, r.content, r.revision)),
          revision: values.get('revision') ?? 0,
          adopted: values.get('adopted') === 1,
        },
      );
    } catch (err) {
      lock?.release(true);
      await pool.end().catch(() => undefined);
      throw new Error(`the fleet inventory (PostgreSQL at ${location}) could not open: ${errorMessage(err)}`, { cause: err });
    }
  }

  protected persist(change: InventoryChange): void {
    this.#enqueue(change);
  }

  protected persistAdopted(): void {
    this.#enqueue({ adopted: true });
  }

  override backlog(): number {
    return this.#queued - this.#durable;
  }

  override committed(): Promise<void> {
    const upTo = this.#queued;
    if (this.#durable >= upTo) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ upTo, resolve }));
  }

  #enqueue(q: Queued): void {
    if (this.#closed) throw new Error('the fleet inventory store is closed');
    this.#queue.push(q);
    this.#queued++;
    if (!this.#writing) void this.#drain();
  }

  /** The one writer: commits the queue in order, a batch per transaction, retrying a failed batch. */
  async #drain(): Promise<void> {
    this.#writing = true;
    let wait = kRetryFirstMs;
    let failing = false;
    while (this.#queue.length > 0) {
      const batch = this.#queue.slice();
      try {
        await this.#commit(batch);
      } catch (err) {
        if (this.#closed) break;
        if (!failing)
          this.#logger?.warn({ err: errorMessage(err), backlog: this.backlog() }, 'fleet inventory: PostgreSQL write failed; retrying');
        failing = true;
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(kRetryMostMs, wait * 2);
        continue;
      }
      if (failing) this.#logger?.info({ backlog: this.backlog() }, 'fleet inventory: PostgreSQL writes resumed');
      failing = false;
      wait = kRetryFirstMs;
      this.#queue.splice(0, batch.length);
      this.#durable += batch.length;
      for (let i = this.#waiters.length - 1; i >= 0; i--) {
        const w = this.#waiters[i]!;
        if (w.upTo <= this.#durable) {
          this.#waiters.splice(i, 1);
          w.resolve();
        }
      }
    }
    this.#writing = false;
  }

  async #commit(batch: readonly Queued[]): Promise<void> {
    const client = await this.#pool.connect();
    let ok = false;
    try {
      await client.query('BEGIN');
      let revision = 0;
      for (const q of batch) {
        if ('adopted' in q) {
          await client.query(
            "INSERT INTO fleet_inventory_meta (scope, key, value) VALUES ($1, 'adopted', 1) ON CONFLICT (scope, key) DO UPDATE SET value = 1",
            [this.scope],
          );
          continue;
        }
        revision = q.revision;
        if (q.content === null) await client.query('DELETE FROM fleet_workloads WHERE scope = $1 AND name = $2', [this.scope, q.name]);
        else
          await client.query(
            `INSERT INTO fleet_workloads (scope, name, content, revision) VALUES ($1, $2, $3, $4)
             ON CONFLICT (scope, name) DO UPDATE SET content = EXCLUDED.content, revision = EXCLUDED.revision`,
            [this.scope, q.name, JSON.stringify(q.content), q.revision],
          );
      }
      if (revision > 0)
        await client.query(
          `INSERT INTO fleet_inventory_meta (scope, key, value) VALUES ($1, 'revision', $2)
           ON CONFLICT (scope, key) DO UPDATE SET value = GREATEST(fleet_inventory_meta.value, EXCLUDED.value)`,
          [this.scope, revision],
        );
      await client.query('COMMIT');
      ok = true;
    } finally {
      if (!ok) await client.query('ROLLBACK').catch(() => undefined);
      client.release(!ok);
    }
  }

  /** Waits (at most 5 s) for the queue to drain, then releases the lock and the connections. */
  async close(): Promise<void> {
    if (this.#closed) return;
    const drained = this.committed();
    await Promise.race([drained, new Promise((r) => setTimeout(r, kCloseDrainMs).unref())]);
    if (this.backlog() > 0) this.#logger?.error({ backlog: this.backlog() }, 'fleet inventory: closed with changes not yet in PostgreSQL');
    this.#closed = true;
    for (const w of this.#waiters.splice(0)) w.resolve();
    await this.#lock.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    this.#lock.release();
    await this.#pool.end().catch(() => undefined);
  }
}
