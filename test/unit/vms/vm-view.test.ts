import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { DomainInfo } from '../../../src/hypervisor/port.js';
import { registryAgentLookup } from '../../../src/vms/agent-lookup.js';
import { vmDetailJson, vmJson } from '../../../src/vms/vm-view.js';

const d: DomainInfo = {
  name: 'agent-v',
  uuid: 'u-1',
  state: 'running',
  vcpus: 2,
  memoryMiB: 1024,
  host: 'test:///default',
  uptimeSeconds: 12,
  ipAddress: null,
  metadata: { profile: 'basic', diskGiB: 20, instanceId: 'u-1' },
};

describe('VM JSON', () => {
  test("list entries have exactly the spec's fields; ip_address is a string even when unknown", () => {
    assert.deepEqual(vmJson(d, null), {
      name: 'agent-v',
      state: 'running',
      uuid: 'u-1',
      vcpus: 2,
      memory_mb: 1024,
      ip_address: '',
      uptime_seconds: 12,
    });
    assert.equal(
      vmJson({ ...d, ipAddress: '10.0.0.5' }, { connected: true, connected_at: 1, hostname: 'h', ip_address: '10.9.9.9' }).ip_address,
      '10.0.0.5',
    );
    assert.equal(vmJson(d, { connected: true, connected_at: 1, hostname: 'h', ip_address: '10.9.9.9' }).ip_address, '10.9.9.9');
  });

  test('detail adds the agent: connected false alone when none is known', () => {
    assert.deepEqual(vmDetailJson(d, null).agent, { connected: false });
    assert.deepEqual(vmDetailJson(d, { connected: true, connected_at: 1700, hostname: 'box' }).agent, {
      connected: true,
      connected_at: 1700,
      hostname: 'box',
    });
    const x = vmDetailJson(d, null);
    assert.deepEqual([x.host, x.profile, x.disk_gb], ['test:///default', 'basic', 20]);
  });

  test("registryAgentLookup: by agent id = VM name, ignoring a former VM's agent with another instance id", () => {
    const entries = new Map([
      ['agent-v', { status: 'Ready', connected_at: 5, hostname: 'h', ip_address: '1.2.3.4', instance_id: 'u-1' }],
      ['agent-old', { status: 'Disconnected', connected_at: 1, hostname: 'o', ip_address: '', instance_id: 'u-0' }],
    ]);
    const lookup = registryAgentLookup({ get: (id) => entries.get(id) });
    assert.deepEqual(lookup.byVm('agent-v', 'u-1'), { connected: true, connected_at: 5, hostname: 'h', ip_address: '1.2.3.4' });
    assert.equal(lookup.byVm('agent-old', 'u-9'), null);
    assert.equal(lookup.byVm('agent-old', null)?.connected, false);
    assert.equal(lookup.byVm('agent-none', null), null);
  });
});
