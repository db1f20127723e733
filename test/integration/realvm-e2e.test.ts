/**
 * A real VM end to end (issue 9): the minimal image boots under QEMU (TCG here: /dev/kvm is
 * kvm_pvm on this machine kind) through libvirt qemu:///system; its sandbox-agent dials sandboxd's
 * gRPC listener over mTLS from an isolated network; a command's output comes back; delete leaves
 * no domain, overlay, fw_cfg file or QEMU process behind. Each wait is bounded.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execCollect, operatorClient } from './agents-harness.js';
import { skipReason, startRealVmEnv, type RealVmEnv } from './realvm-harness.js';

const skip = skipReason();
if (skip !== null) process.stderr.write(`\n*** ${skip} ***\n\n`);

interface VmDetail {
  name: string;
  state: string;
  ip_address?: string | null;
  agent?: { connected: boolean; hostname?: string };
}

function qemuPids(vm: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.includes('qemu-system') && l.includes(`guest=${vm},`)).map((l) => Number(l.trim().split(/\s+/)[0]));
}

void describe('real VM (qemu:///system)', { skip: skip ?? false, timeout: 600_000 }, () => {
  let env: RealVmEnv;

  before(async () => {
    env = await startRealVmEnv('e2e');
  }, { timeout: 300_000 });

  after(async () => {
    await env?.stop();
  }, { timeout: 120_000 });

  void test('create → agent over mTLS → command output → delete leaves nothing', { timeout: 400_000 }, async () => {
    const t0 = Date.now();
    const created = await env.ts.postJson<{ operation: { id: string } }>('/api/v1/vms', { name: 'agent-rv1', profile: 'basic', vcpus: 1, memory_mb: 512, disk_gb: 2 });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await env.waitOp(created.body.operation.id, 180_000);
    const readyMs = Date.now() - t0;
    process.stderr.write(`realvm: agent-rv1 create → agent connected in ${readyMs} ms (accelerator ${env.prep.accelerator})\n`);

    const detail = await env.ts.getJson<VmDetail>('/api/v1/vms/agent-rv1');
    assert.equal(detail.body.state, 'running');
    assert.equal(detail.body.agent?.connected, true);
    assert.equal(detail.body.agent?.hostname, 'agent-rv1');
    assert.match(String(detail.body.ip_address), new RegExp(`^${env.net.hostAddress.replace(/\.1$/, '').replace(/\./g, '\\.')}\\.\\d+$`));

    // The QEMU command line carries fw_cfg file paths, never the key or settings themselves.
    const pids = qemuPids('agent-rv1');
    assert.equal(pids.length, 1);
    const cmdline = execFileSync('cat', [`/proc/${pids[0]}/cmdline`], { encoding: 'utf8' });
    assert.ok(!cmdline.includes('PRIVATE KEY') && !cmdline.includes('SBX_'), 'secrets on the QEMU command line');
    assert.ok(cmdline.includes('opt/sandboxd/agent-key.pem'));

    const client = await operatorClient(env.ts);
    try {
      const out = await execCollect(client, { agentId: 'agent-rv1', command: 'sh', args: ['-c', 'echo "hello from $(hostname)"; uname -s; node --version'] }, 120_000);
      assert.equal(out.status.code, 0, out.status.details);
      assert.match(out.stdout.toString(), /hello from agent-rv1\nLinux\nv20\./);
      assert.equal(out.final?.exitCode, 0);
    } finally {
      client.close();
    }

    // destroy (power off): the busybox guest has no ACPI daemon to honour a graceful stop.
    const stopped = await fetch(`http://127.0.0.1:${env.ts.server.ports.http}/api/v1/vms/agent-rv1/destroy`, { method: 'POST' });
    assert.equal(stopped.status, 200, await stopped.text());
    const del = await fetch(`http://127.0.0.1:${env.ts.server.ports.http}/api/v1/vms/agent-rv1?force=true&delete_disk=true`, { method: 'DELETE' });
    assert.equal(del.status, 200, await del.clone().text());
    assert.equal(((await del.json()) as { disk_deleted: boolean }).disk_deleted, true);
    assert.ok(!env.virsh('list', '--all', '--name').split('\n').includes('agent-rv1'), 'domain left behind');
    assert.ok(!existsSync(join(env.ts.dir, 'vms', 'agent-rv1')), 'VM folder (overlay, fw_cfg files) left behind');
    assert.deepEqual(qemuPids('agent-rv1'), []);
  });
});
