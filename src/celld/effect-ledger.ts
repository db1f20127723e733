/**
 * The effect ledger: `$SVC_STATE_DIR/celld/effects.db` (better-sqlite3, WAL, synchronous=FULL via
 * openDurableDb). One row per accepted mutating cell command, keyed by the client's operation_id,
 * holding the request hash (src/celld/document.ts), the stored request, the operation of the one
 * operations store that carries the effect, and the outcome. The row is written before the effect
 * starts, so:
 *
 * - a replay of the exact stored document finds the row and answers its outcome: no second effect;
 * - the same operation_id with another document is a conflict (celld.operation_conflict);
 * - a generation-only reconcile is stored as not replayable (celld.replay_refused on a second send);
 * - a client that lost the answer reads the row (GET …/commands/{operation_id}): present means the
 *   command was accepted (its status and outcome say how far it got); absent means it never was.
 *
 * Claiming is a synchronous insert-or-read in one turn of the event loop: two concurrent sends of
 * one operation_id cannot both start an effect. Rows left `accepted` or `running` by a process that
 * died are marked `unknown` at open (the effect may or may not have happened: read the cell).
 *
 * Status machine (STYLE point 8):
 *
 *   accepted ──started──► running ──done──► succeeded
 *      │                    ├──error──► failed
 *      └──refused──► failed └──restart──► unknown ◄──restart── accepted
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import { openDurableDb } from '../util/durable-db.js';
import type { CellAction, CellCommandRecord, CellCommandStatus } from '../wire/celld.js';
import { isCellAction } from './document.js';

export const EFFECTS_DB_FILE = 'effects.db';
const kSchemaVersion = 1;

export const COMMAND_STATUS_TABLE: TransitionTable<CellCommandStatus> = {
  accepted: ['running', 'failed', 'unknown'],
  running: ['succeeded', 'failed', 'unknown'],
  succeeded: [],
  failed: [],
  unknown: [],
};

/** README's command-status table. */
export function commandStatusTableMarkdown(): string {
  return transitionTableMarkdown(COMMAND_STATUS_TABLE, {
    accepted: {
      running: 'its operation started the effect',
      failed: 'refused before any effect (e.g. a stale generation)',
      unknown: 'sandboxd restarted before the effect started',
    },
    running: {
      succeeded: 'the effect completed; outcome holds what changed',
      failed: 'the effect failed; error says why, outcome what changed before',
      unknown: 'sandboxd restarted during the effect: read the cell',
    },
  });
}

/** What a claim stores. */
export interface NewCommand {
  readonly operationId: string;
  readonly cellId: string;
  readonly action: CellAction;
  readonly kind: 'document' | 'generation_only';
  readonly requestHash: string;
  readonly request: Record<string, unknown>;
  readonly actor: string;
}

interface Row {
  operation_id: string;
  cell_id: string;
  action: string;
  kind: string;
  request_hash: string;
  status: string;
  management_operation_id: string | null;
  outcome_json: string | null;
  error_json: string | null;
  actor: string;
  accepted_at_ms: number;
  finished_at_ms: number | null;
}

const RESTARTED = { code: 'server.restarted', message: 'sandboxd restarted while this command was accepted or running: read the cell' };

export class EffectLedger {
  readonly #db: Database.Database;
  readonly #logger: TransitionLogger | undefined;
  readonly #now: () => number;
  readonly #select: Database.Statement<[string], Row>;

