/**
 * GET /api/v2/credentials/authority (spec 4.14): who the caller is, as the one operator-identity
 * function resolves it — `management.access-authority/v1` {mode, actor, role, permissions,
 * ssh_identity, fail_closed, reason?}. Any caller gets an answer (it asks for no permission); an
 * identity that cannot be resolved gets no permissions and `fail_closed: true`, and clients must
 * then refuse to act. Never cached (Cache-Control: no-store): a role can change with the roles file.
 */
import type { Router } from '../http/router.js';
import type { OperatorIdentity } from './operator-identity.js';
import { PERMISSIONS, ROLES } from './permissions.js';

/** The response schema, compiled once at registration. */
export const AUTHORITY_SCHEMA = {
  type: 'object',
  properties: {
    schema_version: { type: 'string', enum: ['management.access-authority/v1'] },
    mode: { type: 'string', enum: ['mtls', 'local'] },
    actor: { type: ['string', 'null'] },
    role: { type: ['string', 'null'], enum: [...ROLES, null] },
    permissions: { type: 'array', items: { type: 'string', enum: Object.keys(PERMISSIONS) } },
    ssh_identity: { type: 'boolean' },
    fail_closed: { type: 'boolean' },
    reason: { type: 'string' },
  },
  required: ['schema_version', 'mode', 'actor', 'role', 'permissions', 'ssh_identity', 'fail_closed'],
} as const;

export function registerAuthRoutes(router: Router, deps: { readonly identity: OperatorIdentity }): void {
  router.add({
    method: 'GET',
    path: '/api/v2/credentials/authority',
    responseSchema: AUTHORITY_SCHEMA,
    handler: (req) => ({ status: 200, headers: { 'cache-control': 'no-store' }, json: deps.identity.resolve(req) }),
  });
}
