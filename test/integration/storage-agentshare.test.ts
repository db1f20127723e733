/**
 * The VM `agentshare` flag on the embedded default (libvirt test driver, local agents), through
 * the whole server: a VM created with it has inbox/ and outbox/ in its agent's work dir, linked
 * to the agent's storage areas, so a reviewed write through the scoped API shows up there and
 * what the agent leaves in outbox/ is listed by the API; a VM created without it has neither.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { ApiClient } from '../../src/client/api-client.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../support/test-config.js';

describe('agentshare on the test driver', () => {
  let stateDir: string;
  let server: ServerHandle;
  let api: ApiClient;
  before(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'sbx-agentshare-'));
    server = await startServer(loopbackConfig(stateDir, { SVC_ACTOR_SHARDS: '1' }), pino({ level: 'silent' }));
    api = new ApiClient({ baseUrl: `http://127.0.0.1:${server.ports.http}` });
  });
  after(async () => {
    await server.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  const create = async (name: string, agentshare: boolean): Promise<void> => {
    const { operation } = await api.createVm({ name, agentshare });
    const done = await api.waitForOperation(operation.id, { timeoutMs: 120_000 });
    assert.equal(done.status, 'completed', JSON.stringify(done));
  };

  test("the local agent's work dir sees its inbox and outbox", async () => {
    await create('agent-share-a', true);
    const work = join(stateDir, 'vms', 'agent-share-a', 'work');
    assert.equal(readlinkSync(join(work, 'inbox')), join(stateDir, 'storage', 'inbox', 'agent-share-a'));
    assert.equal(readlinkSync(join(work, 'outbox')), join(stateDir, 'storage', 'outbox', 'agent-share-a'));
    const area = { area: 'inbox' as const, owner: 'agent-share-a' };
    const { review } = await api.storagePut(area, ['brief.md'], new TextEncoder().encode('# do this'));
    assert.ok(!existsSync(join(work, 'inbox', 'brief.md')), 'not before review');
    await api.approveStorageReview(review.id);
    assert.equal(readFileSync(join(work, 'inbox', 'brief.md'), 'utf8'), '# do this');
    writeFileSync(join(work, 'outbox', 'result.txt'), 'done');
    const listing = await api.storageList({ area: 'outbox', owner: 'agent-share-a' }, []);
    assert.deepEqual(
      listing.entries.map((e) => e.name),
      ['result.txt'],
    );
    const metrics = await (await fetch(`http://127.0.0.1:${server.ports.http}/metrics`)).text();
    assert.match(metrics, /^svc_storage_writes_total\{op="put",outcome="requested"\} 1$/mu);
    assert.match(metrics, /^svc_storage_writes_total\{op="put",outcome="applied"\} 1$/mu);
    assert.match(metrics, /^svc_agentshare_inbox_bytes 9$/mu);
  });

  test('without agentshare there is no share', async () => {
    await create('agent-share-b', false);
    const work = join(stateDir, 'vms', 'agent-share-b', 'work');
    assert.ok(!existsSync(join(work, 'inbox')));
    assert.ok(!existsSync(join(work, 'outbox')));
  });
});