  /** Opens (creating) `<dir>/effects.db`; throws when it cannot be used or is newer than this build. */
  constructor(dir: string, opts: { logger?: TransitionLogger; now?: () => number } = {}) {
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#db = openDurableDb(dir, EFFECTS_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, EFFECTS_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS commands (
        operation_id TEXT PRIMARY KEY,
        cell_id TEXT NOT NULL,
        action TEXT NOT NULL,
        kind TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        request_json TEXT NOT NULL,
        status TEXT NOT NULL,
        management_operation_id TEXT,
        outcome_json TEXT,
        error_json TEXT,
        actor TEXT NOT NULL,
        accepted_at_ms INTEGER NOT NULL,
        finished_at_ms INTEGER
      );
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#select = this.#db.prepare<[string], Row>('SELECT * FROM commands WHERE operation_id = ?');
    const now = this.#now();
    const stale = this.#db.prepare<[], Row>("SELECT * FROM commands WHERE status IN ('accepted', 'running')").all();
    for (const r of stale) {
      this.#finish(r.operation_id, r.status as CellCommandStatus, 'unknown', 'restart', { error: RESTARTED, atMs: now });
    }
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }

  get(operationId: string): CellCommandRecord | undefined {
    const r = this.#select.get(operationId);
    return r === undefined ? undefined : toRecord(r);
  }

  /** Inserts the command, or returns the row already bound to its operation_id (nothing changed). */
  claim(c: NewCommand): { claimed: true; record: CellCommandRecord } | { claimed: false; record: CellCommandRecord } {
    const info = this.#db
      .prepare(
        `INSERT OR IGNORE INTO commands (operation_id, cell_id, action, kind, request_hash, request_json, status, actor, accepted_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, 'accepted', ?, ?)`,
      )
      .run(c.operationId, c.cellId, c.action, c.kind, c.requestHash, JSON.stringify(c.request), c.actor, this.#now());
    const record = this.get(c.operationId);
    if (record === undefined) throw new Error(`effect ledger: ${c.operationId} vanished after its insert`);
    return info.changes === 1 ? { claimed: true, record } : { claimed: false, record };
  }

  /** accepted → running, naming the operation that carries the effect. */
  started(operationId: string, managementOperationId: string): void {
    if (!this.#db.open) return;
    if (this.#move(operationId, ['accepted'], 'running', 'started')) {
      this.#db.prepare('UPDATE commands SET management_operation_id = ? WHERE operation_id = ?').run(managementOperationId, operationId);
    }
  }

  /** running|accepted → succeeded or failed, with the outcome (what changed) and, when failed, the error. */
  finished(operationId: string, ok: boolean, outcome: Record<string, unknown> | null, error?: { code: string; message: string }): void {
    if (!this.#db.open) return;
    const r = this.#select.get(operationId);
    if (r === undefined) return;
    this.#finish(operationId, r.status as CellCommandStatus, ok ? 'succeeded' : 'failed', ok ? 'done' : 'error', {
      outcome,
      ...(error !== undefined && { error }),
      atMs: this.#now(),
    });
  }

  /** Counts by status (cell read, metrics). */
  counts(): Record<CellCommandStatus, number> {
    const out: Record<CellCommandStatus, number> = { accepted: 0, running: 0, succeeded: 0, failed: 0, unknown: 0 };
    for (const r of this.#db
      .prepare<[], { status: string; n: number }>('SELECT status, COUNT(*) AS n FROM commands GROUP BY status')
      .all()) {
      if (r.status in out) out[r.status as CellCommandStatus] = r.n;
    }
    return out;
  }

  #move(operationId: string, from: readonly CellCommandStatus[], to: CellCommandStatus, cause: string): boolean {
    const r = this.#select.get(operationId);
    if (r === undefined) return false;
    const m = new StateMachine<CellCommandStatus>({
      name: 'celld command',
      initial: r.status as CellCommandStatus,
      table: COMMAND_STATUS_TABLE,
      ...(this.#logger !== undefined && { logger: this.#logger }),
      logFields: { operationId },
    });
    if (!m.transition(from, to, cause)) return false;
    this.#db.prepare('UPDATE commands SET status = ? WHERE operation_id = ?').run(to, operationId);
    return true;
  }

  #finish(
    operationId: string,
    current: CellCommandStatus,
    to: CellCommandStatus,
    cause: string,
    f: { outcome?: Record<string, unknown> | null; error?: { code: string; message: string }; atMs: number },
  ): void {
    if (current === 'succeeded' || current === 'failed' || current === 'unknown') return;
    if (!this.#move(operationId, ['accepted', 'running'], to, cause)) return;
    this.#db
      .prepare('UPDATE commands SET outcome_json = ?, error_json = ?, finished_at_ms = ? WHERE operation_id = ?')
      .run(
        f.outcome === undefined || f.outcome === null ? null : JSON.stringify(f.outcome),
        f.error === undefined ? null : JSON.stringify(f.error),
        f.atMs,
        operationId,
      );
  }
}

function toRecord(r: Row): CellCommandRecord {
  const action: CellAction = isCellAction(r.action) ? r.action : 'reconcile';
  const replayable = r.kind === 'document';
  return {
    schema_version: 'sandboxd.celld-command-record/v1',
    operation_id: r.operation_id,
    cell_id: r.cell_id,
    action,
    request_hash: r.request_hash,
    kind: replayable ? 'document' : 'generation_only',
    replayable,
    status: r.status as CellCommandStatus,
    management_operation_id: r.management_operation_id,
    outcome: r.outcome_json === null ? null : (JSON.parse(r.outcome_json) as Record<string, unknown>),
    error: r.error_json === null ? null : (JSON.parse(r.error_json) as { code: string; message: string }),
    actor: r.actor,
    accepted_at: new Date(r.accepted_at_ms).toISOString(),
    finished_at: r.finished_at_ms === null ? null : new Date(r.finished_at_ms).toISOString(),
  };
}
