/**
 * Pre-enrollment checkpoints on real VMs (spec 4.10, the real-VM phase of the checkpoints issue):
 * libvirt qemu:///system with the minimal image (TCG on this machine kind). The harness builds the
 * image, starts libvirtd + virtlogd and a network of its own, and the whole server; its HTTP
 * listener is reachable on the bridge so guests reach the consume URL (SVC_BOOTSTRAP_CONSUME_URL).
 *
 *   1. a deferred-enrollment VM boots with no certificate and its agent waits for bootstrap
 *      material; a checkpoint saves it (the VM leaves libvirt); the restore gives it a fresh
 *      instance id, a fresh overlay and a single-use token through its fw_cfg file; its agent
 *      enrolls and is Ready with the fresh instance id; the token is on no process's command line
 *      (QEMU's included), the guest's clock is the present one, and a delete leaves nothing;
 *   2. checkpoint → restored agent Ready against a cold create → agent connected, alternated a few
 *      times and printed (measured, not asserted: the bench is where speed is judged).
 *
 * Skipped, loudly, only where QEMU cannot run at all (not root, or no QEMU and no apt-get).
 */
import assert from 'node:assert/strict';
import { status as grpcStatus } from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execCollect, operatorClient, waitFor } from './agents-harness.js';
import { findPackageRoot } from '../../src/image/command.js';
import { skipReason, startRealVmEnv, type RealVmEnv } from '../support/realvm.js';

const skip = skipReason();
if (skip !== null) process.stderr.write(`\n*** ${skip} ***\n\n`);

type Json = Record<string, unknown>;

const base = (env: RealVmEnv): string => `http://127.0.0.1:${env.server.ports.http}`;

async function api(env: RealVmEnv, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const init: RequestInit =
    body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
  const res = await fetch(`${base(env)}${path}`, init);
  const text = await res.text();
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Json), text };
}

/** Polls an admin operation until completed (its body) or failed (rejects with it). */
async function adminOp(env: RealVmEnv, id: string, timeoutMs: number): Promise<Json> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await api(env, 'GET', `/api/v2/admin/operations/${id}`);
    if (r.body['status'] === 'failed') throw new Error(`operation ${id} failed: ${r.text}`);
    if (r.body['status'] === 'completed') return r.body;
    if (Date.now() > deadline) throw new Error(`operation ${id} still ${String(r.body['status'])} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

function opId(r: { status: number; body: Json; text: string }): string {
  assert.equal(r.status, 202, r.text);
  return String((r.body['operation'] as Json)['id']);
}

async function createVm(env: RealVmEnv, name: string, deferred: boolean): Promise<void> {
  const r = await api(env, 'POST', '/api/v1/vms', {
    name,
    profile: 'basic',
    vcpus: 1,
    memory_mb: 256,
    disk_gb: 2,
    ...(deferred && { enrollment: 'deferred' }),
  });
  await env.waitOp(opId(r), 240_000);
}

async function deleteVm(env: RealVmEnv, name: string): Promise<void> {
  const r = await api(env, 'DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`);
  if (r.status === 202) await env.waitOp(String((r.body['operation'] as Json)['id']), 120_000);
  else assert.equal(r.status, 200, r.text);
}

