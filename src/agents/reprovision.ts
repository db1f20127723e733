/**
 * POST /api/v1/agents/{id}/reprovision: an asynchronous operation that re-provisions the VM an
 * agent runs in. The VM layer implements ReprovisionBackend (a later issue); until it is set,
 * every operation fails with REPROVISION_NEEDS_VM_LAYER. Operations are kept, bounded, so GET
 * /api/v1/operations/{id} (owned by the VM work) can look them up with get().
 *
 * Decisions: the Operation type is `vm_create` (re-provisioning creates the VM again, as
 * deploy-agent reports vm_create); target is the agent id; statuses pending → running →
 * completed | failed (spec part 2), and the POST answers status `queued` as the spec shows.
 */
import { randomUUID } from 'node:crypto';
import type { LoggerLike } from './grpc-util.js';

/** The error of a reprovision operation when no VM layer is present. */
export const REPROVISION_NEEDS_VM_LAYER = 'reprovision requires the VM layer (not available yet)';

/** The spec's Operation (part 2). */
export interface Operation {
  id: string;
  type: 'vm_create';
  status: 'pending' | 'running' | 'completed' | 'failed';
  target: string;
  /** ISO 8601 UTC. */
  created_at: string;
  completed_at?: string;
  progress_percent: number;
  result?: Record<string, unknown>;
  error?: string;
}

/** What the VM layer implements. Resolve with the result object, reject with the failure. */
export interface ReprovisionBackend {
  reprovision(agentId: string, report: { progress(percent: number): void }): Promise<Record<string, unknown>>;
}

/** Operations kept for lookup (oldest finished ones are forgotten first). */
export const kMaxOperations = 1000;

export class ReprovisionOperations {
  readonly #logger: LoggerLike;
  readonly #ops = new Map<string, Operation>();
  readonly #now: () => Date;
  #backend: ReprovisionBackend | undefined;

  constructor(opts: { logger: LoggerLike; backend?: ReprovisionBackend; now?: () => Date }) {
    this.#logger = opts.logger;
    this.#backend = opts.backend;
    this.#now = opts.now ?? (() => new Date());
  }

  /** The VM layer plugs itself in here. */
  setBackend(backend: ReprovisionBackend): void {
    this.#backend = backend;
  }

  /** Queues a reprovision of `agentId`'s VM; the returned operation is pending. */
  start(agentId: string): Operation {
    const op: Operation = { id: `op-${randomUUID()}`, type: 'vm_create', status: 'pending', target: agentId, created_at: this.#now().toISOString(), progress_percent: 0 };
    this.#ops.set(op.id, op);
    this.#trim();
    // After the 202 is sent: the request only queues the work.
    setImmediate(() => void this.#run(op));
    return { ...op };
  }

  /** A copy of operation `id`, or undefined. */
  get(id: string): Operation | undefined {
    const op = this.#ops.get(id);
    return op === undefined ? undefined : { ...op };
  }

  async #run(op: Operation): Promise<void> {
    const backend = this.#backend;
    if (backend === undefined) {
      this.#logger.warn({ operation: op.id, agent: op.target }, 'reprovisioning needs the VM layer, which is not available yet; operation failed');
      this.#finish(op, { error: REPROVISION_NEEDS_VM_LAYER });
      return;
    }
    op.status = 'running';
    try {
      const result = await backend.reprovision(op.target, {
        progress: (percent) => {
          if (op.status === 'running') op.progress_percent = Math.max(0, Math.min(99, Math.round(percent)));
        },
      });
      this.#finish(op, { result });
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.#logger.error({ operation: op.id, agent: op.target, err: error }, 'reprovision failed');
      this.#finish(op, { error });
    }
  }

  #finish(op: Operation, outcome: { result: Record<string, unknown> } | { error: string }): void {
    op.completed_at = this.#now().toISOString();
    if ('result' in outcome) {
      op.status = 'completed';
      op.progress_percent = 100;
      op.result = outcome.result;
    } else {
      op.status = 'failed';
      op.error = outcome.error;
    }
  }

  #trim(): void {
    if (this.#ops.size <= kMaxOperations) return;
    for (const [id, op] of this.#ops) {
      if (this.#ops.size <= kMaxOperations) break;
      if (op.status === 'completed' || op.status === 'failed') this.#ops.delete(id);
    }
  }
}
