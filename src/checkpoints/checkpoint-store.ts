/**
 * Checkpoints and warm pools, durable: `$SVC_STATE_DIR/checkpoints/checkpoints.db` (better-sqlite3,
 * WAL, synchronous=FULL through openDurableDb), with every record also held in memory. Each change
 * is one small write on the main thread, at a checkpoint's or a pool's change of state: a handful
 * per restore, never per output chunk. Claiming a slot is a synchronous read-modify-write in one
 * turn of the event loop, so two handoffs can never take the same slot.
 *
 * The images themselves live next to the file: `<dir>/<checkpoint id>/domain.save` (the saved VM)
 * and `<dir>/<checkpoint id>/disk/` (its disk at the save: each restore starts from a fresh copy).
 *
 * At open, a checkpoint left `creating` or `restoring` by a process that died is marked failed
 * (`sandboxd restarted while …`): nothing resumes it, and its outcome must be checked on the VM.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { TransitionLogger } from '../core/state-machine.js';
import { openDurableDb } from '../util/durable-db.js';
import type { CheckpointStatus } from '../wire/checkpoints.js';
import { moveCheckpoint } from './checkpoint-state.js';

export const CHECKPOINTS_DB_FILE = 'checkpoints.db';
const kSchemaVersion = 1;

/** What a refill or a restore needs to know of the VM a checkpoint was taken of. */
export interface VmTemplate {
  readonly profile: string;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
}

export interface CheckpointRecord {
  readonly id: string;
  readonly vm: string;
  readonly host: string;
  readonly status: CheckpointStatus;
  readonly pool: string | null;
  readonly template: VmTemplate;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  readonly restoredInstanceId: string | null;
  readonly error: string | null;
}

export interface PoolRecord {
  readonly name: string;
  readonly targetSize: number;
  readonly template: VmTemplate;
  readonly createdAtMs: number;
  readonly handoffsTotal: number;
}

interface CheckpointRow {
  id: string;
  vm: string;
  host: string;
  status: string;
  pool: string | null;
  template: string;
  created_at_ms: number;
  updated_at_ms: number;
  restored_instance_id: string | null;
  error: string | null;
}

export class CheckpointStore {
  readonly dir: string;
  readonly #db: Database.Database;
  readonly #logger: TransitionLogger | undefined;
  readonly #checkpoints = new Map<string, CheckpointRecord>();
  readonly #pools = new Map<string, PoolRecord>();
  readonly #putCheckpoint: Database.Statement<
    [string, string, string, string, string | null, string, number, number, string | null, string | null]
  >;
  readonly #putPool: Database.Statement<[string, number, string, number, number]>;
  readonly #now: () => number;

  /** Opens (creating) `<dir>/checkpoints.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string, opts: { logger?: TransitionLogger; now?: () => number } = {}) {
    this.dir = dir;
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#db = openDurableDb(dir, CHECKPOINTS_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, CHECKPOINTS_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS checkpoints (
        id TEXT PRIMARY KEY, vm TEXT NOT NULL, host TEXT NOT NULL, status TEXT NOT NULL, pool TEXT,
        template TEXT NOT NULL, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL,
        restored_instance_id TEXT, error TEXT
      );
      CREATE TABLE IF NOT EXISTS pools (
        name TEXT PRIMARY KEY, target_size INTEGER NOT NULL, template TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL, handoffs_total INTEGER NOT NULL
      );
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#putCheckpoint = this.#db.prepare(
      'INSERT OR REPLACE INTO checkpoints (id, vm, host, status, pool, template, created_at_ms, updated_at_ms, restored_instance_id, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#putPool = this.#db.prepare(
      'INSERT OR REPLACE INTO pools (name, target_size, template, created_at_ms, handoffs_total) VALUES (?, ?, ?, ?, ?)',
    );
    for (const r of this.#db.prepare('SELECT * FROM checkpoints ORDER BY created_at_ms, id').all() as CheckpointRow[]) {
      const rec: CheckpointRecord = {
        id: r.id,
        vm: r.vm,
        host: r.host,
        status: r.status as CheckpointStatus,
        pool: r.pool,
        template: JSON.parse(r.template) as VmTemplate,
        createdAtMs: r.created_at_ms,
        updatedAtMs: r.updated_at_ms,
        restoredInstanceId: r.restored_instance_id,
        error: r.error,
      };
      this.#checkpoints.set(rec.id, rec);
      if (rec.status === 'creating' || rec.status === 'restoring') {
        this.move(rec.id, [rec.status], 'failed', 'server_restarted', {
          error: `sandboxd restarted while this checkpoint was ${rec.status === 'creating' ? 'being taken' : 'being restored'}; check VM '${rec.vm}'`,
        });
      }
    }
    const pools = this.#db.prepare('SELECT * FROM pools ORDER BY created_at_ms').all() as {
      name: string;
      target_size: number;
      template: string;
      created_at_ms: number;
      handoffs_total: number;
    }[];
    for (const p of pools) {
      this.#pools.set(p.name, {
        name: p.name,
        targetSize: p.target_size,
        template: JSON.parse(p.template) as VmTemplate,
        createdAtMs: p.created_at_ms,
        handoffsTotal: p.handoffs_total,
      });
    }
  }

  /** Where a checkpoint's image and disk live. */
  imageDir(id: string): string {
    return join(this.dir, id);
  }

