/**
 * Roles and the permissions they grant: the one table every v2 route is checked against (our
 * decision: the spec names the admin role and leaves the others "not shown"). README's
 * "Roles and permissions" table is generated from it and a test keeps the two equal.
 *
 * Roles are cumulative: an operator can do what a viewer can, an admin what an operator can.
 */

/** Every permission, with what it allows (README shows the text). */
export const PERMISSIONS = {
  'credentials.read': 'list credentials and leases (metadata only) and read the credential audit',
  'credentials.write': 'register, replace and delete credentials (their secret values are write-only)',
  'credentials.lease': 'grant and revoke credential leases to a workload',
  'credentials.proxy': 'make calls through the credential proxy with a lease',
  'ssh.lease.read': 'list and read SSH leases (metadata only; like every SSH permission, refused on the trusted local listener)',
  'ssh.lease.issue': 'issue SSH leases (needs an operator identity: refused on the trusted local listener)',
  'ssh.lease.revoke': 'revoke SSH leases (refused on the trusted local listener)',
  'activity.read': 'query the activity store',
  'activity.ingest': 'write activity events',
  'admin.read': 'read admin operations, checkpoints and warm pools; connect to the MCP endpoint and call its reading tools',
  'admin.hypervisor': 'checkpoints, restores, warm pools, handoff and bootstrap; the MCP tools create_vm and run_command',
  'fleet.read': 'read the fleet inventory and startup profiles',
  'fleet.reconcile': 'reconcile the fleet inventory',
  'profiles.write': 'create, change and delete startup profiles and loadouts',
  'storage.read': 'list storage areas and read objects (the scoped storage API)',
  'storage.write': 'request writes and deletes in agent inboxes and task outboxes (each waits for review)',
  'storage.review': "approve or reject requested storage writes (not one's own, as an mTLS operator)",
  'missions.read': 'list mission executors (never their tokens) and dispatched missions',
  'executors.write': 'register mission executors (each registration returns its dispatch bearer token once) and delete them',
} as const;

export type Permission = keyof typeof PERMISSIONS;

export const ROLES = ['viewer', 'operator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

const VIEWER: readonly Permission[] = [
  'credentials.read',
  'ssh.lease.read',
  'activity.read',
  'admin.read',
  'fleet.read',
  'storage.read',
  'missions.read',
];
const OPERATOR: readonly Permission[] = [
  ...VIEWER,
  'credentials.lease',
  'credentials.proxy',
  'ssh.lease.issue',
  'ssh.lease.revoke',
  'fleet.reconcile',
  'profiles.write',
  'storage.write',
];
const ADMIN: readonly Permission[] = [
  ...OPERATOR,
  'credentials.write',
  'activity.ingest',
  'admin.hypervisor',
  'storage.review',
  'executors.write',
];

/** Role → the permissions it grants, in PERMISSIONS order. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  viewer: inOrder(VIEWER),
  operator: inOrder(OPERATOR),
  admin: inOrder(ADMIN),
};

function inOrder(granted: readonly Permission[]): readonly Permission[] {
  return Object.freeze((Object.keys(PERMISSIONS) as Permission[]).filter((p) => granted.includes(p)));
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

export function isPermission(value: unknown): value is Permission {
  return typeof value === 'string' && Object.hasOwn(PERMISSIONS, value);
}

/** README's "Roles and permissions" table (generated; test/unit/docs keeps README equal to it). */
export function rolesMarkdownTable(): string {
  const head = `| permission | what it allows | ${ROLES.join(' | ')} |`;
  const rule = `|---|---|${ROLES.map(() => '---').join('|')}|`;
  const rows = (Object.keys(PERMISSIONS) as Permission[]).map(
    (p) => `| \`${p}\` | ${PERMISSIONS[p]} | ${ROLES.map((r) => (ROLE_PERMISSIONS[r].includes(p) ? '✔' : '')).join(' | ')} |`,
  );
  return [head, rule, ...rows].join('\n');
}
