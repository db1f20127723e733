/**
 * The VM API against a real libvirt daemon: a private unprivileged `libvirtd` started here
 * serves the test driver on its own socket (test+unix:///default?socket=…), so `virsh` sees the
 * same hypervisor and is the independent witness. After every API step virsh agrees with
 * GET /api/v1/vms?prefix=* about every VM's state; `virsh destroy` / `virsh start` behind
 * sandboxd's back show up in the API, as vm.* events, and in the VM's local agent.
 * Skips, loudly, only when libvirtd or virsh is not installed.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { startVmHarness, uniqueName, type VmHarness } from './vms-harness.js';

const LIBVIRTD = ['libvirtd', '/usr/sbin/libvirtd'].find((bin) => spawnSync(bin, ['--version'], { encoding: 'utf8' }).error === undefined);
const virshMissing = spawnSync('virsh', ['--version'], { encoding: 'utf8' }).error !== undefined;
const skip = LIBVIRTD === undefined ? 'SKIPPED: libvirtd is not installed' : virshMissing ? 'SKIPPED: virsh is not installed' : false;
if (skip !== false) process.stderr.write(`\n#### ${skip}; the VM daemon tests did not run\n\n`);

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

async function startDaemon(): Promise<{ uri: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-vms-libvirtd-'));
  const sock = join(dir, 'libvirt-sock');
  const conf = join(dir, 'libvirtd.conf');
  writeFileSync(
    conf,
    [
      `unix_sock_dir = "${dir}"`,
      'auth_unix_rw = "none"',
      'auth_unix_ro = "none"',
      `log_outputs = "3:file:${join(dir, 'libvirtd.log')}"`,
      '',
    ].join('\n'),
  );
  if (isRoot) chownSync(dir, NOBODY, NOBODY);
  const env = {
    PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: dir,
    XDG_RUNTIME_DIR: join(dir, 'run'),
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_DATA_HOME: join(dir, 'data'),
  };
  const child: ChildProcess = spawn(LIBVIRTD ?? 'libvirtd', ['-f', conf], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(isRoot ? { uid: NOBODY, gid: NOBODY } : {}),
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const deadline = Date.now() + 20_000;
  while (!existsSync(sock)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = existsSync(join(dir, 'libvirtd.log')) ? readFileSync(join(dir, 'libvirtd.log'), 'utf8').slice(-2000) : '';
      child.kill('SIGKILL');
      throw new Error(`libvirtd did not come up (exit ${child.exitCode}): ${stderr}\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    uri: `test+unix:///default?socket=${sock}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const VIRSH_STATES: Record<string, string> = {
  running: 'running',
  idle: 'running',
  paused: 'paused',
  'in shutdown': 'shutdown',
  'shut off': 'stopped',
  crashed: 'crashed',
  pmsuspended: 'suspended',
  'no state': 'unknown',
};

function virsh(uri: string, ...args: string[]): string {
  const r = spawnSync('virsh', ['-q', '-c', uri, ...args], { encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0) throw new Error(`virsh ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

function virshStates(uri: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of virsh(uri, 'list', '--all').split('\n')) {
    const m = /^\s*(\S+)\s+(\S+)\s+(.+?)\s*$/.exec(line);
    if (m !== null) out[m[2]!] = VIRSH_STATES[m[3]!] ?? 'unknown';
  }
  return out;
}

async function assertAgree(h: VmHarness, uri: string, step: string): Promise<void> {
  const api = (await h.req('GET', '/api/v1/vms?prefix=*')).json() as { vms: { name: string; state: string }[] };
  assert.deepEqual(Object.fromEntries(api.vms.map((v) => [v.name, v.state])), virshStates(uri), `API and virsh disagree after: ${step}`);
}

/** Waits until `cond` holds (the shared helper, polling every 50 ms). */
async function until(what: string, cond: () => Promise<boolean> | boolean, deadlineMs: number = DEADLINE_MS.process): Promise<void> {
  await waitFor(what, cond, { deadlineMs, intervalMs: 50 });
}

describe('VM API through a libvirt daemon (virsh as witness)', { skip }, () => {
  test('virsh agrees with the API after every step; virsh changes show up in the API, events and agents', async () => {
    const daemon = await startDaemon();
    let h: VmHarness | undefined;
    try {
      const uri = daemon.uri;
      h = await startVmHarness({ mode: 'workers', uri, pollIntervalMs: 200 });
      const a = uniqueName('dmn');
      const b = uniqueName('dmn');
      await assertAgree(h, uri, 'start');
      await h.createVm(a);
      await h.createVm(b, { start: false });
      await assertAgree(h, uri, 'create a (started), b (not started)');
      assert.equal((await h.req('POST', `/api/v1/vms/${a}/stop`)).status, 200);
      await assertAgree(h, uri, 'stop a');
      assert.equal((await h.req('POST', `/api/v1/vms/${b}/start`)).status, 200);
      await assertAgree(h, uri, 'start b');
      assert.equal((await h.req('POST', `/api/v1/vms/${a}/start`)).status, 200);
      const r = await h.req('POST', `/api/v1/vms/${b}/restart`, { mode: 'hard' });
      assert.equal((await h.waitOp(String((r.json() as { operation: { id: string } }).operation.id)))['status'], 'completed');
      await assertAgree(h, uri, 'start a, restart b');

      // Behind sandboxd's back.
      const pid = h.svc.localAgents.info(b)!.pid;
      virsh(uri, 'destroy', b);
      await until(
        'API sees b stopped',
        async () => ((await h!.req('GET', `/api/v1/vms/${b}`)).json() as { state: string }).state === 'stopped',
      );
      await until('vm.stopped event for b', () =>
        h!.events.query({ vmName: b, eventType: 'vm.stopped', limit: 10 }).events.some((e) => e.details['source'] !== 'sandboxd'),
      );
      await until("b's agent stopped", () => h!.svc.localAgents.info(b)?.running !== true);
      assert.equal(h.svc.localAgents.info(b), null, `agent ${pid} stopped with its VM`);
      await assertAgree(h, uri, 'virsh destroy b');
      virsh(uri, 'start', b);
      await until(
        'API sees b running',
        async () => ((await h!.req('GET', `/api/v1/vms/${b}`)).json() as { state: string }).state === 'running',
      );
      await until("b's agent back", () => h!.svc.localAgents.info(b)?.running === true);
      await assertAgree(h, uri, 'virsh start b');

      assert.equal((await h.req('DELETE', `/api/v1/vms/${a}?force=true&delete_disk=true`)).status, 200);
      assert.equal((await h.req('DELETE', `/api/v1/vms/${b}?force=true`)).status, 200);
      await assertAgree(h, uri, 'delete a, b');
      assert.ok(!(a in virshStates(uri)) && !(b in virshStates(uri)));
    } finally {
      await h?.stop();
      await daemon.stop();
    }
  });
});
