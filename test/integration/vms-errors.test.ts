/**
 * Every error path of the VM and operation routes, through the API on test:///default (inline
 * actors): validation (400), unknown VMs (404), state conflicts (409), busy queues (409
 * VM_BUSY naming the operation), provisioning time-outs (PROVISIONING_ERROR), an unreachable
 * hypervisor (503 with Retry-After).
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import sshpk from 'sshpk';
import { eventsComponent } from '../../src/events/component.js';
import { inject } from '../../src/http/inject.js';
import { startServer } from '../../src/main.js';
import { actorsComponent, hypervisorComponent } from '../../src/server/runtime-components.js';
import { vmsComponent } from '../../src/vms/component.js';
import { loopbackConfig } from '../support/test-config.js';
import { startVmHarness, uniqueName, type VmHarness } from './vms-harness.js';

type Json = Record<string, unknown>;

function errorOf(r: { json(): unknown }): { code: string; message: string } {
  return (r.json() as { error: { code: string; message: string } }).error;
}

function sshKey(): string {
  const { publicKey } = generateKeyPairSync('ed25519');
  return sshpk
    .parseKey(publicKey.export({ type: 'spki', format: 'pem' }), 'pem')
    .toString('ssh')
    .replace(/ \(unnamed\)$/, '');
}

describe('VM API error paths', () => {
  let h: VmHarness;
  before(async () => {
    h = await startVmHarness({ mode: 'inline' });
  });
  after(async () => {
    await h.stop();
  });

  test('create validation: 400 with the field named, INVALID_VM_NAME for a bad name', async () => {
    const cases: [unknown, number, string, RegExp][] = [
      [{ name: 'Agent-UPPER' }, 400, 'INVALID_VM_NAME', /\^agent-/],
      [{ name: 'vm-1' }, 400, 'INVALID_VM_NAME', /agent-/],
      [{ name: 'agent-' }, 400, 'INVALID_VM_NAME', /agent-/],
      [{ name: 'agent-a_b' }, 400, 'INVALID_VM_NAME', /agent-/],
      [{ name: `agent-${'x'.repeat(58)}` }, 400, 'INVALID_VM_NAME', /63/],
      [{}, 400, 'request.invalid', /name is required/],
      [{ name: 42 }, 400, 'request.invalid', /name must be a string/],
      [{ name: 'agent-v', colour: 'red' }, 400, 'request.invalid', /unknown field.*colour/],
      [{ name: 'agent-v', profile: 'gold' }, 400, 'request.invalid', /profile/],
      [{ name: 'agent-v', vcpus: 0 }, 400, 'request.invalid', /vcpus .*1 to 64/],
      [{ name: 'agent-v', vcpus: 65 }, 400, 'request.invalid', /vcpus/],
      [{ name: 'agent-v', vcpus: 1.5 }, 400, 'request.invalid', /vcpus/],
      [{ name: 'agent-v', vcpus: '2' }, 400, 'request.invalid', /vcpus/],
      [{ name: 'agent-v', memory_mb: 255 }, 400, 'request.invalid', /memory_mb .*256 to 262144/],
      [{ name: 'agent-v', disk_gb: 0 }, 400, 'request.invalid', /disk_gb .*1 to 2048/],
      [{ name: 'agent-v', disk_gb: 2049 }, 400, 'request.invalid', /disk_gb/],
      [{ name: 'agent-v', agentshare: 'yes' }, 400, 'request.invalid', /agentshare/],
      [{ name: 'agent-v', start: 1 }, 400, 'request.invalid', /start/],
      [{ name: 'agent-v', ssh_key: 'not a key' }, 400, 'request.invalid', /ssh_key/],
      [{ name: 'agent-v', ssh_key: 'ssh-ed25519 AAAA' }, 400, 'request.invalid', /ssh_key/],
      [[1, 2], 400, 'request.invalid', /JSON object/],
    ];
    for (const [body, status, code, message] of cases) {
      const r = await h.req('POST', '/api/v1/vms', body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.text}`);
      assert.equal(errorOf(r).code, code, JSON.stringify(body));
      assert.match(errorOf(r).message, message, JSON.stringify(body));
    }
    const noBody = await h.req('POST', '/api/v1/vms');
    assert.equal(noBody.status, 400);
    const notJson = await h.req('POST', '/api/v1/vms', '{"name":');
    assert.equal(notJson.status, 400);
  });

  test('ssh_key: omitted with a warning for svc-dev, installed for basic', async () => {
    const a = uniqueName('sshdev');
    const dev = await h.req('POST', '/api/v1/vms', { name: a, ssh_key: sshKey(), start: false });
    assert.equal(dev.status, 202, dev.text);
    assert.match(String((dev.json() as { warnings: string[] }).warnings[0]), /ssh_key omitted.*SVC_ENABLE_DIRECT_RUNTIME_SSH=1/);
    const b = uniqueName('sshbasic');
    const basic = await h.req('POST', '/api/v1/vms', { name: b, profile: 'basic', ssh_key: `${sshKey()} me@laptop`, start: false });
    assert.equal(basic.status, 202, basic.text);
    assert.equal((basic.json() as Json)['warnings'], undefined);
    for (const r of [dev, basic]) await h.waitOp(String((r.json() as { operation: Json }).operation['id']));
    assert.equal((await h.hv.get(a))?.metadata.labels?.['sandboxd/ssh-keys'], '0');
    assert.equal((await h.hv.get(b))?.metadata.labels?.['sandboxd/ssh-keys'], '1');
    for (const n of [a, b]) await h.req('DELETE', `/api/v1/vms/${n}?delete_disk=true`);
  });

  test('unknown VMs are 404 VM_NOT_FOUND on every route; unknown operations 404 OPERATION_NOT_FOUND', async () => {
    const n = uniqueName('ghost');
    const routes: [string, string][] = [
      ['GET', `/api/v1/vms/${n}`],
      ['POST', `/api/v1/vms/${n}/start`],
      ['POST', `/api/v1/vms/${n}/stop`],
      ['POST', `/api/v1/vms/${n}/destroy`],
      ['POST', `/api/v1/vms/${n}/restart`],
      ['POST', `/api/v1/vms/${n}/deploy-agent`],
      ['DELETE', `/api/v1/vms/${n}`],
      ['GET', `/api/v1/vms/${'x'.repeat(65)}`],
      ['GET', '/api/v1/vms/bad%20name'],
    ];
    for (const [method, url] of routes) {
      const r = await h.req(method, url);
      assert.equal(r.status, 404, `${method} ${url} → ${r.text}`);
      assert.equal(errorOf(r).code, 'VM_NOT_FOUND', `${method} ${url}`);
    }
    const op = await h.req('GET', '/api/v1/operations/op-00000000-0000-0000-0000-000000000000');
    assert.equal(op.status, 404);
    assert.equal(errorOf(op).code, 'OPERATION_NOT_FOUND');
    assert.equal((await h.req('GET', `/api/v1/operations/${'z'.repeat(200)}`)).status, 404);
  });

  test('state conflicts: 409 VM_ALREADY_EXISTS, VM_NOT_RUNNING, VM_RUNNING', async () => {
    const n = uniqueName('conf');
    await h.createVm(n, { start: false });
    const dup = await h.req('POST', '/api/v1/vms', { name: n });
    assert.equal(dup.status, 409);
    assert.equal(errorOf(dup).code, 'VM_ALREADY_EXISTS');
    for (const action of ['restart', 'deploy-agent']) {
      const r = await h.req('POST', `/api/v1/vms/${n}/${action}`);
      assert.equal(r.status, 409, r.text);
      assert.equal(errorOf(r).code, 'VM_NOT_RUNNING');
    }
    assert.equal((await h.req('POST', `/api/v1/vms/${n}/start`)).status, 200);
    const del = await h.req('DELETE', `/api/v1/vms/${n}`);
    assert.equal(del.status, 409);
    assert.equal(errorOf(del).code, 'VM_RUNNING');
    assert.match(errorOf(del).message, /force=true/);
    assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=1&delete_disk=1`)).status, 200);
  });

  test('bad restart bodies and queries are 400', async () => {
    const n = uniqueName('badq');
    await h.createVm(n, { start: false });
    for (const body of [
      { mode: 'soft' },
      { timeout_seconds: -1 },
      { timeout_seconds: 3601 },
      { timeout_seconds: '5' },
      { mode: 'hard', extra: 1 },
    ]) {
      const r = await h.req('POST', `/api/v1/vms/${n}/restart`, body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
      assert.equal(errorOf(r).code, 'request.invalid');
    }
    assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=maybe`)).status, 400);
    assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?delete_disk=2`)).status, 400);
    assert.equal((await h.req('GET', '/api/v1/vms?state=sleeping')).status, 400);
    assert.equal((await h.req('GET', `/api/v1/vms?prefix=${'p'.repeat(65)}`)).status, 400);
    assert.equal((await h.req('DELETE', `/api/v1/vms/${n}`)).status, 200);
  });

  test('a create whose agent never connects fails with PROVISIONING_ERROR; meanwhile the VM is busy', async () => {
    const n = uniqueName('noagent');
    h.unreachable.add(n);
    const r = await h.req('POST', '/api/v1/vms', { name: n });
    assert.equal(r.status, 202);
    const id = String((r.json() as { operation: Json }).operation['id']);
    // While the create runs, other changes are refused with a message naming it.
    for (const [method, url] of [
      ['DELETE', `/api/v1/vms/${n}?force=true`],
      ['POST', `/api/v1/vms/${n}/stop`],
      ['POST', `/api/v1/vms/${n}/restart`],
    ] as const) {
      const busy = await h.req(method, url);
      assert.equal(busy.status, 409, `${method} ${url} → ${busy.text}`);
      assert.equal(errorOf(busy).code, 'VM_BUSY');
      assert.ok(errorOf(busy).message.includes(id), errorOf(busy).message);
    }
    const again = await h.req('POST', '/api/v1/vms', { name: n });
    assert.equal(errorOf(again).code, 'VM_ALREADY_EXISTS');
    const op = await h.waitOp(id);
    assert.equal(op['status'], 'failed');
    assert.equal(op['error_code'], 'PROVISIONING_ERROR');
    assert.match(
      String(op['error']),
      /timed out after 4 s waiting for the agent of VM .* to connect \(agent process \d+ is running; see .*agent\.log\)/,
    );
    assert.equal(op['result'], undefined);
    assert.equal(op['progress_percent'], 70);
    assert.ok(typeof op['completed_at'] === 'string');
    const failedEvent = h.events.query({ vmName: n, eventType: 'vm.operation.failed', limit: 5 }).events[0];
    assert.equal(failedEvent?.details['error_code'], 'PROVISIONING_ERROR');
    // The VM is left for inspection; a forced delete cleans up.
    assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)).status, 200);
    h.unreachable.delete(n);
  });

  test('an unreachable hypervisor: VM routes answer 503 HYPERVISOR_UNAVAILABLE with Retry-After', async () => {
    const config = loopbackConfig(h.stateDir, {
      SVC_ACTORS: 'inline',
      SVC_ACTOR_SHARDS: '1',
      SVC_HYPERVISOR_URI: `test+unix:///default?socket=${h.stateDir}/nonexistent.sock`,
      SVC_HYPERVISOR_READ_BUDGET_MS: '500',
      SVC_HYPERVISOR_WRITE_BUDGET_MS: '1000',
      SVC_HYPERVISOR_FAILURE_THRESHOLD: '1',
      SVC_HYPERVISOR_COOLDOWN_MS: '60000',
      SVC_HYPERVISOR_VIRSH_EVENTS: 'off',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
    });
    const vms = vmsComponent({
      agents: { byVm: () => null },
      grpcAddress: { host: '127.0.0.1', port: 1 },
      caProvider: () => Promise.reject(new Error('unused')),
    });
    const server = await startServer(config, pino({ level: 'silent' }), {
      components: [eventsComponent(), actorsComponent, hypervisorComponent, vms],
    });
    try {
      const router = server.router;
      for (const [method, url, body] of [
        ['GET', '/api/v1/vms', undefined],
        ['GET', '/api/v1/vms/agent-x', undefined],
        ['POST', '/api/v1/vms', { name: 'agent-x' }],
        ['POST', '/api/v1/vms/agent-x/start', undefined],
      ] as const) {
        const r = await inject(router, { method, url, ...(body !== undefined ? { body } : {}) });
        assert.equal(r.status, 503, `${method} ${url} → ${r.text}`);
        assert.equal(errorOf(r).code, 'HYPERVISOR_UNAVAILABLE');
        assert.match(r.headers['retry-after'] ?? '', /^\d+$/);
      }
    } finally {
      await server.stop();
    }
  });
});
