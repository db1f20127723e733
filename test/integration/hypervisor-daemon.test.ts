/**
 * The hypervisor port against a real libvirt daemon: a private `libvirtd` started here, serving
 * the test driver on its own unix socket (test+unix:///default?socket=...). Through a daemon,
 * `virsh` and the port share one hypervisor, so virsh is the independent witness: after every
 * step it must agree with the port about every domain's state, and changes made with virsh
 * behind the port's back must come out as vm.* events.
 *
 * libvirtd runs unprivileged (as nobody when the tests run as root): a privileged libvirtd needs
 * the system set-up of libvirt-daemon-system (user libvirt-qemu, /var/lib/libvirt ...), while an
 * unprivileged one keeps all its state under the temp dir given as HOME/XDG_*.
 * Skips, loudly, only when the libvirtd binary is not installed.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { LibvirtHypervisor, type LibvirtHypervisorOptions } from '../../src/hypervisor/libvirt/libvirt-hypervisor.js';
import type { HypervisorEvent, VmState } from '../../src/hypervisor/port.js';
import { DEADLINE_MS, waitFor as waitForCondition } from '../support/wait.js';

// /usr/sbin is not on every PATH (CI environments of non-login shells).
const LIBVIRTD = ['libvirtd', '/usr/sbin/libvirtd'].find((bin) => spawnSync(bin, ['--version'], { encoding: 'utf8' }).error === undefined);
const libvirtdMissing = LIBVIRTD === undefined;
const virshMissing = spawnSync('virsh', ['--version'], { encoding: 'utf8' }).error !== undefined;
const skipReason = libvirtdMissing
  ? 'SKIPPED: libvirtd is not installed (apt-get install --no-install-recommends libvirt-daemon); the daemon tests did not run'
  : virshMissing
    ? 'SKIPPED: virsh is not installed (apt-get install libvirt-clients); the daemon tests did not run'
    : false;
if (skipReason !== false) process.stderr.write(`\n#### ${skipReason}\n\n`);

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

interface Daemon {
  readonly uri: string;
  readonly dir: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

function makeDaemon(): Daemon {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-libvirtd-'));
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
  let child: ChildProcess | null = null;
  return {
    uri: `test+unix:///default?socket=${sock}`,
    dir,
    async start() {
      rmSync(sock, { force: true });
      const env = {
        PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: dir,
        XDG_RUNTIME_DIR: join(dir, 'run'),
        XDG_CONFIG_HOME: join(dir, 'config'),
        XDG_CACHE_HOME: join(dir, 'cache'),
        XDG_DATA_HOME: join(dir, 'data'),
      };
      const c = spawn(LIBVIRTD ?? 'libvirtd', ['-f', conf], {
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
        ...(isRoot ? { uid: NOBODY, gid: NOBODY } : {}),
      });
      child = c;
      let stderr = '';
      c.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const deadline = Date.now() + 20_000;
      while (!existsSync(sock)) {
        if (c.exitCode !== null || Date.now() > deadline) {
          const log = existsSync(join(dir, 'libvirtd.log')) ? readFileSync(join(dir, 'libvirtd.log'), 'utf8').slice(-2000) : '';
          c.kill('SIGKILL');
          throw new Error(`libvirtd did not come up (exit ${c.exitCode}): ${stderr}\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      const c = child;
      child = null;
      if (c === null || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill('SIGTERM');
      const timer = setTimeout(() => c.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

const VIRSH_STATES: Record<string, VmState> = {
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

function virshStates(uri: string): Record<string, VmState> {
  const out: Record<string, VmState> = {};
  for (const line of virsh(uri, 'list', '--all').split('\n')) {
    const m = /^\s*(\S+)\s+(\S+)\s+(.+?)\s*$/.exec(line);
    if (m !== null) out[m[2]!] = VIRSH_STATES[m[3]!] ?? 'unknown';
  }
  return out;
}

async function assertAgree(hv: LibvirtHypervisor, uri: string, step: string): Promise<void> {
  const ours = Object.fromEntries((await hv.list()).map((d) => [d.name, d.state]));
  assert.deepEqual(ours, virshStates(uri), `port and virsh disagree after: ${step}`);
}

/** Waits for the first event `pred` accepts; the timeout lists the events seen. */
function waitFor(
  events: HypervisorEvent[],
  pred: (e: HypervisorEvent) => boolean,
  what: string,
  deadlineMs: number = DEADLINE_MS.process,
): Promise<HypervisorEvent> {
  return waitForCondition(what, () => events.find(pred), {
    deadlineMs,
    intervalMs: 50,
    lastState: () => `saw ${events.map((e) => `${e.type}:${e.vmName}:${e.source}`).join(', ')}`,
  });
}

async function withPort(
  opts: Omit<LibvirtHypervisorOptions, 'uris'> & { uri: string },
  fn: (hv: LibvirtHypervisor, events: HypervisorEvent[]) => Promise<void>,
): Promise<void> {
  const { uri, ...rest } = opts;
  const hv = new LibvirtHypervisor({ uris: [uri], ...rest });
  const events: HypervisorEvent[] = [];
  hv.onEvent((e) => events.push(e));
  await hv.start();
  try {
    await fn(hv, events);
  } finally {
    await hv.stop();
  }
}

const spec = (name: string) => ({ name, vcpus: 1, memoryMiB: 128 });

