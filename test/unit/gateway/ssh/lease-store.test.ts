/**
 * The SSH lease store on real SQLite, with a clock the test moves (no waiting): issue, revoke
 * keeping the record, expiry by time, the connector's findActive, paging, reopening the file, and
 * the audit records each move writes to the real credential audit log.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { CredentialAuditLog } from '../../../../src/credentials/audit-log.js';
import { newSshLeaseId, SshLeaseStore, type SshLeaseIssue } from '../../../../src/gateway/ssh/lease-store.js';
import { SvcError } from '../../../../src/core/errors.js';

const root = mkdtempSync(join(tmpdir(), 'sbx-sshstore-'));
const logger = pino({ level: 'silent' });
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

function issueOf(over: Partial<SshLeaseIssue> = {}): SshLeaseIssue {
  return {
    id: newSshLeaseId(),
    actor: 'alice',
    instanceId: 'agent-one',
    principal: 'agent',
    accessMode: 'ssh',
    publicKeySha256: `sha256:${'ab'.repeat(32)}`,
    issuedAtMs: T0,
    ttlSeconds: 600,
    certificate: null,
    ...over,
  };
}

void describe('SSH lease store', () => {
  after(() => rmSync(root, { recursive: true, force: true }));

  void test('issue → active; revoke keeps the record (revoked_at, the revocation effect); a second revoke changes nothing', () => {
    const dir = join(root, 'a');
    let now = T0;
    const store = new SshLeaseStore({ dir, logger, audit: null, now: () => now });
    const lease = store.issue(issueOf({ certificate: { keyId: 'k', sha256: `sha256:${'cd'.repeat(32)}` } }));
    assert.match(lease.id, /^sshlease_[0-9a-f]{32}$/);
    assert.equal(lease.state, 'active');
    assert.equal(lease.issued_at, '2026-03-01T10:00:00.000Z');
    assert.equal(lease.expires_at, '2026-03-01T10:10:00.000Z');
    assert.equal(lease.revocation_effect, 'metadata_only_until_certificate_expiry');
    assert.equal(lease.revoked_at, null);
    now += 5000;
    const revoked = store.revoke(lease.id, 'bob');
    assert.equal(revoked.state, 'revoked');
    assert.equal(revoked.revoked_at, '2026-03-01T10:00:05.000Z');
    assert.equal(revoked.revocation_effect, 'metadata_only_until_certificate_expiry');
    assert.equal(revoked.certificate_key_id, 'k');
    now += 5000;
    assert.deepEqual(store.revoke(lease.id, 'bob'), revoked);
    assert.deepEqual(store.get(lease.id), revoked);
    assert.equal(store.findActive('alice', 'agent-one'), undefined);
    assert.throws(
      () => store.revoke('sshlease_00000000000000000000000000000000', 'bob'),
      (e: unknown) => e instanceof SvcError && e.code === 'ssh_lease.not_found',
    );
    store.close();
    store.close();
  });

  void test('expiry by time: active until expires_at, then expired on the next read; findActive follows the clock', () => {
    let now = T0 + 1000;
    const store = new SshLeaseStore({ dir: join(root, 'b'), logger, audit: null, now: () => now });
    const short = store.issue(issueOf({ ttlSeconds: 60 }));
    const long = store.issue(issueOf({ ttlSeconds: 600 }));
    const other = store.issue(issueOf({ actor: 'carol', ttlSeconds: 600 }));
    assert.equal(store.findActive('alice', 'agent-one')?.id, long.id, 'the one expiring last');
    assert.equal(store.findActive('alice', 'agent-two'), undefined);
    assert.equal(store.findActive('carol', 'agent-one')?.id, other.id);
    assert.equal(store.findActive('alice', 'agent-one', T0 + 600_000), undefined, 'not at expires_at itself');
    assert.equal(store.findActive('alice', 'agent-one', T0 - 1), undefined, 'not before issued_at');
    now = T0 + 59_999;
    assert.equal(store.get(short.id)?.state, 'active');
    now = T0 + 60_000;
    assert.equal(store.get(short.id)?.state, 'expired');
    assert.equal(store.get(short.id)?.revoked_at, null);
    assert.equal(store.activeCount(), 2);
    now = T0 + 600_000;
    assert.equal(store.findActive('alice', 'agent-one'), undefined);
    assert.equal(store.activeCount(), 0);
    assert.deepEqual(
      store.list({}, { limit: 10, offset: 0 }).leases.map((l) => l.state),
      ['expired', 'expired', 'expired'],
    );
    store.close();
  });

  void test('list: newest first, filtered, paged, with the total', () => {
    const store = new SshLeaseStore({ dir: join(root, 'c'), logger, audit: null, now: () => T0 + 1000 });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(store.issue(issueOf({ issuedAtMs: T0 + i * 1000, actor: i % 2 === 0 ? 'alice' : 'bob' })).id);
    store.revoke(ids[6] as string, 'alice');
    const p1 = store.list({}, { limit: 3, offset: 0 });
    assert.equal(p1.total, 7);
    assert.deepEqual(
      p1.leases.map((l) => l.id),
      [ids[6], ids[5], ids[4]],
    );
    assert.deepEqual(
      store.list({}, { limit: 3, offset: 6 }).leases.map((l) => l.id),
      [ids[0]],
    );
    const bob = store.list({ actor: 'bob' }, { limit: 10, offset: 0 });
    assert.equal(bob.total, 3);
    assert.ok(bob.leases.every((l) => l.actor === 'bob'));
    assert.equal(store.list({ state: 'revoked' }, { limit: 10, offset: 0 }).total, 1);
    assert.equal(store.list({ instanceId: 'agent-nine' }, { limit: 10, offset: 0 }).total, 0);
    store.close();
  });

  void test('reopened, the store has every lease; active ones still expire; the directory is 0700 and the file 0600', () => {
    const dir = join(root, 'd');
    let now = T0 + 1000;
    const first = new SshLeaseStore({ dir, logger, audit: null, now: () => now });
    const a = first.issue(issueOf({ ttlSeconds: 60 }));
    const b = first.issue(issueOf({ ttlSeconds: 600 }));
    const c = first.issue(issueOf({ ttlSeconds: 600 }));
    first.revoke(c.id, 'alice');
    first.close();
    now = T0 + 120_000;
    const second = new SshLeaseStore({ dir, logger, audit: null, now: () => now });
    assert.equal(second.get(a.id)?.state, 'expired');
    assert.equal(second.get(b.id)?.state, 'active');
    assert.equal(second.findActive('alice', 'agent-one')?.id, b.id);
    assert.equal(second.get(c.id)?.state, 'revoked');
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(second.path).mode & 0o777, 0o600);
    second.close();
  });

  void test('issue, revoke and expiry write gateway_ssh_lease audit records naming the actor and the lease', () => {
    let now = Date.now();
    const dir = join(root, 'e');
    const audit = new CredentialAuditLog(dir, { now: () => now });
    const store = new SshLeaseStore({ dir, logger, audit, now: () => now });
    const a = store.issue(issueOf({ issuedAtMs: Math.floor(now / 1000) * 1000, ttlSeconds: 60 }));
    const b = store.issue(issueOf({ issuedAtMs: Math.floor(now / 1000) * 1000, ttlSeconds: 600 }));
    store.revoke(b.id, 'bob');
    now += 61_000;
    store.expireDue();
    const records = audit.day(new Date(now).toISOString().slice(0, 10));
    const seen = records.map((r) => `${r.action}:${r.actor ?? '-'}:${r.resource.lease_id ?? '-'}`).reverse();
    assert.deepEqual(seen, [
      `gateway_ssh_lease.issue:alice:${a.id}`,
      `gateway_ssh_lease.issue:alice:${b.id}`,
      `gateway_ssh_lease.revoke:bob:${b.id}`,
      `gateway_ssh_lease.expire:-:${a.id}`,
    ]);
    assert.ok(records.every((r) => r.correlation.instance_id === 'agent-one' && r.resource.credential === null));
    store.close();
    audit.close();
  });
});
