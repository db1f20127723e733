/** The activity store's settings: SVC_ACTIVITY_STORE never echoes its value (a URL may hold a password). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../../src/config/load.js';
import type { DefaultsContext } from '../../../src/config/schema.js';

const ctx: DefaultsContext = { cpuCount: 2, stdoutIsTty: false, homeDir: '/home/t', xdgStateHome: undefined };

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, ctx);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err;
  }
  assert.fail('accepted');
}

void describe('activity settings', () => {
  void test('defaults: sqlite, 30 days, tenant "default", host from the host name', () => {
    const c = loadConfig({}, ctx);
    assert.deepEqual(c.activityStore, { kind: 'sqlite' });
    assert.equal(c.activityRetentionDays, 30);
    assert.equal(c.tenantId, 'default');
    assert.equal(c.hostId, null);
  });

  void test('a postgres URL is taken whole; a bad value is refused without echoing it', () => {
    const c = loadConfig({ SVC_ACTIVITY_STORE: 'postgres://svc:hunter2@127.0.0.1:5432/activity' }, ctx);
    assert.deepEqual(c.activityStore, { kind: 'postgres', url: 'postgres://svc:hunter2@127.0.0.1:5432/activity' });
    for (const bad of ['mysql://svc:hunter2@db/x', 'postgres//svc:hunter2@db', 'sqlite3']) {
      const err = refusal({ SVC_ACTIVITY_STORE: bad });
      assert.match(err.message, /SVC_ACTIVITY_STORE/);
      assert.ok(!err.message.includes('hunter2'), err.message);
      assert.ok(!err.message.includes(bad), err.message);
    }
  });

  void test('retention is 1 to 3650 days; tenant and host ids are ids', () => {
    assert.match(refusal({ SVC_ACTIVITY_RETENTION_DAYS: '0' }).message, /SVC_ACTIVITY_RETENTION_DAYS/);
    assert.match(refusal({ SVC_TENANT_ID: 'a b' }).message, /SVC_TENANT_ID/);
    assert.equal(loadConfig({ SVC_HOST_ID: 'rack-7.host-3' }, ctx).hostId, 'rack-7.host-3');
  });
});
