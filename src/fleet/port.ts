/**
 * The fleet's port: what other features (the Celld helper's "reconcile through Celld") call
 * instead of the HTTP routes. The `fleet` component provides it as the service `fleet`
 * (`ctx.need('fleet')`). Shapes are the wire shapes of src/wire/fleet.ts.
 */
import type { ReconcilePlanJson, WorkloadJson } from '../wire/fleet.js';

export type {
  FleetReconcileDryRun,
  FleetReconcileRequest,
  FleetWorkloadsResponse,
  ReconcileAction,
  ReconcileOutcome,
  ReconcilePlanJson,
  ReconcilePlanStep,
  ReconcileResultJson,
  ReconcileStepResult,
  WorkloadDrift,
  WorkloadJson,
} from '../wire/fleet.js';

export interface FleetPort {
  /** The current inventory_revision (monotonic, durable). */
  inventoryRevision(): number;
  /** Every workload, by name. */
  workloads(): readonly WorkloadJson[];
  /** What a reconcile would do now, against the current revision. */
  plan(): ReconcilePlanJson;
  /**
   * Starts a reconcile (the `fleet_reconcile` operation of the one operations store) or, with
   * `dryRun`, answers the plan without acting. Rejects SvcError `fleet.stale_inventory_revision`
   * (details.inventory_revision = the current one) when `beforeRevision` is not current, and
   * `fleet.reconcile_in_progress` while another reconcile runs. `actor` is recorded in the result.
   */
  startReconcile(req: {
    beforeRevision: number;
    dryRun: boolean;
    actor: string;
  }): Promise<{ operationId: string } | { plan: ReconcilePlanJson }>;
  /** Re-reads the hypervisor and the agents now (what the periodic sweep does); resolves when the inventory holds it. */
  refresh(): Promise<void>;
}