describe('hypervisor port through a libvirt daemon', { skip: skipReason }, () => {
  test('virsh agrees with the port after every step; virsh changes behind our back come out as poller events', async () => {
    const daemon = makeDaemon();
    await daemon.start();
    try {
      const uri = daemon.uri;
      await withPort({ uri, virshEvents: 'off', pollIntervalMs: 200 }, async (hv, events) => {
        assert.equal(hv.capabilities().events, 'polling');
        await assertAgree(hv, uri, 'start');
        for (const n of ['agent-d1', 'agent-d2', 'agent-d3']) await hv.define(spec(n));
        await assertAgree(hv, uri, 'define x3');
        await hv.startDomain('agent-d1');
        await hv.startDomain('agent-d2');
        await assertAgree(hv, uri, 'start d1, d2');
        await hv.suspendDomain('agent-d2');
        await assertAgree(hv, uri, 'suspend d2');
        await hv.shutdownDomain('agent-d1');
        await assertAgree(hv, uri, 'shutdown d1');
        await hv.resumeDomain('agent-d2');
        await assertAgree(hv, uri, 'resume d2');

        virsh(uri, 'destroy', 'agent-d2');
        const stopped = await waitFor(events, (e) => e.vmName === 'agent-d2' && e.type === 'vm.stopped', 'vm.stopped for agent-d2');
        assert.equal(stopped.source, 'poller');
        assert.equal(stopped.previousState, 'running');
        await assertAgree(hv, uri, 'virsh destroy d2');

        virsh(uri, 'start', 'agent-d3');
        assert.equal(
          (await waitFor(events, (e) => e.vmName === 'agent-d3' && e.type === 'vm.started', 'vm.started for agent-d3')).source,
          'poller',
        );
        virsh(uri, 'undefine', 'agent-d1');
        assert.equal(
          (await waitFor(events, (e) => e.vmName === 'agent-d1' && e.type === 'vm.undefined', 'vm.undefined for agent-d1')).source,
          'poller',
        );
        await assertAgree(hv, uri, 'virsh start d3, undefine d1');

        await hv.undefine('agent-d3', { force: true });
        await hv.undefine('agent-d2');
        await assertAgree(hv, uri, 'undefine d2, d3');
        await hv.pollNow();
        const perChange = (name: string, type: string) => events.filter((e) => e.vmName === name && e.type === type).length;
        assert.equal(perChange('agent-d2', 'vm.stopped'), 1, 'one vm.stopped for one destroy');
        assert.equal(perChange('agent-d3', 'vm.started'), 1, 'one vm.started for one start');
      });
    } finally {
      await daemon.stop();
      rmSync(daemon.dir, { recursive: true, force: true });
    }
  });

  test("with the virsh event source, outside changes arrive with libvirt's exact reason", async () => {
    const daemon = makeDaemon();
    await daemon.start();
    try {
      const uri = daemon.uri;
      await withPort({ uri, virshEvents: 'auto', pollIntervalMs: 60_000 }, async (hv, events) => {
        assert.equal(hv.capabilities().events, 'polling+virsh-event');
        // Wait until the virsh child is listening: define throwaway domains until one is reported by it.
        const deadline = Date.now() + 15_000;
        for (let n = 0; !events.some((e) => e.source === 'virsh-event'); n++) {
          if (Date.now() > deadline) throw new Error('the virsh event source never reported anything');
          const xml = `<domain type='test'><name>agent-probe-${n}</name><memory unit='MiB'>64</memory><os><type>hvm</type></os></domain>`;
          const file = join(daemon.dir, `probe-${n}.xml`);
          writeFileSync(file, xml);
          virsh(uri, 'define', file);
          await new Promise((r) => setTimeout(r, 200));
        }
        await hv.define(spec('agent-e1'));
        virsh(uri, 'start', 'agent-e1');
        const started = await waitFor(events, (e) => e.vmName === 'agent-e1' && e.type === 'vm.started', 'vm.started for agent-e1', 10_000);
        assert.equal(started.source, 'virsh-event');
        virsh(uri, 'destroy', 'agent-e1');
        const stopped = await waitFor(events, (e) => e.vmName === 'agent-e1' && e.type === 'vm.stopped', 'vm.stopped for agent-e1', 10_000);
        assert.deepEqual([stopped.source, stopped.reason], ['virsh-event', 'destroyed']);
        await assertAgree(hv, uri, 'virsh start + destroy');
        // Our own calls are still reported once, by us.
        await hv.startDomain('agent-e1');
        // A negative check: a pause in which a second report of our own start would arrive.
        await new Promise((r) => setTimeout(r, 500));
        assert.deepEqual(
          events.filter((e) => e.vmName === 'agent-e1' && e.type === 'vm.started').map((e) => e.source),
          ['virsh-event', 'sandboxd'],
        );
      });
    } finally {
      await daemon.stop();
      rmSync(daemon.dir, { recursive: true, force: true });
    }
  });

  test('the connection is reopened after the daemon restarts', async () => {
    const daemon = makeDaemon();
    await daemon.start();
    try {
      await withPort({ uri: daemon.uri, virshEvents: 'off', pollIntervalMs: 200, coolDownMs: 300, readBudgetMs: 1000 }, async (hv) => {
        assert.equal((await hv.health()).status, 'ok');
        await hv.define(spec('agent-r1'));
        await daemon.stop();
        const downBy = Date.now() + 15_000;
        while ((await hv.health()).status !== 'down') {
          assert.ok(Date.now() < downBy, 'health never reported the daemon down');
          await new Promise((r) => setTimeout(r, 100));
        }
        await daemon.start();
        const upBy = Date.now() + 20_000;
        while ((await hv.health()).status !== 'ok') {
          assert.ok(Date.now() < upBy, 'the port never reconnected');
          await new Promise((r) => setTimeout(r, 100));
        }
        // A new daemon has a fresh test driver: only the predefined domain.
        assert.deepEqual(
          (await hv.list()).map((d) => d.name),
          ['test'],
        );
        await assertAgree(hv, daemon.uri, 'reconnect');
      });
    } finally {
      await daemon.stop();
      rmSync(daemon.dir, { recursive: true, force: true });
    }
  });
});