async function checkpoint(env: RealVmEnv, vm: string, id: string): Promise<void> {
  const r = await api(env, 'POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: id, pre_enrollment: true });
  await adminOp(env, opId(r), 240_000);
}

async function restore(env: RealVmEnv, id: string): Promise<Json> {
  const r = await api(env, 'POST', `/api/v2/admin/hypervisor/checkpoints/${id}/restore`, {});
  return (await adminOp(env, opId(r), 240_000))['result'] as Json;
}

function domains(env: RealVmEnv): string[] {
  return env
    .virsh('list', '--all', '--name')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

function qemuPids(vm: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes('qemu-system') && l.includes(`guest=${vm},`))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

/** Every command line seen in /proc while it runs (the `ps` test, sampled every 20 ms). */
class CmdlineScanner {
  readonly seen = new Set<string>();
  readonly #timer: NodeJS.Timeout;
  constructor() {
    this.#timer = setInterval(() => this.scan(), 20);
    this.scan();
  }
  scan(): void {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        this.seen.add(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
      } catch {
        /* gone */
      }
    }
  }
  stop(): void {
    clearInterval(this.#timer);
    this.scan();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

void describe('real VMs: pre-enrollment checkpoints (qemu:///system)', { skip: skip ?? false, timeout: 1_800_000 }, () => {
  let env: RealVmEnv;

  before(
    async () => {
      env = await startRealVmEnv('ck', {
        env: (net, ports) => ({
          // Guests enroll at the consume route over the isolated bridge (plaintext: the host-only network of this test).
          SVC_HTTP_ADDR: `0.0.0.0:${ports.http}`,
          SVC_ALLOW_INSECURE_REMOTE: '1',
          SVC_BOOTSTRAP_CONSUME_URL: `http://${net.hostAddress}:${ports.http}/api/v1/bootstrap-enrollment/consume`,
        }),
      });
    },
    { timeout: 900_000 },
  );

  after(
    async () => {
      await env?.stop();
      if (env !== undefined) assert.ok(!existsSync(`/sys/class/net/${env.net.bridge}`), `bridge ${env.net.bridge} left behind`);
    },
    { timeout: 180_000 },
  );

  void test(
    'a deferred VM is checkpointed before enrollment, restored with a fresh identity, enrolls by its fw_cfg token, and leaves nothing when deleted',
    { timeout: 900_000 },
    async () => {
      const vm = 'agent-rvck1';
      await createVm(env, vm, true);
      const fw = join(env.dir, 'vms', vm, 'fwcfg');
      // No identity was given: empty certificate files, the bootstrap placeholder, no agent in the registry.
      assert.equal(readFileSync(join(fw, 'agent-key.pem'), 'utf8'), '');
      assert.equal(readFileSync(join(fw, 'bootstrap.json'), 'utf8').trim(), '{}');
      const bootInstance = /instance-id>([^<]+)</.exec(env.virsh('dumpxml', vm))?.[1] ?? '';
      assert.notEqual(bootInstance, '');

      await checkpoint(env, vm, 'rvck-1');
      const ck = (await api(env, 'GET', '/api/v2/admin/hypervisor/checkpoints/rvck-1')).body;
      assert.equal(ck['status'], 'ready', JSON.stringify(ck));
      assert.ok(!domains(env).includes(vm), 'the checkpointed VM left libvirt (the image holds it)');
      assert.deepEqual(qemuPids(vm), []);
      const console1 = await readFile(join(env.dir, 'vms', vm, 'console.log'), 'utf8');
      assert.match(console1, /waiting for bootstrap material/);
      assert.doesNotMatch(console1, /enrolled: certificate written/);

      const scanner = new CmdlineScanner();
      let result: Json;
      try {
        result = await restore(env, 'rvck-1');
      } finally {
        scanner.stop();
      }
      const fresh = String(result['instance_id']);
      assert.match(fresh, /^[0-9a-f-]{36}$/);
      assert.notEqual(fresh, bootInstance);
      assert.deepEqual(result['agent'], { id: vm, status: 'Ready', instance_id: fresh });
      // The registry: the agent of the VM is Ready with the fresh instance id.
      const agent = env.server.service('agents').registry.get(vm);
      assert.equal(agent?.instance_id, fresh, JSON.stringify(agent));
      assert.equal(agent?.status, 'Ready');
      const detail = (await api(env, 'GET', `/api/v1/vms/${vm}`)).body;
      assert.equal(detail['state'], 'running');

      // The token reached the guest only by the fw_cfg file: on no command line, QEMU's included, and not in the operation.
      const material = JSON.parse(readFileSync(join(fw, 'bootstrap.json'), 'utf8').trim()) as { token: string; instance_id: string };
      assert.equal(material.instance_id, fresh);
      assert.ok(material.token.length >= 40);
      const qemuLines = [...scanner.seen].filter((l) => l.includes('qemu-system') && l.includes(`guest=${vm},`));
      assert.ok(qemuLines.length > 0, 'the scanner saw the restored QEMU');
      assert.ok(qemuLines.every((l) => l.includes('opt/sandboxd/bootstrap.json')));
      const leaking = [...scanner.seen].filter((l) => l.includes(material.token));
      assert.deepEqual(leaking, [], 'the raw token on a command line');
      const opText = JSON.stringify(result);
      assert.ok(!opText.includes(material.token));

      // The guest: enrolled into its tmpfs (the copied material deleted), its clock set to the present.
      const client = await operatorClient(env);
      try {
        const out = await execCollect(
          client,
          { agentId: vm, command: 'sh', args: ['-c', 'date +%s; ls /run/sbx/certs; ls /run/sbx'] },
          120_000,
        );
        assert.equal(out.status.code, 0, out.status.details);
        const [guestNow, ...rest] = out.stdout.toString().trim().split('\n');
        assert.ok(Math.abs(Number(guestNow) - Date.now() / 1000) < 60, `guest clock ${guestNow} is not the present one`);
        assert.ok(rest.includes('agent.pem') && rest.includes('agent-key.pem') && rest.includes('enrollment.json'), rest.join(','));
        assert.ok(!rest.includes('bootstrap.json'), 'the copied material was deleted after enrollment');

        // The agent share: QEMU cannot save a domain with a mounted 9p share, so the guest mounted
        // its inbox and outbox only once the restore brought its material; what the host puts in
        // the inbox the restored guest reads.
        await writeFile(join(env.server.config.storageDir, 'inbox', vm, 'after-restore.txt'), 'restored\n');
        const seen = await waitFor(
          'the restored guest to read its inbox',
          async () => {
            const r = await execCollect(client, { agentId: vm, command: 'cat', args: ['inbox/after-restore.txt'] }, 60_000);
            return r.status.code === grpcStatus.OK ? r.stdout.toString() : undefined;
          },
          60_000,
          500,
        );
        assert.equal(seen, 'restored\n');
        const console2 = await readFile(join(env.dir, 'vms', vm, 'console.log'), 'utf8');
        const waited = console2.indexOf('waiting for bootstrap material');
        const mounted = console2.indexOf('sbx-init: shares');
        assert.ok(waited >= 0 && mounted > waited, 'the shares were mounted after the save, not before');
      } finally {
        client.close();
      }

      // The guest's console (boot, the wait, the restore's enrollment) is kept for whoever debugs this on CI.
      await copyFile(join(env.dir, 'vms', vm, 'console.log'), join(findPackageRoot(process.cwd()), 'test-output', 'realvm-ck-console.log'));

      // A second restore of a consumed checkpoint is refused; a delete leaves no domain, overlay, image or QEMU.
      const again = await api(env, 'POST', '/api/v2/admin/hypervisor/checkpoints/rvck-1/restore', {});
      assert.equal(again.status, 409, again.text);
      await deleteVm(env, vm);
      assert.ok(!domains(env).includes(vm), `domain ${vm} left behind`);
      assert.ok(!existsSync(join(env.dir, 'vms', vm)), 'VM folder (overlays, fw_cfg files) left behind');
      assert.deepEqual(qemuPids(vm), []);
      const imageDir = join(env.dir, 'checkpoints', 'rvck-1');
      assert.ok(!existsSync(join(imageDir, 'domain.save')), 'the consumed memory image left behind');
      assert.ok(!existsSync(join(imageDir, 'domain.save.xml')), "the consumed image's XML left behind");
      assert.ok(!existsSync(join(imageDir, 'disk.qcow2')), 'the checkpoint disk left behind');
    },
  );

  void test(
    'checkpoint → restored agent Ready against cold create → agent connected (printed, alternated)',
    { timeout: 900_000 },
    async () => {
      const rounds = Number(process.env['SANDBOXD_REALVM_CHECKPOINT_ROUNDS'] ?? '3');
      const cold: number[] = [];
      const warm: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const name = `agent-rvckw${i}`;
        await createVm(env, name, true);
        await checkpoint(env, name, `rvckw-${i}`);
        let t0 = Date.now();
        const r = await restore(env, `rvckw-${i}`);
        warm.push(Date.now() - t0);
        assert.equal((r['agent'] as Json)['status'], 'Ready');
        await deleteVm(env, name);

        t0 = Date.now();
        await createVm(env, `agent-rvckc${i}`, false);
        cold.push(Date.now() - t0);
        await deleteVm(env, `agent-rvckc${i}`);
      }
      const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
      process.stderr.write(
        `realvm-checkpoint: restore→Ready ms ${warm.join(', ')} (p50 ${median(warm)}); cold create→connected ms ${cold.join(', ')} ` +
          `(p50 ${median(cold)}); ratio ${(median(warm) / median(cold)).toFixed(3)}; accelerator ${env.prep.accelerator}; load ${load}\n`,
      );
      assert.equal(warm.length, rounds);
    },
  );
});
