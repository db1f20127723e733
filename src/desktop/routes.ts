/**
 * The seven routes of spec 4.15, served only on the desktop listener (src/desktop/desktop-listener.ts),
 * never on the shared router: they are not behind the operator identity; their caller is the
 * delegation token's subject and workspace. Each route says whether it takes a JSON body (the
 * others refuse one before the token is verified) and which problem code a bad body gets.
 */
import type { ErrorCode } from '../core/errors.js';
import type { DesktopService } from './desktop-service.js';
import type { DesktopCaller } from './token-authority.js';

export interface DesktopRoute {
  readonly method: 'GET' | 'POST';
  /** For docs and logs: `/api/v2/desktop-sessions/{desktop_id}`. */
  readonly pattern: string;
  readonly match: RegExp;
  readonly body: 'json' | 'none';
  /** The code of a malformed, oversized or unparseable body. */
  readonly bodyError: ErrorCode;
  run(service: DesktopService, caller: DesktopCaller, id: string, body: unknown): { status: number; body: unknown };
}

/** A path segment id: what the routes accept before the service looks it up. */
const ID = '([A-Za-z0-9][A-Za-z0-9._:-]{0,127})';

export const DESKTOP_ROUTES: readonly DesktopRoute[] = [
  {
    method: 'GET',
    pattern: '/api/v2/instances/{instance_id}/desktop-capability',
    match: new RegExp(`^/api/v2/instances/${ID}/desktop-capability$`),
    body: 'none',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id) => ({ status: 200, body: s.capability(caller, id) }),
  },
  {
    method: 'POST',
    pattern: '/api/v2/instances/{instance_id}/desktop-enrollment',
    match: new RegExp(`^/api/v2/instances/${ID}/desktop-enrollment$`),
    body: 'json',
    bodyError: 'invalid_enrollment',
    run: (s, caller, id, body) => ({ status: 200, body: s.enroll(caller, id, body) }),
  },
  {
    method: 'POST',
    pattern: '/api/v2/instances/{instance_id}/desktop-sessions',
    match: new RegExp(`^/api/v2/instances/${ID}/desktop-sessions$`),
    body: 'json',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id, body) => ({ status: 200, body: s.create(caller, id, body) }),
  },
  {
    method: 'GET',
    pattern: '/api/v2/desktop-sessions/{desktop_id}',
    match: new RegExp(`^/api/v2/desktop-sessions/${ID}$`),
    body: 'none',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id) => ({ status: 200, body: s.get(caller, id) }),
  },
  {
    method: 'POST',
    pattern: '/api/v2/desktop-sessions/{desktop_id}/attach',
    match: new RegExp(`^/api/v2/desktop-sessions/${ID}/attach$`),
    body: 'none',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id) => ({ status: 201, body: s.grant(caller, id, 'attach') }),
  },
  {
    method: 'POST',
    pattern: '/api/v2/desktop-sessions/{desktop_id}/reconnect',
    match: new RegExp(`^/api/v2/desktop-sessions/${ID}/reconnect$`),
    body: 'none',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id) => ({ status: 201, body: s.grant(caller, id, 'reconnect') }),
  },
  {
    method: 'POST',
    pattern: '/api/v2/desktop-sessions/{desktop_id}/close',
    match: new RegExp(`^/api/v2/desktop-sessions/${ID}/close$`),
    body: 'json',
    bodyError: 'invalid_resource_request',
    run: (s, caller, id, body) => {
      const r = s.close(caller, id, body);
      return { status: r.status, body: r.resource };
    },
  },
];

/** The route a path and method name: the route, 'method' when only the method differs, or null. */
export function matchDesktopRoute(method: string, path: string): { route: DesktopRoute; id: string } | 'method' | null {
  let pathMatched = false;
  for (const route of DESKTOP_ROUTES) {
    const m = route.match.exec(path);
    if (m === null) continue;
    if (route.method === method) return { route, id: m[1]! };
    pathMatched = true;
  }
  return pathMatched ? 'method' : null;
}
