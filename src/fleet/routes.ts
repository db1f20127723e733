/**
 * The v2 fleet routes (spec 4.13). Every caller is resolved through the one operator-identity
 * function: `fleet.read` to read the inventory, `fleet.reconcile` to reconcile. The reconcile
 * takes Idempotency-Key (the middleware of src/idempotency covers everything under /api/v2/fleet).
 *
 * | method | path | answer |
 * |---|---|---|
 * | GET | /api/v2/fleet/workloads | 200 {inventory_revision, last_sweep_at, sweep_error, workloads, total, drift_counts} |
 * | POST | /api/v2/fleet/reconcile | {before_revision, dry_run?}: 202 {operation} + Location (op fleet_reconcile); dry run 200 {dry_run, before_revision, plan}; 409 fleet.stale_inventory_revision (error.details.inventory_revision), 409 fleet.reconcile_in_progress |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { JsonResult } from '../http/types.js';
import type { Operations } from '../operations/operation-tracker.js';
import { adminOperationJson, adminOperationLocation } from '../operations/routes.js';
import type { FleetReconcileDryRun } from '../wire/fleet.js';
import type { FleetService } from './fleet-service.js';

const RECONCILE_FIELDS = new Set(['before_revision', 'dry_run']);

/** The reconcile body: before_revision a non-negative integer, dry_run a boolean; nothing else. */
export function parseReconcile(body: unknown): { beforeRevision: number; dryRun: boolean } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new SvcError('request.invalid', 'the body must be a JSON object {before_revision, dry_run?}');
  }
  const rec = body as Record<string, unknown>;
  for (const k of Object.keys(rec)) {
    if (!RECONCILE_FIELDS.has(k)) throw new SvcError('request.invalid', `unknown field ${JSON.stringify(k.slice(0, 64))}`);
  }
  const rev = rec['before_revision'];
  if (typeof rev !== 'number' || !Number.isSafeInteger(rev) || rev < 0) {
    throw new SvcError(
      'request.invalid',
      'before_revision is required: the inventory_revision of GET /api/v2/fleet/workloads (an integer ≥ 0)',
    );
  }
  const dry = rec['dry_run'] ?? false;
  if (typeof dry !== 'boolean') throw new SvcError('request.invalid', 'dry_run must be a boolean');
  return { beforeRevision: rev, dryRun: dry };
}

export function registerFleetRoutes(
  router: Router,
  deps: { service: FleetService; operations: Pick<Operations, 'get'>; identity: Pick<OperatorIdentity, 'require'> },
): void {
  const { service, identity } = deps;
  router.add({
    method: 'GET',
    path: '/api/v2/fleet/workloads',
    handler: async (req) => {
      identity.require(req, 'fleet.read');
      return { status: 200, headers: { 'cache-control': 'no-store' }, json: await service.inventory() };
    },
  });
  router.add({
    method: 'POST',
    path: '/api/v2/fleet/reconcile',
    handler: async (req): Promise<JsonResult> => {
      const who = identity.require(req, 'fleet.reconcile');
      const { beforeRevision, dryRun } = parseReconcile(req.body);
      let started;
      try {
        started = await service.startReconcile({ beforeRevision, dryRun, actor: who.actor ?? 'unknown' });
      } catch (err) {
        // The spec's envelope plus the details a client needs to retry: the current revision.
        if (err instanceof SvcError && err.code === 'fleet.stale_inventory_revision') {
          return { status: 409, json: { error: { code: err.code, message: err.message, details: err.details ?? {} } } };
        }
        throw err;
      }
      if ('plan' in started) {
        const json: FleetReconcileDryRun = { dry_run: true, before_revision: beforeRevision, plan: started.plan };
        return { status: 200, json };
      }
      const op = deps.operations.get(started.operationId);
      if (op === null) throw new SvcError('OPERATION_NOT_FOUND', `operation '${started.operationId}' not found`);
      return {
        status: 202,
        headers: { location: adminOperationLocation(op.id) },
        json: { operation: adminOperationJson(op) },
      };
    },
  });
}
