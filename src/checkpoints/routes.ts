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
import type { ProviderCapabilities } from '../hypervisor/provider-capabilities.js';
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
  deps: { service: CheckpointService; identity: Pick<OperatorIdentity, 'require'>; capabilities?: ProviderCapabilities },
): void {
  const { service, identity } = deps;
  const gate = capabilityGate(service, deps.capabilities);
  router.add({
    method: 'POST',
    path: `${BASE}/checkpoints`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => {
      identity.require(req, 'admin.hypervisor');
      await gate.vm(req.body);
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
      gate.checkpoints([req.params['id']], 'checkpoint');
      return accepted(service.restore(req.params['id'] ?? '', req.body));
    },
  });
  router.add({
    method: 'POST',
    path: `${BASE}/warm-pools`,
    responseSchema: ACCEPTED_SCHEMA,
    handler: (req) => {
      identity.require(req, 'admin.hypervisor');
      const ids = (req.body as { checkpoint_ids?: unknown } | null)?.checkpoint_ids;
      gate.checkpoints(Array.isArray(ids) ? ids : [], 'warm_pool');
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
      gate.pool(req.params['pool'] ?? '');
      return accepted(service.handoff(req.params['pool'] ?? '', req.body));
    },
  });
}

/**
 * Provider capabilities (spec 4.13, README "Provider capabilities"): an action on a VM or a
 * checkpoint whose host's provider does not advertise it is refused with 409
 * provider.capability_unavailable before the service sees it. What the gate cannot resolve (an
 * unknown VM, checkpoint or pool) is left to the service's own answer.
 */
function capabilityGate(
  service: CheckpointService,
  capabilities: ProviderCapabilities | undefined,
): {
  vm(body: unknown): Promise<void>;
  checkpoints(ids: readonly unknown[], c: 'checkpoint' | 'warm_pool'): void;
  pool(name: string): void;
} {
  const hostOf = (id: unknown): string | null => {
    if (typeof id !== 'string') return null;
    try {
      return service.checkpoint(id).host;
    } catch {
      return null;
    }
  };
  return {
    vm: async (body) => {
      const vm = (body as { vm?: unknown } | null)?.vm;
      if (capabilities === undefined || typeof vm !== 'string') return;
      await capabilities.requireForVm(vm, 'checkpoint').catch((err: unknown) => {
        if ((err as { code?: unknown }).code !== 'VM_NOT_FOUND') throw err;
      });
    },
    checkpoints: (ids, c) => {
      for (const id of ids) {
        const host = hostOf(id);
        if (capabilities !== undefined && host !== null) capabilities.require(host, c);
      }
    },
    pool: (name) => {
      if (capabilities === undefined) return;
      let first: string | undefined;
      try {
        first = service.pool(name).checkpoint_ids[0];
      } catch {
        return;
      }
      const host = hostOf(first);
      if (host !== null) capabilities.require(host, 'warm_pool');
    },
  };
}