  get(id: string): CheckpointRecord | undefined {
    return this.#checkpoints.get(id);
  }

  /** Every checkpoint, oldest first. */
  list(): CheckpointRecord[] {
    return [...this.#checkpoints.values()];
  }

  /** Records a new checkpoint in `creating`. False when the id is taken. */
  add(rec: Omit<CheckpointRecord, 'status' | 'pool' | 'createdAtMs' | 'updatedAtMs' | 'restoredInstanceId' | 'error'>): boolean {
    if (this.#checkpoints.has(rec.id)) return false;
    const now = this.#now();
    this.#save({ ...rec, status: 'creating', pool: null, createdAtMs: now, updatedAtMs: now, restoredInstanceId: null, error: null });
    return true;
  }

  /** Moves a checkpoint (guarded by the state table); `fields` change with it. Returns whether it moved. */
  move(
    id: string,
    from: readonly CheckpointStatus[],
    to: CheckpointStatus,
    cause: string,
    fields: Partial<Pick<CheckpointRecord, 'pool' | 'restoredInstanceId' | 'error' | 'host'>> = {},
  ): boolean {
    const rec = this.#checkpoints.get(id);
    if (rec === undefined || !moveCheckpoint(id, rec.status, from, to, cause, this.#logger)) return false;
    this.#save({ ...rec, ...fields, status: to, updatedAtMs: this.#now() });
    return true;
  }

  pool(name: string): PoolRecord | undefined {
    return this.#pools.get(name);
  }

  pools(): PoolRecord[] {
    return [...this.#pools.values()];
  }

  /** The ready slots of a pool, oldest first. */
  slots(pool: string): CheckpointRecord[] {
    return this.list().filter((c) => c.pool === pool && c.status === 'reserved');
  }

  /** Creates a pool and reserves `ids` (all `ready`) as its slots, in one transaction. False when the name is taken. */
  addPool(p: Omit<PoolRecord, 'createdAtMs' | 'handoffsTotal'>, ids: readonly string[]): boolean {
    if (this.#pools.has(p.name)) return false;
    this.#db.transaction(() => {
      this.#savePool({ ...p, createdAtMs: this.#now(), handoffsTotal: 0 });
      for (const id of ids) this.move(id, ['ready'], 'reserved', 'pool_created', { pool: p.name });
    })();
    return true;
  }

  /** Takes the oldest ready slot of the pool (reserved → restoring), or undefined when it has none. */
  claim(pool: string): CheckpointRecord | undefined {
    const slot = this.slots(pool)[0];
    if (slot === undefined) return undefined;
    this.move(slot.id, ['reserved'], 'restoring', 'handoff_claimed');
    const p = this.#pools.get(pool);
    if (p !== undefined) this.#savePool({ ...p, handoffsTotal: p.handoffsTotal + 1 });
    return this.#checkpoints.get(slot.id);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }

  #save(r: CheckpointRecord): void {
    this.#putCheckpoint.run(
      r.id,
      r.vm,
      r.host,
      r.status,
      r.pool,
      JSON.stringify(r.template),
      r.createdAtMs,
      r.updatedAtMs,
      r.restoredInstanceId,
      r.error,
    );
    this.#checkpoints.set(r.id, r);
  }

  #savePool(p: PoolRecord): void {
    this.#putPool.run(p.name, p.targetSize, JSON.stringify(p.template), p.createdAtMs, p.handoffsTotal);
    this.#pools.set(p.name, p);
  }
}
