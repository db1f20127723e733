/**
 * How features create and follow operations. VM work goes through the VM queue actors (see
 * src/vms/); code that runs an operation on the main thread itself uses `begin()` and drives the
 * handle, with the same state machine (src/core/operation-state.ts) and the same store, so
 * GET /api/v1/operations/{id} shows both alike.
 */
import { randomUUID } from 'node:crypto';
import { toWire } from '../core/errors.js';
import type { TransitionLogger } from '../core/state-machine.js';
import { OperationCause, OperationProgress, operationJson, type OperationJson, type OperationType } from '../core/operation-state.js';
import type { OperationStore } from './operation-store.js';

/** A new operation id: `op-<uuid>` (spec part 2). */
export function newOperationId(): string {
  return `op-${randomUUID()}`;
}

/** A main-thread operation: every call moves it through the state machine and records it. */
export interface OperationHandle {
  readonly id: string;
  /** pending → running. */
  start(): void;
  /** Raises progress_percent (0-99 while running; never lowered). */
  progress(percent: number): void;
  /** running → completed with `result` (progress 100). */
  complete(result: Record<string, unknown>): void;
  /** pending|running → failed; `err` becomes the error string (and error_code). */
  fail(err: unknown): void;
  json(): OperationJson;
}

/** What other features get: read, wait, and run operations of their own. */
export interface Operations {
  /** The spec's JSON, or null when unknown (never created, or purged after retention). */
  get(id: string): OperationJson | null;
  /** Resolves once completed or failed; rejects OPERATION_NOT_FOUND, server.timeout. */
  waitFor(id: string, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<OperationJson>;
  /** Creates a pending operation of `type` on `target` (a VM name), recorded at once. */
  begin(type: OperationType, target: string): OperationHandle;
  /**
   * Records an operation refused before it could be queued: pending → failed (cause `refused`)
   * with `err` as its error, for requests whose answer promises an operation (reprovision).
   */
  refuse(type: OperationType, target: string, err: unknown): OperationJson;
}

export class OperationTracker implements Operations {
  readonly #store: OperationStore;
  readonly #logger: TransitionLogger | undefined;

  constructor(store: OperationStore, logger?: TransitionLogger) {
    this.#store = store;
    this.#logger = logger;
  }

  /** The one store behind it (VM queue frames land there directly). */
  get store(): OperationStore {
    return this.#store;
  }

  get(id: string): OperationJson | null {
    return this.#store.json(id) ?? null;
  }

  async waitFor(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<OperationJson> {
    return operationJson(await this.#store.waitFor(id, opts));
  }

  begin(type: OperationType, target: string): OperationHandle {
    const op = new OperationProgress({
      id: newOperationId(),
      type,
      target,
      ...(this.#logger !== undefined ? { logger: this.#logger } : {}),
    });
    const store = this.#store;
    const record = (changed: boolean): void => {
      if (changed) store.upsert(op.snapshot());
    };
    store.upsert(op.snapshot());
    return {
      id: op.id,
      start: () => record(op.start()),
      progress: (p) => record(op.progress(p)),
      complete: (result) => record(op.complete(result)),
      fail: (err) => record(op.fail(toWire(err))),
      json: () => operationJson(op.snapshot()),
    };
  }

  refuse(type: OperationType, target: string, err: unknown): OperationJson {
    const op = new OperationProgress({
      id: newOperationId(),
      type,
      target,
      ...(this.#logger !== undefined ? { logger: this.#logger } : {}),
    });
    op.fail(toWire(err), OperationCause.refused);
    this.#store.upsert(op.snapshot());
    return operationJson(op.snapshot());
  }
}
