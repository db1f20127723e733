/**
 * The bootstrap service and its token store on real parts (SQLite in a temp folder, an in-memory
 * CA, certificates issued inline) with a clock the test moves: token states and their order,
 * single use, revocation, supersession, pruning, the readiness statuses (secure, degraded for a
 * CA near its end, failed for an expired or missing CA, disabled) and that stage refuses bad input.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import { BootstrapEnrollment } from '../../../src/bootstrap/service.js';
import { BootstrapTokenStore, PRUNE_AFTER_MS } from '../../../src/bootstrap/token-store.js';
import { SvcError } from '../../../src/core/errors.js';
import { buildCsrPem } from '../../../src/guest-agent/csr.js';
import { CA_TTL_SECONDS, createStandaloneCa, type CaMaterial } from '../../../src/identity/ca.js';
import type { BootstrapMaterial } from '../../../src/wire/bootstrap.js';
import { tempDir } from '../identity/helpers.js';

const DAY_MS = 86_400_000;

interface Bed {
  svc: BootstrapEnrollment;
  store: BootstrapTokenStore;
  dir: string;
  clock: { ms: number };
  registry: Registry;
  stage(instanceId: string, ttlSeconds?: number): Promise<BootstrapMaterial>;
}

async function bed(t: TestContext, opts: { ca?: CaMaterial | null; enabled?: boolean } = {}): Promise<Bed> {
  const dir = await tempDir(t, 'sandboxd-bootstrap-unit-');
  const store = new BootstrapTokenStore(join(dir, 'store'));
  t.after(() => store.close());
  const clock = { ms: Date.now() };
  const registry = new Registry();
  const registers = [registry];
  const ca = opts.ca === undefined ? await createStandaloneCa('sandbox.local') : opts.ca;
  const svc = new BootstrapEnrollment({
    store,
    ca,
    trustDomain: 'sandbox.local',
    enabled: opts.enabled ?? true,
    tokenTtlSeconds: 900,
    consumeUrl: () => 'http://127.0.0.1:1/api/v1/bootstrap-enrollment/consume',
    logger: pino({ level: 'silent' }),
    metrics: {
      issued: new Counter({ name: 'issued', help: 'h', registers }),
      consumed: new Counter({ name: 'consumed', help: 'h', registers }),
      refused: new Counter({ name: 'refused', help: 'h', labelNames: ['code'] as const, registers }),
      revoked: new Counter({ name: 'revoked', help: 'h', registers }),
    },
    now: () => clock.ms,
  });
  const stage = async (instanceId: string, ttlSeconds?: number): Promise<BootstrapMaterial> => {
    const file = join(dir, 'm', instanceId, 'material.json');
    await svc.stage({ instanceId, agentId: `agent-${instanceId}`, file, ...(ttlSeconds !== undefined && { ttlSeconds }) });
    return JSON.parse(await readFile(file, 'utf8')) as BootstrapMaterial;
  };
  return { svc, store, dir, clock, registry, stage };
}

function body(token: string, csr = buildCsrPem(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'agent-x')): Uint8Array {
  return Buffer.from(JSON.stringify({ token, csr }));
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    assert.ok(err instanceof SvcError, String(err));
    return err.code;
  }
}

test('a token is active until its TTL, then expired; consumed wins over every later state', async (t) => {
  const b = await bed(t);
  const m = await b.stage('i1', 60);
  assert.deepEqual(b.svc.counts(), { active: 1, consumed: 0, expired: 0, revoked: 0 });
  b.clock.ms += 60_000;
  assert.deepEqual(b.svc.counts(), { active: 0, consumed: 0, expired: 1, revoked: 0 });
  assert.equal(await codeOf(b.svc.consume(body(m.token))), 'bootstrap.token_expired');

  const m2 = await b.stage('i2', 60);
  assert.equal(await codeOf(b.svc.consume(body(m2.token))), 'ok');
  assert.equal(b.svc.revokeInstance('i2'), 0, 'a consumed token is not revoked');
  b.clock.ms += 120_000;
  assert.equal(await codeOf(b.svc.consume(body(m2.token))), 'bootstrap.token_consumed', 'consumed, even once past its expiry');
  assert.deepEqual(b.svc.counts(), { active: 0, consumed: 1, expired: 1, revoked: 0 });
  const refused = await b.registry.getSingleMetric('refused')?.get();
  assert.deepEqual(refused?.values.map((v) => [v.labels['code'], v.value]).sort(), [
    ['bootstrap.token_consumed', 1],
    ['bootstrap.token_expired', 1],
  ]);
});

test('stage supersedes the earlier token of an instance; revokeInstance revokes and removes the material', async (t) => {
  const b = await bed(t);
  const first = await b.stage('i1');
  const second = await b.stage('i1');
  assert.notEqual(first.token, second.token);
  assert.equal(await codeOf(b.svc.consume(body(first.token))), 'bootstrap.token_revoked');
  assert.deepEqual(b.svc.counts(), { active: 1, consumed: 0, expired: 0, revoked: 1 });
  assert.equal(b.svc.revokeInstance('i1'), 1);
  assert.equal(await codeOf(b.svc.consume(body(second.token))), 'bootstrap.token_revoked');
  assert.equal(b.svc.revokeInstance('nobody'), 0);
  assert.ok(!existsSync(join(b.dir, 'm', 'i1', 'material.json')), 'revoking removed the material');

  // Staged elsewhere, a newer token removes the superseded one's file and keeps its own.
  await b.stage('i3');
  const other = join(b.dir, 'elsewhere', 'material.json');
  await b.svc.stage({ instanceId: 'i3', agentId: 'agent-i3', file: other });
  assert.ok(!existsSync(join(b.dir, 'm', 'i3', 'material.json')));
  assert.ok(existsSync(other));
});

test('rows are pruned a week after their expiry', async (t) => {
  const b = await bed(t);
  await b.stage('old', 60);
  b.clock.ms += 60_000 + PRUNE_AFTER_MS + 1;
  assert.equal(b.svc.counts().expired, 1);
  await b.stage('new');
  assert.deepEqual(b.svc.counts(), { active: 1, consumed: 0, expired: 0, revoked: 0 });
});

test('a claim is single-use at the store: of two claims only the first changes the row; unclaim gives it back', async (t) => {
  const b = await bed(t);
  const m = await b.stage('i1');
  assert.equal(b.store.claim(m.token_id, b.clock.ms), true);
  assert.equal(b.store.claim(m.token_id, b.clock.ms), false);
  b.store.unclaim(m.token_id, b.clock.ms);
  assert.equal(b.store.claim(m.token_id, b.clock.ms + 1), true);
});

test('stage refuses bad input and a disabled or CA-less service', async (t) => {
  const b = await bed(t);
  const file = join(b.dir, 'x', 'm.json');
  for (const o of [
    { instanceId: '../x', agentId: 'a', file },
    { instanceId: 'i', agentId: '', file },
    { instanceId: 'i', agentId: 'a', file: 'relative.json' },
    { instanceId: 'i', agentId: 'a', file, ttlSeconds: 5 },
    { instanceId: 'i', agentId: 'a', file, ttlSeconds: 1.5 },
  ]) {
    assert.equal(await codeOf(b.svc.stage(o)), 'request.invalid', JSON.stringify(o));
  }
  const off = await bed(t, { enabled: false });
  assert.equal(await codeOf(off.svc.stage({ instanceId: 'i', agentId: 'a', file })), 'bootstrap.disabled');
  assert.equal(await codeOf(off.svc.consume(body('x'))), 'bootstrap.disabled');
  const noCa = await bed(t, { ca: null });
  assert.equal(await codeOf(noCa.svc.stage({ instanceId: 'i', agentId: 'a', file })), 'bootstrap.ca_unavailable');
});

test('readiness: secure, degraded near the CA end, failed without or past the CA, disabled when off', async (t) => {
  const secure = await bed(t);
  assert.equal(secure.svc.readiness().status, 'secure');

  // A CA made 10 years minus 10 days ago has 10 days left: not fresh.
  const old = await createStandaloneCa('sandbox.local', { now: new Date(Date.now() - CA_TTL_SECONDS * 1000 + 10 * DAY_MS) });
  const degraded = await bed(t, { ca: old });
  const r = degraded.svc.readiness();
  assert.equal(r.status, 'degraded');
  assert.equal(r.trust_bundle.fresh, false);
  assert.ok(r.trust_bundle.seconds_to_expiry !== null && r.trust_bundle.seconds_to_expiry < 11 * 86_400);
  assert.equal(r.reasons.length, 1);

  // A CA with 100 s left: once past its end, readiness fails and consume answers ca_unavailable, keeping the token.
  const ending = await bed(t, {
    ca: await createStandaloneCa('sandbox.local', { now: new Date(Date.now() - CA_TTL_SECONDS * 1000 + 100_000) }),
  });
  const m = await ending.stage('i1');
  ending.clock.ms += 200_000;
  assert.equal(ending.svc.readiness().status, 'failed');
  assert.equal(await codeOf(ending.svc.consume(body(m.token))), 'bootstrap.ca_unavailable');
  assert.deepEqual(ending.svc.counts(), { active: 1, consumed: 0, expired: 0, revoked: 0 }, 'the token stays usable');

  const none = await bed(t, { ca: null });
  const n = none.svc.readiness();
  assert.equal(n.status, 'failed');
  assert.equal(n.grpc_ca_backend_configured, false);
  assert.equal(n.ca_backend_class, 'none');
  assert.equal(n.trust_bundle.ca_not_after, null);

  const off = await bed(t, { enabled: false });
  assert.equal(off.svc.readiness().status, 'disabled');
});
