/**
 * The Idempotency-Key middleware of spec 4.11: every mutating request (POST, PUT, PATCH, DELETE)
 * under /api/v2/admin, /api/v2/fleet and /api/v2/startup-profiles that carries the header runs
 * through the one mechanism (idempotency.ts) — whichever component registers the route.
 *
 * - Scope: the caller as the one operator-identity function resolves it (`operator:<mode>:<actor>`,
 *   e.g. `operator:mtls:alice`, `operator:local:local`). A caller it cannot resolve is passed
 *   through unbound: the route refuses it anyway (403), and nothing is bound to nobody.
 * - Request: method, path with its query string, and body (JSON routes: canonical JSON; raw
 *   routes: the bytes).
 * - The answer is rendered here, once — with the route's own serializer — and those exact bytes
 *   are both sent and bound, so a replay is byte-identical to the original, with the original's
 *   status, headers and content type plus `Idempotency-Replayed: true`.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { JSON_CONTENT_TYPE } from '../http/dispatch.js';
import type { Route, RouteMiddleware } from '../http/router.js';
import type { HandlerResult, RawResult, RequestView } from '../http/types.js';
import type { BoundResponse } from './binding-store.js';
import { parseIdempotencyKey, requestHash, type BindingCodec, type Idempotency } from './idempotency.js';

/** Path prefixes whose mutating requests take Idempotency-Key (spec 4.11). */
export const IDEMPOTENT_PREFIXES: readonly string[] = ['/api/v2/admin', '/api/v2/fleet', '/api/v2/startup-profiles', '/api/v2/storage'];
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Whether a route is covered by the middleware. */
export function isIdempotentRoute(method: string, pattern: string): boolean {
  return MUTATING.has(method) && IDEMPOTENT_PREFIXES.some((p) => pattern === p || pattern.startsWith(`${p}/`));
}

export function idempotencyMiddleware(deps: { readonly idempotency: Idempotency; readonly identity: OperatorIdentity }): RouteMiddleware {
  return {
    name: 'idempotency',
    applies: isIdempotentRoute,
    wrap: (route) => async (req) => {
      const key = parseIdempotencyKey(req.headers);
      if (key === undefined) return route.handler(req);
      const who = deps.identity.resolve(req);
      if (who.actor === null || who.fail_closed) return route.handler(req);
      const body = route.body === 'raw' ? { raw: req.rawBody ?? new Uint8Array() } : { json: req.body };
      const hash = requestHash(req.method, pathWithQuery(req), body);
      const scope = `operator:${who.mode}:${who.actor}`;
      const { result, replayed } = await deps.idempotency.run(scope, key, hash, RESULT_CODEC, async () =>
        rendered(route, await route.handler(req)),
      );
      if (!replayed || 'sse' in result) return result;
      return { ...result, headers: { ...result.headers, 'idempotency-replayed': 'true' } };
    },
  };
}

function pathWithQuery(req: RequestView): string {
  const q = req.query.toString();
  return q === '' ? req.path : `${req.path}?${q}`;
}

/** A JSON result as the bytes the dispatcher would send (the route's compiled serializer). */
function rendered(route: Route, result: HandlerResult): HandlerResult {
  if (!('json' in result)) return result;
  return {
    status: result.status,
    ...(result.headers !== undefined && { headers: result.headers }),
    contentType: JSON_CONTENT_TYPE,
    body: route.serialize !== undefined ? route.serialize(result.json) : (JSON.stringify(result.json) ?? 'null'),
  };
}

/** Binds rendered results; a streamed (SSE) result is not bound. */
const RESULT_CODEC: BindingCodec<HandlerResult> = {
  toResponse(result): BoundResponse | null {
    if (!('body' in result)) return null;
    const headers = Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    const body = typeof result.body === 'string' ? new TextEncoder().encode(result.body) : result.body;
    return { status: result.status, headers, contentType: result.contentType, body };
  },
  fromResponse(res): RawResult {
    return { status: res.status, headers: { ...res.headers }, contentType: res.contentType, body: res.body };
  },
};
