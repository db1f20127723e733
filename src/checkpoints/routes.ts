/**
 * The v2 checkpoint and warm-pool routes (spec 4.10). Every caller is resolved through the one
 * operator-identity function: `admin.hypervisor` to take, restore, pool and hand off, `admin.read`
 * to list. Every mutating route answers 202 `{operation}` with `Location:
 * /api/v2/admin/operations/{id}`, and takes Idempotency-Key (the middleware of src/idempotency
 * covers everything under /api/v2/admin).
 *
 * | method | path | answer |
 * |---|---|---|
 * | POST | /api/v2/admin/hypervisor/checkpoints | 202 (op checkpoint_create) |
 * | GET | /api/v2/admin/hypervisor/checkpoints | 200 {checkpoints} |
 * | GET | /api/v2/admin/hypervisor/checkpoints/{id} | 200 checkpoint |
 * | POST | /api/v2/admin/hypervisor/checkpoints/{id}/restore | 202 (op checkpoint_restore) |
 * | POST | /api/v2/admin/hypervisor/warm-pools | 202 (op warm_pool_create) |
 * | GET | /api/v2/admin/hypervisor/warm-pools | 200 {pools} |
 * | GET | /api/v2/admin/hypervisor/warm-pools/{pool} | 200 pool |
 * | POST | /api/v2/admin/hypervisor/warm-pools/{pool}/handoff | 202 (op warm_pool_handoff), 409 warm_pool.empty + Retry-After |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { Router } from '../http/router.js';
import type { JsonResult } from '../http/types.js';
import { adminOperationJson, adminOperationLocation, adminOperationSchema } from '../operations/routes.js';
import type { AdminAccepted } from '../wire/checkpoints.js';
import type { Operation } from '../wire/vms.js';
import type { CheckpointService } from './checkpoint-service.js';

const ACCEPTED_SCHEMA = { type: 'object', properties: { operation: adminOperationSchema }, required: ['operation'] };
const BASE = '/api/v2/admin/hypervisor';

function accepted(op: Operation): JsonResult {
  const json: AdminAccepted = { operation: adminOperationJson(op) };
  return { status: 202, headers: { location: adminOperationLocation(op.id) }, json };
}

export function registerCheckpointRoutes(
  router: Router,
  deps: { service: CheckpointService; identity: Pick<OperatorIdentity, 'require'> },
): void {
  const { service, identity } = deps;
  router.add({
    method: 'POST',
    path: `${BASE}/checkpoints`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => {
      identity.require(req, 'admin.hypervisor');
      return accepted(await service.create(req.body));
    },
  });
  router.add({
    method: 'GET',
    path: `${BASE}/checkpoints`,
    handler: (req) => {
      identity.require(req, 'admin.read');
      return { status: 200, json: { checkpoints: service.checkpoints() } };
    },
  });
  router.add({
    method: 'GET',
    path: `${BASE}/checkpoints/:id`,
    handler: (req) => {
      identity.require(req, 'admin.read');
      return { status: 200, json: service.checkpoint(req.params['id'] ?? '') };
    },
  });
  router.add({
    method: 'POST',
    path: `${BASE}/checkpoints/:id/restore`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: (req) => {
      identity.require(req, 'admin.hypervisor');
      return accepted(service.restore(req.params['id'] ?? '', req.body));
    },
  });
  router.add({
    method: 'POST',
    path: `${BASE}/warm-pools`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: (req) => {
      identity.require(req, 'admin.hypervisor');
      return accepted(service.createPool(req.body));
    },
  });
  router.add({
    method: 'GET',
    path: `${BASE}/warm-pools`,
    handler: (req) => {
      identity.require(req, 'admin.read');
      return { status: 200, json: { pools: service.pools() } };
    },
  });
  router.add({
    method: 'GET',
    path: `${BASE}/warm-pools/:pool`,
    handler: (req) => {
      identity.require(req, 'admin.read');
      return { status: 200, json: service.pool(req.params['pool'] ?? '') };
    },
  });
  router.add({
    method: 'POST',
    path: `${BASE}/warm-pools/:pool/handoff`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: (req) => {
      identity.require(req, 'admin.hypervisor');
      return accepted(service.handoff(req.params['pool'] ?? '', req.body));
    },
  });
}
