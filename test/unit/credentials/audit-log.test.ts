import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CREDENTIAL_AUDIT_DB_FILE, CredentialAuditLog, isUtcDate, type AuditEntry } from '../../../src/credentials/audit-log.js';

const entry = (i: number): AuditEntry => ({
  action: 'proxy.http',
  outcome: i % 2 === 0 ? 'allowed' : 'denied',
  reasonCode: i % 2 === 0 ? null : 'credential_proxy.host_not_allowed',
  actor: 'local',
  leaseId: `credlease_${i}`,
  credential: 'k',
  agentId: 'a',
  instanceId: 'i',
  sessionId: null,
  traceId: `t${i}`,
  details: { method: 'GET', host: 'api.example.com', path: `/v1/secret-path-${i}` },
});

void describe('credential audit log', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-audit-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  void test('a day answers its 200 newest projections, newest first, without the stored details', () => {
    let now = Date.parse('2026-03-01T23:59:00.000Z');
    const log = new CredentialAuditLog(dir, { now: () => now });
    log.write(entry(-1));
    now = Date.parse('2026-03-02T00:00:00.000Z');
    for (let i = 0; i < 250; i++) {
      log.write(entry(i));
      now += 1000;
    }
    const page = log.day('2026-03-02');
    assert.equal(page.length, 200);
    assert.equal(page[0]?.resource.lease_id, 'credlease_249');
    assert.equal(page[199]?.resource.lease_id, 'credlease_50');
    assert.equal(page[0]?.reason_code, 'credential_proxy.host_not_allowed');
    assert.deepEqual(page[1], {
      id: 250,
      timestamp: '2026-03-02T00:04:08.000Z',
      actor: 'local',
      action: 'proxy.http',
      outcome: 'allowed',
      reason_code: null,
      resource: { lease_id: 'credlease_248', credential: 'k' },
      correlation: { agent_id: 'a', instance_id: 'i', session_id: null },
      trace_id: 't248',
    });
    assert.ok(!JSON.stringify(page).includes('secret-path'), 'details are never projected');
    assert.deepEqual(
      log.day('2026-03-01').map((p) => p.resource.lease_id),
      ['credlease_-1'],
    );
    assert.deepEqual(log.day('2026-03-03'), []);
    log.close();
    // Durable: a new instance reads what the first wrote.
    const again = new CredentialAuditLog(dir);
    assert.equal(again.day('2026-03-02').length, 200);
    again.close();
    assert.ok(readFileSync(join(dir, CREDENTIAL_AUDIT_DB_FILE)).length > 0);
  });

  void test('dates: real calendar days only', () => {
    for (const ok of ['2026-03-02', '2024-02-29', '1999-12-31']) assert.equal(isUtcDate(ok), true, ok);
    for (const bad of ['2026-02-29', '2026-13-01', '2026-3-2', '20260302', '2026-03-02T00:00:00Z', '', 'today'])
      assert.equal(isUtcDate(bad), false, bad);
  });
});
