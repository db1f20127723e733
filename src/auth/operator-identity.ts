/**
 * The one operator-identity function: who is calling, with which role and permissions. Every v2
 * route resolves its caller here (`resolve`, or `require` with the permission it needs); no route
 * reads certificates, headers or bodies for identity itself.
 *
 * Where the identity comes from (our decision; the spec leaves it "not shown"):
 * - the admin listener (HTTPS, mutual TLS): the verified client certificate's SPIFFE ID
 *   `spiffe://<trust domain>/operator/<name>`; the name's role comes from the roles table
 *   (SVC_OPERATOR_ROLES), `viewer` when the name is not in it;
 * - the plaintext loopback listener, the spec's "trusted local listener": actor `local` with role
 *   SVC_LOCAL_ROLE (default admin), and no SSH identity.
 *
 * A configured identity that cannot be resolved — a certificate that is not an operator's, or a
 * roles table that cannot be read — gets no permissions and `failClosed: true`.
 */
import { SvcError } from '../core/errors.js';
import type { RequestPeer } from '../http/types.js';
import { parseSpiffeId } from '../identity/spiffe.js';
import { ROLE_PERMISSIONS, type Permission, type Role } from './permissions.js';

/** The `management.access-authority/v1` record (GET /api/v2/credentials/authority). */
export interface Authority {
  readonly schema_version: 'management.access-authority/v1';
  /** How the caller was identified. */
  readonly mode: 'mtls' | 'local';
  /** The operator's name, `local` on the trusted local listener, null when unresolved. */
  readonly actor: string | null;
  readonly role: Role | null;
  readonly permissions: readonly Permission[];
  /** Whether the caller holds an SSH identity (false on the trusted local listener). */
  readonly ssh_identity: boolean;
  /** True when an identity was presented but could not be resolved: clients must fail closed. */
  readonly fail_closed: boolean;
  /** Why it could not be resolved (no secret material), when fail_closed. */
  readonly reason?: string;
}

/** The operator roles table as last read: names → roles, or why it cannot be used. */
export type RolesTable = { readonly ok: true; readonly roles: ReadonlyMap<string, Role> } | { readonly ok: false; readonly reason: string };

export interface OperatorIdentityOptions {
  /** The SPIFFE trust domain of operator certificates. */
  readonly trustDomain: string;
  /** The role of the trusted local listener (SVC_LOCAL_ROLE). */
  readonly localRole: Role;
  /** The roles table, asked on every resolve (the owner caches it and notices changes). */
  readonly roles: () => RolesTable;
}

/** Resolves callers; one instance per server, provided as the `operatorIdentity` service. */
export class OperatorIdentity {
  readonly #opts: OperatorIdentityOptions;

  constructor(opts: OperatorIdentityOptions) {
    this.#opts = opts;
  }

  /** Who is calling. Never throws. */
  resolve(req: { readonly peer: RequestPeer }): Authority {
    const { peer } = req;
    if (peer.transport === 'local') {
      const role = this.#opts.localRole;
      return authority('local', 'local', role, false);
    }
    const identity = peer.spiffeId === null ? null : parseSpiffeId(peer.spiffeId, this.#opts.trustDomain);
    if (identity === null || identity.kind !== 'operator') {
      return unresolved(
        identity === null
          ? 'the client certificate has no operator SPIFFE ID of this trust domain'
          : `the client certificate is a ${identity.kind} identity, not an operator's`,
      );
    }
    const table = this.#opts.roles();
    if (!table.ok) return unresolved(`the operator roles table cannot be used: ${table.reason}`, identity.name);
    return authority('mtls', identity.name, table.roles.get(identity.name) ?? 'viewer', true);
  }

  /** The caller, if it holds `permission`; else 403 auth.permission_denied naming it. */
  require(req: { readonly peer: RequestPeer }, permission: Permission): Authority {
    const who = this.resolve(req);
    if (!who.permissions.includes(permission)) {
      const as = who.fail_closed
        ? `an unresolved identity (${who.reason ?? 'unknown'})`
        : `${who.actor ?? '?'} (role ${who.role ?? 'none'})`;
      throw new SvcError('auth.permission_denied', `this request needs permission ${permission}, which ${as} does not have`, {
        permission,
      });
    }
    return who;
  }

  /**
   * The caller, if it holds `permission` and an SSH identity; on the trusted local listener 403
   * auth.ssh_identity_required (spec part 5: it claims no SSH identity).
   */
  requireSsh(req: { readonly peer: RequestPeer }, permission: Permission): Authority {
    const who = this.require(req, permission);
    if (!who.ssh_identity) {
      throw new SvcError(
        'auth.ssh_identity_required',
        'SSH permissions need an authenticated operator identity: use the admin listener (mutual TLS) with an operator certificate',
      );
    }
    return who;
  }
}

function authority(mode: 'mtls' | 'local', actor: string, role: Role, ssh: boolean): Authority {
  return {
    schema_version: 'management.access-authority/v1',
    mode,
    actor,
    role,
    permissions: ROLE_PERMISSIONS[role],
    ssh_identity: ssh,
    fail_closed: false,
  };
}

function unresolved(reason: string, actor: string | null = null): Authority {
  return {
    schema_version: 'management.access-authority/v1',
    mode: 'mtls',
    actor,
    role: null,
    permissions: [],
    ssh_identity: false,
    fail_closed: true,
    reason,
  };
}
