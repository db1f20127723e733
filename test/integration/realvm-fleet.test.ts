/**
 * Several real VMs (issue 9): four guests created at once all reach running with their agents
 * connected over mTLS; a hostile guest (one VM's agent presenting another VM's instance id with
 * its own certificate) is refused and the other VM's agent is undisturbed; deleting them leaves
 * no domain or folder behind. TCG here, so every wait is generous but bounded.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './agents-harness.js';
import { skipReason, startRealVmEnv, type RealVmEnv } from './realvm-harness.js';

const skip = skipReason();
if (skip !== null) process.stderr.write(`\n*** ${skip} ***\n\n`);

const NAMES = ['agent-rv2', 'agent-rv3', 'agent-rv4', 'agent-rv5'];

interface Agent { id: string; hostname: string; status: string; connected_at: number }

async function refusedTotal(env: RealVmEnv): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${env.ts.server.ports.http}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('svc_agent_calls_refused_total{')).reduce((s, l) => s + Number(l.split(' ').at(-1)), 0);
}

void describe('real VM fleet (qemu:///system)', { skip: skip ?? false, timeout: 900_000 }, () => {
  let env: RealVmEnv;

  before(async () => {
    env = await startRealVmEnv('flt');
  }, { timeout: 300_000 });

  after(async () => {
    await env?.stop();
  }, { timeout: 180_000 });

  void test('four VMs at once reach running with agents connected; a hostile guest is refused', { timeout: 700_000 }, async () => {
    const t0 = Date.now();
    const ops = await Promise.all(NAMES.map(async (name) => {
      const r = await env.ts.postJson<{ operation: { id: string } }>('/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1 });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      return r.body.operation.id;
    }));
    await Promise.all(ops.map((id) => env.waitOp(id, 400_000)));
    process.stderr.write(`realvm: ${NAMES.length} VMs created at once, all agents connected in ${Date.now() - t0} ms (accelerator ${env.prep.accelerator})\n`);
    const agents = (await env.ts.getJson<{ agents: Agent[] }>('/api/v1/agents')).body.agents;
    for (const n of NAMES) assert.equal(agents.find((a) => a.id === n)?.hostname, n, `agent ${n} not connected: ${JSON.stringify(agents)}`);

    // Hostile guest: agent-rv5 boots again (behind sandboxd's back) told to be agent-rv2's instance.
    const victim = (await env.ts.getJson<{ uuid: string }>('/api/v1/vms/agent-rv2')).body.uuid;
    const envFile = join(env.ts.dir, 'vms', 'agent-rv5', 'fwcfg', 'agent.env');
    const original = await readFile(envFile, 'utf8');
    await writeFile(envFile, original.replace(/^SBX_INSTANCE_ID=.*$/m, `SBX_INSTANCE_ID=${victim}`).replace(/^SBX_AGENT_ID=.*$/m, 'SBX_AGENT_ID=agent-rv2'));
    const refusedBefore = await refusedTotal(env);
    env.virsh('destroy', 'agent-rv5');
    env.virsh('start', 'agent-rv5');
    await waitFor('the hostile agent to be refused', async () => (await refusedTotal(env)) > refusedBefore, 240_000, 1000);
    const after = (await env.ts.getJson<{ agents: Agent[] }>('/api/v1/agents')).body.agents.find((a) => a.id === 'agent-rv2');
    assert.equal(after?.hostname, 'agent-rv2');
    // The victim's own connection was neither replaced nor dropped.
    assert.equal(after?.connected_at, agents.find((a) => a.id === 'agent-rv2')?.connected_at);
    const victimConsole = await readFile(join(env.ts.dir, 'vms', 'agent-rv2', 'console.log'), 'utf8').catch(() => '');
    assert.notEqual(after?.status, 'Disconnected', `the victim's agent was dropped; its console ends:\n${victimConsole.slice(-3000)}`);

    for (const n of NAMES) {
      const r = await fetch(`http://127.0.0.1:${env.ts.server.ports.http}/api/v1/vms/${n}?force=true&delete_disk=true`, { method: 'DELETE' });
      assert.equal(r.status, 200, await r.text());
    }
    const left = env.virsh('list', '--all', '--name').split('\n').map((l) => l.trim());
    for (const n of NAMES) {
      assert.ok(!left.includes(n), `domain ${n} left behind`);
      assert.ok(!existsSync(join(env.ts.dir, 'vms', n)), `folder of ${n} left behind`);
    }
  });
});
