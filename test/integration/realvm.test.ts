/**
 * Real VMs (issue 9), on libvirt qemu:///system with the minimal image: KVM where the host has
 * usable hardware virtualisation, TCG otherwise (this machine kind: /dev/kvm is kvm_pvm). The
 * harness builds the image, starts libvirtd + virtlogd and an isolated network of its own, and
 * the whole server; every wait is bounded. In order, in one file, so one daemon serves them all:
 *
 *   1. one VM through the HTTP API: its agent dials in over mTLS (no secret on QEMU's command
 *      line), a session's command output comes back through SSE, Exec works, and a task in a VM
 *      of its own edits the cloned repository and leaves an artifact; stop and delete leave no
 *      domain, folder or QEMU process;
 *   2. four VMs created at once all reach running with connected agents, and a hostile guest (one
 *      VM's agent claiming another VM's instance id) is refused without disturbing the victim.
 *
 * Skipped, loudly, only where QEMU cannot run at all (not root, or no QEMU and no apt-get).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execCollect, operatorClient, waitFor } from './agents-harness.js';
import { skipReason, startRealVmEnv, type RealVmEnv } from '../support/realvm.js';
import { bytesOf, SseClient } from './streaming-clients.js';

const skip = skipReason();
if (skip !== null) process.stderr.write(`\n*** ${skip} ***\n\n`);

type Json = Record<string, unknown>;
interface Agent {
  id: string;
  hostname: string;
  status: string;
  connected_at: number;
}

function qemuPids(vm: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes('qemu-system') && l.includes(`guest=${vm},`))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

async function refusedTotal(env: RealVmEnv): Promise<number> {
  const text = await (await fetch(`${base(env)}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('svc_agent_calls_refused_total{'))
    .reduce((s, l) => s + Number(l.split(' ').at(-1)), 0);
}

const base = (env: RealVmEnv): string => `http://127.0.0.1:${env.server.ports.http}`;

async function api(env: RealVmEnv, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const init: RequestInit =
    body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
  const res = await fetch(`${base(env)}${path}`, init);
  const text = await res.text();
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Json), text };
}

async function createVm(env: RealVmEnv, name: string, memoryMb: number, more: Json = {}): Promise<string> {
  const r = await api(env, 'POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: memoryMb, disk_gb: 2, ...more });
  assert.equal(r.status, 202, r.text);
  return String((r.body['operation'] as Json)['id']);
}

function assertGone(env: RealVmEnv, name: string): void {
  assert.ok(
    !env
      .virsh('list', '--all', '--name')
      .split('\n')
      .map((l) => l.trim())
      .includes(name),
    `domain ${name} left behind`,
  );
  assert.ok(!existsSync(join(env.dir, 'vms', name)), `VM folder of ${name} (overlay, fw_cfg files) left behind`);
  assert.deepEqual(qemuPids(name), [], `QEMU of ${name} still running`);
}

void describe('real VMs (qemu:///system)', { skip: skip ?? false, timeout: 1_500_000 }, () => {
  let env: RealVmEnv;

  before(
    async () => {
      env = await startRealVmEnv('rv');
    },
    { timeout: 900_000 },
  );

  after(
    async () => {
      await env?.stop();
      // The harness's own network (its bridge) is gone too.
      if (env !== undefined) assert.ok(!existsSync(`/sys/class/net/${env.net.bridge}`), `bridge ${env.net.bridge} left behind`);
    },
    { timeout: 180_000 },
  );

  void test(
    'create → agent over mTLS → session output via SSE → Exec → a task edits the repo in its own VM → stop and delete leave nothing',
    { timeout: 600_000 },
    async () => {
      // The VM takes a loadout: the built image gets it by fw_cfg and its agent applies it.
      const loadout = await fetch(`${base(env)}/api/v2/loadouts/rv-tools`, {
        method: 'POST',
        headers: { 'content-type': 'application/yaml' },
        body: 'metadata: {name: rv-tools}\nenvironment: {RV_TOOLS_HOME: /opt/rv-tools}\nfiles: [{path: notes/hello.txt, content: "loadout file\\n", mode: "0640"}]\n',
      });
      assert.equal(loadout.status, 201, await loadout.text());
      const t0 = Date.now();
      await env.waitOp(await createVm(env, 'agent-rv1', 512, { loadout: 'rv-tools' }), 240_000);
      process.stderr.write(`realvm: agent-rv1 create → agent connected in ${Date.now() - t0} ms (accelerator ${env.prep.accelerator})\n`);

      const detail = (await api(env, 'GET', '/api/v1/vms/agent-rv1')).body;
      assert.equal(detail['state'], 'running');
      assert.equal((detail['agent'] as Json)['connected'], true);
      assert.equal((detail['agent'] as Json)['hostname'], 'agent-rv1');
      assert.equal(detail['accelerator'], env.prep.accelerator, `VM detail names the accelerator in use: ${JSON.stringify(detail)}`);
      assert.match(String(detail['ip_address']), new RegExp(`^${env.net.hostAddress.replace(/\.1$/, '').replace(/\./g, '\\.')}\\.\\d+$`));
      const health = (await api(env, 'GET', '/healthz/hypervisor')).body;
      assert.match(JSON.stringify(health), new RegExp(`"accelerator":"${env.prep.accelerator}"`), JSON.stringify(health));

      // The QEMU command line carries fw_cfg file paths, never the key or settings themselves.
      const pids = qemuPids('agent-rv1');
      assert.equal(pids.length, 1);
      const cmdline = await readFile(`/proc/${pids[0]}/cmdline`, 'utf8');
      assert.ok(!cmdline.includes('PRIVATE KEY') && !cmdline.includes('SBX_'), 'secrets on the QEMU command line');
      assert.ok(cmdline.includes('opt/sandboxd/agent-key.pem'));
      // The minimal image has no sshd: QEMU gets no SSH fw_cfg file, and the SSH connector is told why (ssh.no_endpoint).
      assert.ok(!cmdline.includes('opt/sandboxd/ssh-'));
      assert.deepEqual(await env.server.service('vms').sshAddress('agent-rv1'), {
        none: "VM 'agent-rv1' runs the minimal image, which has no sshd (use the debian image)",
      });

      // A session (tmux in the guest) runs a command; its output arrives through SSE.
      const session = await api(env, 'POST', '/api/v1/agents/agent-rv1/sessions', {
        session_name: 'rv-sse',
        command: 'echo "sse-from-$(hostname)-$((6*7))"; sleep 600',
      });
      assert.equal(session.status, 200, session.text);
      const sse = await SseClient.open(
        `${base(env)}/api/v1/agent-output/stream?agent_id=agent-rv1&command_id=${String(session.body['command_id'])}`,
      );
      try {
        assert.equal(sse.status, 200);
        await sse.until('the session output on SSE', (events) => bytesOf(events).toString().includes('sse-from-agent-rv1-42'), 120_000);
      } finally {
        sse.close();
      }
      const killed = await api(env, 'DELETE', `/api/v1/agents/agent-rv1/sessions/${String(session.body['session_id'])}?signal=TERM`);
      assert.equal(killed.status, 200, killed.text);

      // The agent share: the VM's inbox and outbox are 9p mounts in the guest's work dir. What the
      // host puts in the inbox the guest reads; what the guest leaves in its outbox the outbox
      // download route serves.
      const storageDir = env.server.config.storageDir;
      await writeFile(join(storageDir, 'inbox', 'agent-rv1', 'from-host.txt'), 'inbox file\n');
      const client = await operatorClient(env);
      try {
        const shared = await execCollect(
          client,
          {
            agentId: 'agent-rv1',
            command: 'sh',
            args: [
              '-c',
              'cat inbox/from-host.txt && mkdir -p outbox/notes && echo "from $(hostname)" > outbox/notes/from-guest.txt && grep -c " 9p " /proc/mounts',
            ],
          },
          120_000,
        );
        assert.equal(shared.status.code, 0, `${shared.status.details} ${shared.stderr.toString()}`);
        assert.equal(shared.stdout.toString(), 'inbox file\n2\n');
        const fromGuest = await fetch(`${base(env)}/api/v1/storage/outbox/agent-rv1/_download?path=notes%2Ffrom-guest.txt`);
        assert.equal(fromGuest.status, 200);
        assert.equal(await fromGuest.text(), 'from agent-rv1\n');

        const out = await execCollect(
          client,
          {
            agentId: 'agent-rv1',
            command: 'sh',
            args: [
              '-c',
              'echo "hello from $(hostname)"; uname -s; node --version; cat notes/hello.txt; stat -c %a notes/hello.txt; echo "home=$RV_TOOLS_HOME"',
            ],
          },
          120_000,
        );
        assert.equal(out.status.code, 0, out.status.details);
        assert.match(out.stdout.toString(), /hello from agent-rv1\nLinux\nv20\.[^\n]*\nloadout file\n640\nhome=\/opt\/rv-tools\n$/);
      } finally {
        client.close();
      }

      // A task: its own VM, the host's shallow clone copied in, the command edits it and leaves an
      // artifact in the guest's outbox, which comes back with a checksum; the VM goes away.
      const repo = join(env.dir, 'repo');
      await mkdir(repo);
      const git = (...args: string[]): string =>
        execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=T', '-c', 'init.defaultBranch=main', ...args], {
          cwd: repo,
          encoding: 'utf8',
        });
      git('init', '-q');
      await writeFile(join(repo, 'hello.txt'), 'hello world\n');
      git('add', '.');
      git('commit', '-qm', 'first');
      const script =
        'set -e; printf "edited in %s\\n" "$(hostname)" >> hello.txt; git diff > "$SANDBOX_OUTBOX/change.diff"; mkdir -p "$SANDBOX_OUTBOX/notes"; echo "{prompt}" > "$SANDBOX_OUTBOX/notes/prompt.txt"';
      const submitted = await api(env, 'POST', '/api/v1/tasks', {
        manifest: {
          name: 'rv-task',
          repository: { url: repo },
          agent: { prompt: 'append a line', model: 'none', command: ['sh', '-c', script] },
          lifecycle: { timeout: '15m' },
        },
      });
      assert.equal(submitted.status, 202, submitted.text);
      const taskId = String(submitted.body['task_id']);
      const task = await waitFor(
        'the task to finish',
        async () => {
          const r = (await api(env, 'GET', `/api/v1/tasks/${taskId}`)).body;
          return ['completed', 'failed', 'failed_preserved', 'cancelled'].includes(String(r['state'])) ? r : undefined;
        },
        400_000,
        1000,
      );
      assert.equal(task['state'], 'completed', JSON.stringify(task));
      const arts = (
        (await api(env, 'GET', `/api/v1/tasks/${taskId}/artifacts`)).body['artifacts'] as Array<{ name: string; checksum: string }>
      )
        .map((a) => a.name)
        .sort();
      assert.deepEqual(arts, ['change.diff', 'notes/prompt.txt']);
      const diff = await (await fetch(`${base(env)}/api/v1/tasks/${taskId}/artifacts/change.diff`)).text();
      assert.match(diff, new RegExp(`^\\+edited in ${String(task['vm_name'])}$`, 'm'), diff);
      assert.match(diff, /^ hello world$/m);
      assert.equal(
        (await (await fetch(`${base(env)}/api/v1/tasks/${taskId}/artifacts/notes%2Fprompt.txt`)).text()).trim(),
        'append a line',
      );
      // The domain goes first (404), then the delete operation purges the VM's folder: wait for both.
      await waitFor(
        'the task VM and its folder to be deleted',
        async () =>
          (await api(env, 'GET', `/api/v1/vms/${String(task['vm_name'])}`)).status === 404 &&
          !existsSync(join(env.dir, 'vms', String(task['vm_name']))),
        120_000,
        500,
      );
      assertGone(env, String(task['vm_name']));

      // Stop (power off: the busybox guest has no ACPI daemon for a graceful stop), then delete.
      const stopped = await api(env, 'POST', '/api/v1/vms/agent-rv1/destroy');
      assert.equal(stopped.status, 200, stopped.text);
      await waitFor(
        'agent-rv1 to be stopped',
        async () => (await api(env, 'GET', '/api/v1/vms/agent-rv1')).body['state'] === 'stopped',
        60_000,
        500,
      );
      const del = await api(env, 'DELETE', '/api/v1/vms/agent-rv1?force=true&delete_disk=true');
      assert.equal(del.status, 200, del.text);
      assert.equal(del.body['disk_deleted'], true);
      assertGone(env, 'agent-rv1');
    },
  );

  void test('four VMs at once reach running with agents connected; a hostile guest is refused', { timeout: 700_000 }, async () => {
    const names = ['agent-rv2', 'agent-rv3', 'agent-rv4', 'agent-rv5'];
    const t0 = Date.now();
    const ops = await Promise.all(names.map((n) => createVm(env, n, 256)));
    await Promise.all(ops.map((id) => env.waitOp(id, 480_000)));
    process.stderr.write(
      `realvm: ${names.length} VMs created at once, all agents connected in ${Date.now() - t0} ms (accelerator ${env.prep.accelerator})\n`,
    );
    const agents = (await api(env, 'GET', '/api/v1/agents')).body['agents'] as Agent[];
    for (const n of names) assert.equal(agents.find((a) => a.id === n)?.hostname, n, `agent ${n} not connected: ${JSON.stringify(agents)}`);
    const details = await Promise.all(names.map(async (n) => (await api(env, 'GET', `/api/v1/vms/${n}`)).body));
    for (const d of details) assert.equal(d['state'], 'running');
    // Created at once, yet each has an address of its own (they once all got .10 and stole each
    // other's connections).
    assert.equal(new Set(details.map((d) => d['ip_address'])).size, names.length, JSON.stringify(details.map((d) => d['ip_address'])));

    // Hostile guest: agent-rv5 boots again (behind sandboxd's back) told to be agent-rv2's instance.
    const victim = String((await api(env, 'GET', '/api/v1/vms/agent-rv2')).body['uuid']);
    const envFile = join(env.dir, 'vms', 'agent-rv5', 'fwcfg', 'agent.env');
    const original = await readFile(envFile, 'utf8');
    await writeFile(
      envFile,
      original.replace(/^SBX_INSTANCE_ID=.*$/m, `SBX_INSTANCE_ID=${victim}`).replace(/^SBX_AGENT_ID=.*$/m, 'SBX_AGENT_ID=agent-rv2'),
    );
    const refusedBefore = await refusedTotal(env);
    env.virsh('destroy', 'agent-rv5');
    env.virsh('start', 'agent-rv5');
    await waitFor('the hostile agent to be refused', async () => (await refusedTotal(env)) > refusedBefore, 240_000, 1000);
    const victimNow = ((await api(env, 'GET', '/api/v1/agents')).body['agents'] as Agent[]).find((a) => a.id === 'agent-rv2');
    assert.equal(victimNow?.hostname, 'agent-rv2');
    // The victim's own connection was neither replaced nor dropped.
    assert.equal(victimNow?.connected_at, agents.find((a) => a.id === 'agent-rv2')?.connected_at);
    const victimConsole = await readFile(join(env.dir, 'vms', 'agent-rv2', 'console.log'), 'utf8').catch(() => '');
    assert.notEqual(victimNow?.status, 'Disconnected', `the victim's agent was dropped; its console ends:\n${victimConsole.slice(-3000)}`);

    for (const n of names) {
      const r = await api(env, 'DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`);
      assert.equal(r.status, 200, r.text);
    }
    for (const n of names) assertGone(env, n);
  });
});
