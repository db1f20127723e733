import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OperatorIdentity, type RolesTable } from '../../../src/auth/operator-identity.js';
import { PERMISSIONS, ROLE_PERMISSIONS, ROLES, type Permission, type Role } from '../../../src/auth/permissions.js';
import { SvcError } from '../../../src/core/errors.js';
import { LOCAL_PEER, type RequestPeer } from '../../../src/http/types.js';

const TD = 'sandboxd.test';
const mtls = (spiffeId: string | null): { peer: RequestPeer } => ({ peer: { transport: 'mtls', spiffeId, fingerprint256: 'AA:BB' } });
const local = { peer: LOCAL_PEER };

function identity(roles: Record<string, Role> | string, localRole: Role = 'admin'): OperatorIdentity {
  const table: RolesTable = typeof roles === 'string' ? { ok: false, reason: roles } : { ok: true, roles: new Map(Object.entries(roles)) };
  return new OperatorIdentity({ trustDomain: TD, localRole, roles: () => table });
}

function deniedWith(code: string, permission?: Permission): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof SvcError);
    assert.equal(err.code, code);
    assert.equal(err.httpStatus, 403);
    if (permission !== undefined) assert.match(err.message, new RegExp(permission.replace('.', '\\.')));
    return true;
  };
}

void describe('roles and permissions', () => {
  void test('roles are cumulative and only admin holds the admin-only permissions', () => {
    for (const p of ROLE_PERMISSIONS.viewer) assert.ok(ROLE_PERMISSIONS.operator.includes(p), p);
    for (const p of ROLE_PERMISSIONS.operator) assert.ok(ROLE_PERMISSIONS.admin.includes(p), p);
    assert.deepEqual([...ROLE_PERMISSIONS.admin].sort(), Object.keys(PERMISSIONS).sort());
    assert.ok(!ROLE_PERMISSIONS.viewer.includes('credentials.lease'));
    assert.ok(!ROLE_PERMISSIONS.operator.includes('activity.ingest'));
    assert.deepEqual(ROLES, ['viewer', 'operator', 'admin']);
  });
});

void describe('OperatorIdentity', () => {
  void test('the trusted local listener is actor local with SVC_LOCAL_ROLE and no SSH identity', () => {
    const who = identity({}).resolve(local);
    assert.equal(who.schema_version, 'management.access-authority/v1');
    assert.equal(who.mode, 'local');
    assert.equal(who.actor, 'local');
    assert.equal(who.role, 'admin');
    assert.deepEqual(who.permissions, ROLE_PERMISSIONS.admin);
    assert.equal(who.ssh_identity, false);
    assert.equal(who.fail_closed, false);
    assert.equal(identity({}, 'viewer').resolve(local).role, 'viewer');
    assert.throws(() => identity({}).requireSsh(local, 'ssh.lease.issue'), deniedWith('auth.ssh_identity_required'));
  });

  void test("an operator certificate gets its name's role, viewer when unlisted", () => {
    const ids = identity({ alice: 'admin', 'ci-bot': 'operator' });
    const alice = ids.resolve(mtls(`spiffe://${TD}/operator/alice`));
    assert.deepEqual([alice.mode, alice.actor, alice.role, alice.ssh_identity, alice.fail_closed], ['mtls', 'alice', 'admin', true, false]);
    assert.equal(ids.resolve(mtls(`spiffe://${TD}/operator/ci-bot`)).role, 'operator');
    const bob = ids.resolve(mtls(`spiffe://${TD}/operator/bob`));
    assert.deepEqual([bob.actor, bob.role], ['bob', 'viewer']);
    assert.deepEqual(bob.permissions, ROLE_PERMISSIONS.viewer);
    assert.equal(ids.requireSsh(mtls(`spiffe://${TD}/operator/ci-bot`), 'ssh.lease.issue').actor, 'ci-bot');
  });

  void test('a viewer is refused credentials.lease with auth.permission_denied naming it', () => {
    const ids = identity({});
    assert.throws(
      () => ids.require(mtls(`spiffe://${TD}/operator/bob`), 'credentials.lease'),
      deniedWith('auth.permission_denied', 'credentials.lease'),
    );
    assert.equal(ids.require(mtls(`spiffe://${TD}/operator/bob`), 'credentials.read').actor, 'bob');
  });

  void test('identities that cannot be resolved get no permissions and fail closed', () => {
    const ids = identity({ alice: 'admin' });
    for (const spiffe of [`spiffe://${TD}/agent/vm-1`, `spiffe://other.domain/operator/alice`, `spiffe://${TD}/server`, null]) {
      const who = ids.resolve(mtls(spiffe));
      assert.equal(who.fail_closed, true, String(spiffe));
      assert.deepEqual(who.permissions, []);
      assert.equal(who.role, null);
      assert.ok((who.reason ?? '').length > 0);
      assert.throws(() => ids.require(mtls(spiffe), 'credentials.read'), deniedWith('auth.permission_denied', 'credentials.read'));
    }
    const broken = identity('cannot read /etc/roles.json: EACCES').resolve(mtls(`spiffe://${TD}/operator/alice`));
    assert.deepEqual([broken.actor, broken.role, broken.fail_closed, broken.permissions.length], ['alice', null, true, 0]);
    assert.match(broken.reason ?? '', /EACCES/);
  });
});
