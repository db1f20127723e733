/**
 * How workloads become desired and stop being desired: the changes the request hooks
 * (intent-middleware.ts) and the operation follower (fleet-service.ts) make to the inventory.
 * Each is a single store update, so each is one revision at most, and each is idempotent: a
 * replayed request (Idempotency-Key) that records the same operation again changes nothing.
 */
import type { CreateVmRequest } from '../vms/create-request.js';
import type { WorkloadOrigin, WorkloadOwner } from '../wire/fleet.js';
import { contentOf, type InventoryStore } from './inventory-store.js';
import { content, NOT_OBSERVED, type DesiredRecord } from './records.js';

/** What a create, restore or handoff request asked for, as far as the request says. */
export interface Intent {
  readonly state: 'running' | 'stopped';
  readonly profile: string;
  readonly loadout: string | null;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
  readonly agentshare: boolean;
  readonly owner: WorkloadOwner;
  readonly labels: Readonly<Record<string, string>>;
  readonly origin: WorkloadOrigin;
  readonly operationId: string;
  readonly checkpointId: string | null;
  readonly pool: string | null;
}

/** Records `name` as desired, made by the (unfinished) operation of the intent. */
export function recordIntent(store: InventoryStore, name: string, intent: Intent, nowMs: number): void {
  store.update(name, (held) => {
    if (held !== undefined && held.desired?.operationId === intent.operationId) return contentOf(held); // a replay: already recorded
    const desired: DesiredRecord = {
      state: intent.state,
      profile: intent.profile,
      loadout: intent.loadout,
      vcpus: intent.vcpus,
      memoryMiB: intent.memoryMiB,
      diskGiB: intent.diskGiB,
      agentshare: intent.agentshare,
      host: held?.observed.domain?.host ?? null,
      owner: intent.owner,
      labels: intent.labels,
      sinceMs: nowMs,
      origin: intent.origin,
      operationId: intent.operationId,
      checkpointId: intent.checkpointId,
      pool: intent.pool,
      pendingOperationId: intent.operationId,
    };
    return content(desired, held?.observed ?? NOT_OBSERVED, held?.lastReconcile ?? null);
  });
}

/** Changes the desired state of a desired workload (start/stop through the API); nothing for others. */
export function recordDesiredState(store: InventoryStore, name: string, state: 'running' | 'stopped'): void {
  store.update(name, (held) => {
    if (held === undefined || held.desired === null) return held === undefined ? null : contentOf(held);
    return content({ ...held.desired, state }, held.observed, held.lastReconcile);
  });
}

/** `name` is no longer desired (deleted or checkpointed through sandboxd, or its create failed). */
export function dropDesired(store: InventoryStore, name: string): void {
  store.update(name, (held) => {
    if (held === undefined) return null;
    if (held.observed.domain === null) return null;
    return content(null, held.observed, held.lastReconcile);
  });
}

/** Changes a desired workload's record (its pending operation ended, its spec as observed). */
export function amendDesired(store: InventoryStore, name: string, change: (d: DesiredRecord) => DesiredRecord): void {
  store.update(name, (held) => {
    if (held === undefined || held.desired === null) return held === undefined ? null : contentOf(held);
    return content(change(held.desired), held.observed, held.lastReconcile);
  });
}

/** The intent of a parsed VM create (the MCP tool create_vm, which calls the VM feature directly). */
export function createIntent(req: CreateVmRequest, operationId: string, owner: WorkloadOwner): Intent {
  return {
    state: req.start ? 'running' : 'stopped',
    profile: req.profile,
    loadout: req.loadout ?? null,
    vcpus: req.vcpus,
    memoryMiB: req.memoryMiB,
    diskGiB: req.diskGiB,
    agentshare: req.agentshare,
    owner,
    labels: owner.actor === null ? {} : { 'sandboxd/created-by': owner.actor },
    origin: 'vm_create',
    operationId,
    checkpointId: null,
    pool: null,
  };
}
