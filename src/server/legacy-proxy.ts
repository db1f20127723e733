/**
 * The four legacy direct-SSH proxy routes of spec 4.2:
 *
 *   GET      /api/v1/agents/{id}/manifests/{platform}
 *   GET/POST /api/v1/agents/{id}/manifests/{platform}/{name}
 *   POST     /api/v1/agents/{id}/aiwg/exec
 *
 * They bypass the gateway's policy and audit, so they answer 403 `route.forbidden` unless
 * SVC_ENABLE_DIRECT_SSH_ORCH_PROXY=1. sandboxd has no direct-SSH backend (agents are reached over
 * gRPC), so with the flag set they answer 503 `server.unavailable` saying so, rather than 404 as if
 * the routes did not exist. The spec shows neither their bodies nor their responses.
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { Handler } from '../http/types.js';

const ROUTES: readonly (readonly [method: string, path: string])[] = [
  ['GET', '/api/v1/agents/:id/manifests/:platform'],
  ['GET', '/api/v1/agents/:id/manifests/:platform/:name'],
  ['POST', '/api/v1/agents/:id/manifests/:platform/:name'],
  ['POST', '/api/v1/agents/:id/aiwg/exec'],
];

export function registerLegacyProxyRoutes(router: Router, deps: { enabled: boolean }): void {
  const handler: Handler = () => {
    if (!deps.enabled) {
      throw new SvcError(
        'route.forbidden',
        'the legacy direct-SSH proxy routes are disabled (SVC_ENABLE_DIRECT_SSH_ORCH_PROXY=1 enables them)',
      );
    }
    throw new SvcError('server.unavailable', 'this server has no direct-SSH proxy backend; agents are reached over gRPC');
  };
  // The body is not read: these routes never get as far as using one.
  for (const [method, path] of ROUTES) router.add({ method, path, body: 'none', handler });
}
