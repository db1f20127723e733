import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ROLES } from '../../../src/auth/permissions.js';
import { ConfigError, loadConfig } from '../../../src/config/load.js';
import { OPERATOR_ROLES, type DefaultsContext } from '../../../src/config/schema.js';

const ctx: DefaultsContext = { cpuCount: 4, stdoutIsTty: false, homeDir: '/home/u', xdgStateHome: undefined };

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env, ctx);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

void describe('configuration of operator identity', () => {
  void test('defaults: the admin listener on 127.0.0.1:8123, no roles file, the local listener admin', () => {
    const c = loadConfig({}, ctx);
    assert.deepEqual(c.adminAddr, { host: '127.0.0.1', port: 8123 });
    assert.equal(c.operatorRolesFile, null);
    assert.equal(c.localRole, 'admin');
  });

  void test('SVC_ADMIN_ADDR: off turns it off; being mTLS it may listen on a non-loopback address without the unsafe override', () => {
    assert.equal(loadConfig({ SVC_ADMIN_ADDR: 'off' }, ctx).adminAddr, null);
    assert.equal(loadConfig({ SVC_ADMIN_ADDR: ' OFF ' }, ctx).adminAddr, null);
    assert.deepEqual(loadConfig({ SVC_ADMIN_ADDR: '0.0.0.0:9443' }, ctx).adminAddr, { host: '0.0.0.0', port: 9443 });
    assert.deepEqual(loadConfig({ SVC_ADMIN_ADDR: '[::]:8123' }, ctx).adminAddr, { host: '::', port: 8123 });
    assert.match(problemsOf({ SVC_ADMIN_ADDR: 'nowhere' })[0] ?? '', /^SVC_ADMIN_ADDR="nowhere": expected host:port/);
    assert.match(problemsOf({ SVC_ADMIN_ADDR: '127.0.0.1:99999' })[0] ?? '', /^SVC_ADMIN_ADDR=.*out of range/);
  });

  void test('SVC_LOCAL_ROLE takes a role; anything else is named', () => {
    assert.equal(loadConfig({ SVC_LOCAL_ROLE: 'viewer' }, ctx).localRole, 'viewer');
    assert.equal(loadConfig({ SVC_LOCAL_ROLE: 'Operator' }, ctx).localRole, 'operator');
    assert.match(problemsOf({ SVC_LOCAL_ROLE: 'root' })[0] ?? '', /^SVC_LOCAL_ROLE="root": "root" is not one of viewer, operator, admin/);
  });

  void test('SVC_OPERATOR_ROLES is a path (its content is checked when the server starts)', () => {
    assert.equal(loadConfig({ SVC_OPERATOR_ROLES: '/etc/sandboxd/roles.json' }, ctx).operatorRolesFile, '/etc/sandboxd/roles.json');
  });

  void test("the configuration's role list is the permissions table's", () => {
    assert.deepEqual([...OPERATOR_ROLES], [...ROLES]);
  });
});
