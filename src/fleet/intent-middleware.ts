/**
 * Where workloads become desired: a route middleware over the requests that make, start and stop
 * VMs through sandboxd, installed before those routes are registered (the `fleetInventory`
 * component is listed before `vms` and `checkpoints`). It records what the accepted request asked
 * for, with who asked (the one operator-identity function) — after the route answered, and only
 * when it accepted:
 *
 * | request | answer | the inventory records |
 * |---|---|---|
 * | POST /api/v1/vms | 202 | desired (spec from the body, state running unless start false), origin vm_create |
 * | POST /api/v2/admin/hypervisor/checkpoints/{id}/restore | 202 | desired, origin checkpoint_restore, checkpoint id |
 * | POST /api/v2/admin/hypervisor/warm-pools/{pool}/handoff | 202 | desired, origin warm_pool_handoff, pool |
 * | POST /api/v1/vms/{name}/start, /restart | 200, 202 | desired state running |
 * | POST /api/v1/vms/{name}/stop, /destroy | 200 | desired state stopped |
 *
 * The answer goes out once the record is durable (at most 10 s later: see kDurableWaitMs).
 *
 * Deletes are followed on the operations store instead (fleet-service.ts): every vm_delete that
 * completed drops its VM, whichever path asked for it.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { Route, RouteMiddleware } from '../http/router.js';
import type { HandlerResult, RequestView } from '../http/types.js';
import { LIMITS } from '../vms/create-request.js';
import type { WorkloadOrigin } from '../wire/fleet.js';
import { recordDesiredState, recordIntent } from './desired.js';
import type { InventoryStore } from './inventory-store.js';

const CREATE = 'POST /api/v1/vms';
const RESTORE = 'POST /api/v2/admin/hypervisor/checkpoints/:id/restore';
const HANDOFF = 'POST /api/v2/admin/hypervisor/warm-pools/:pool/handoff';
const STATE: Readonly<Record<string, 'running' | 'stopped'>> = {
  'POST /api/v1/vms/:name/start': 'running',
  'POST /api/v1/vms/:name/restart': 'running',
  'POST /api/v1/vms/:name/stop': 'stopped',
  'POST /api/v1/vms/:name/destroy': 'stopped',
};

/** The JSON of a result: a route's own, or the bytes the idempotency middleware rendered. */
function resultJson(r: HandlerResult): Record<string, unknown> | null {
  try {
    if ('json' in r) return typeof r.json === 'object' && r.json !== null ? (r.json as Record<string, unknown>) : null;
    if ('body' in r)
      return JSON.parse(typeof r.body === 'string' ? r.body : Buffer.from(r.body).toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
  return null;
}

function operationOf(json: Record<string, unknown> | null): { id: string; target: string } | null {
  const op = json?.['operation'];
  if (typeof op !== 'object' || op === null) return null;
  const { id, target } = op as Record<string, unknown>;
  return typeof id === 'string' && typeof target === 'string' ? { id, target } : null;
}

/**
 * How long an answer waits for the recorded intent to be durable, ms. With SQLite it already is;
 * with PostgreSQL this is the write-behind queue's commit. A database that is away does not hold
 * the answer longer than this: the request was accepted and its operation runs; the intent stays
 * queued and is written when the database is back (the store retries and logs).
 */
const kDurableWaitMs = 10_000;

async function durable(store: InventoryStore): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([store.committed(), new Promise<void>((r) => (timer = setTimeout(r, kDurableWaitMs)))]);
  clearTimeout(timer);
}

function int(v: unknown, dflt: number): number {
  return typeof v === 'number' && Number.isInteger(v) ? v : dflt;
}

export function intentMiddleware(deps: {
  readonly store: InventoryStore;
  readonly identity: Pick<OperatorIdentity, 'resolve'>;
  /** Called after an intent was recorded (the fleet service settles an operation that already ended). */
  readonly onIntent: (name: string, operationId: string) => void;
  readonly now?: () => number;
}): RouteMiddleware {
  const now = deps.now ?? Date.now;
  const key = (method: string, pattern: string): string => `${method} ${pattern}`;
  return {
    name: 'fleet-intents',
    applies: (method, pattern) => {
      const k = key(method, pattern);
      return k === CREATE || k === RESTORE || k === HANDOFF || STATE[k] !== undefined;
    },
    wrap: (route: Route) => {
      const k = key(route.method, route.pattern);
      return async (req: RequestView) => {
        const result = await route.handler(req);
        if (!('status' in result) || result.status >= 300) return result;
        const state = STATE[k];
        if (state !== undefined) {
          recordDesiredState(deps.store, req.params['name'] ?? '', state);
          await durable(deps.store);
          return result;
        }
        const op = operationOf(resultJson(result));
        if (op === null) return result;
        const who = deps.identity.resolve(req);
        const body = (typeof req.body === 'object' && req.body !== null ? req.body : {}) as Record<string, unknown>;
        const origin: WorkloadOrigin = k === CREATE ? 'vm_create' : k === RESTORE ? 'checkpoint_restore' : 'warm_pool_handoff';
        const name = k === CREATE && typeof body['name'] === 'string' ? body['name'] : op.target;
        recordIntent(
          deps.store,
          name,
          {
            state: k === CREATE && body['start'] === false ? 'stopped' : 'running',
            profile: typeof body['profile'] === 'string' && body['profile'] !== '' ? body['profile'] : 'svc-dev',
            loadout: typeof body['loadout'] === 'string' && body['loadout'] !== '' ? body['loadout'] : null,
            vcpus: int(body['vcpus'], LIMITS.vcpus.default),
            memoryMiB: int(body['memory_mb'], LIMITS.memory_mb.default),
            diskGiB: int(body['disk_gb'], LIMITS.disk_gb.default),
            agentshare: body['agentshare'] !== false,
            owner: { actor: who.actor, mode: who.mode },
            labels: who.actor === null ? {} : { 'sandboxd/created-by': who.actor },
            origin,
            operationId: op.id,
            checkpointId: k === RESTORE ? (req.params['id'] ?? null) : null,
            pool: k === HANDOFF ? (req.params['pool'] ?? null) : null,
          },
          now(),
        );
        deps.onIntent(name, op.id);
        await durable(deps.store);
        return result;
      };
    },
  };
}
