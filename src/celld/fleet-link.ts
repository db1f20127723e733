/**
 * What Celld needs of the fleet inventory (src/fleet/port.ts `FleetPort`, provided as the service
 * `fleet`): the current revision and a reconcile. Declared here, narrowly, so Celld depends on two
 * calls and not on the fleet's whole surface; FleetPort satisfies it as it is.
 */
export interface CelldFleetLink {
  /** The current inventory_revision (monotonic, durable). */
  inventoryRevision(): number;
  /**
   * Starts a reconcile (a `fleet_reconcile` operation of the one operations store) or, with
   * dryRun, answers the plan. Rejects `fleet.stale_inventory_revision` when beforeRevision is not
   * the current revision.
   */
  startReconcile(req: { beforeRevision: number; dryRun: boolean; actor: string }): Promise<{ operationId: string } | { plan: unknown }>;
}
