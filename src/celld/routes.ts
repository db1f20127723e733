/**
 * The Celld routes (spec 4.13; paths ours, README "Celld"). Every caller is resolved through the
 * one operator-identity function: `fleet.read` for status, the non-mutating commands and the
 * scoped reads, `fleet.reconcile` for cell commands and reconcile.
 *
 * | method | path | answer |
 * |---|---|---|
 * | GET | /api/v2/celld/status | 200 status (readiness discovery) |
 * | POST | /api/v2/celld/validate | 200 {valid, problems, request_hash} |
 * | POST | /api/v2/celld/preflight | 200 {ok, checks} |
 * | POST | /api/v2/celld/diagnose | 200 {healthy, findings} |
 * | POST | /api/v2/celld/plan-upgrade | 200 plan |
 * | GET | /api/v2/celld/cells/{cell} | 200 cell state |
 * | POST | /api/v2/celld/cells/{cell}/commands | 202 {replayed: false, command} (op celld_command); a replay 200/202 {replayed: true} |
 * | GET | /api/v2/celld/cells/{cell}/commands/{operation_id} | 200 ledger entry; 404 celld.command_not_found |
 * | POST | /api/v2/celld/cells/{cell}/reconcile | 202 generation-only reconcile; never replayed |
 *
 * Idempotency-Key: these routes are outside the middleware (spec 4.11 names admin, fleet and
 * startup profiles): a command's own operation_id is its idempotency key, bound to the request hash
 * for good, not 24 hours, and checked by the effect ledger.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { Router } from '../http/router.js';
import type { JsonResult, RequestView } from '../http/types.js';
import { adminOperationLocation } from '../operations/routes.js';
import type { CelldService, CommandAnswer } from './celld-service.js';

const BASE = '/api/v2/celld';

function answer(a: CommandAnswer): JsonResult {
  return {
    status: a.status,
    headers: {
      ...(a.operationId !== null && { location: adminOperationLocation(a.operationId) }),
      ...(a.body.replayed && { 'celld-replayed': 'true' }),
      'cache-control': 'no-store',
    },
    json: a.body,
  };
}

export function registerCelldRoutes(router: Router, deps: { service: CelldService; identity: Pick<OperatorIdentity, 'require'> }): void {
  const { service, identity } = deps;
  const read = (path: string, method: 'GET' | 'POST', run: (req: RequestView) => unknown): void => {
    router.add({
      method,
      path: `${BASE}${path}`,
      handler: async (req) => {
        identity.require(req, 'fleet.read');
        return { status: 200, headers: { 'cache-control': 'no-store' }, json: await run(req) };
      },
    });
  };
  read('/status', 'GET', () => service.status());
  read('/validate', 'POST', (req) => service.validate(req.body));
  read('/preflight', 'POST', (req) => service.preflight(req.body));
  read('/diagnose', 'POST', () => service.diagnose());
  read('/plan-upgrade', 'POST', (req) => service.planUpgrade(req.body));
  read('/cells/:cell', 'GET', (req) => service.cell(req.params['cell'] ?? ''));
  read('/cells/:cell/commands/:operation', 'GET', (req) => service.record(req.params['cell'] ?? '', req.params['operation'] ?? ''));
  router.add({
    method: 'POST',
    path: `${BASE}/cells/:cell/commands`,
    handler: (req) => {
      const who = identity.require(req, 'fleet.reconcile');
      return answer(service.command(req.params['cell'] ?? '', req.body, who.actor ?? 'unknown'));
    },
  });
  router.add({
    method: 'POST',
    path: `${BASE}/cells/:cell/reconcile`,
    handler: (req) => {
      const who = identity.require(req, 'fleet.reconcile');
      return answer(service.reconcileGeneration(req.params['cell'] ?? '', req.body, who.actor ?? 'unknown'));
    },
  });
}
