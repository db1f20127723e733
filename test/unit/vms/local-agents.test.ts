/**
 * LocalAgentSupervisor with a stand-in agent script (the real agent is exercised by the
 * integration tests): flags, cwd, log, pid file, SIGTERM then SIGKILL, restart on crash, orphans,
 * and the VM's other processes (a daemon the agent started, which ignores SIGTERM): kept across an
 * agent restart, ended when the VM stops or ends with sandboxd, and reaped after a crash.
 * The stand-in's behaviour is chosen by its --profile value.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LocalAgentSupervisor, type LocalAgentSpec } from '../../../src/vms/local-agents.js';
import { LOCAL_VM_ENV, localTmuxDir } from '../../../src/vms/local-vm-processes.js';
import { processFinderOn, VM_JOBS_MODULE } from '../../../src/vms/vm-jobs.js';
import { JobPool } from '../../../actors/jobs/job-pool.js';

const FAKE_AGENT = `
const argv = process.argv.slice(2);
const profile = argv[argv.indexOf('--profile') + 1];
console.log('fake agent up', JSON.stringify(argv));
if (profile === 'crash') setTimeout(() => process.exit(1), 50);
if (profile === 'badconf') process.exit(2);
if (profile === 'daemon') {
  // Like tmux: a detached process that outlives its starter, here one that ignores SIGTERM (it
  // writes daemon.pid once it does).
  const { spawn } = await import('node:child_process');
  const daemon = "process.on('SIGTERM', () => {}); require('node:fs').writeFileSync('daemon.pid', String(process.pid)); setInterval(() => {}, 1000)";
  spawn(process.execPath, ['-e', daemon], { detached: true, stdio: 'ignore' }).unref();
}
if (profile === 'stubborn') {
  process.on('SIGTERM', () => console.log('ignoring SIGTERM'));
  console.log('stubborn', process.pid);
} else process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`;

/** Running, not a zombie (an orphan's exit is collected by init a moment later). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return !/^[XZ]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

async function until(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    assert.ok(Date.now() < deadline, what);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('local agent processes', () => {
  let dir: string;
  let bin: string;
  const sups: LocalAgentSupervisor[] = [];
  const sup = (graceMs = 2000): LocalAgentSupervisor => {
    const s = new LocalAgentSupervisor({ server: { host: '0.0.0.0', port: 8120 }, agentBin: bin, stopGraceMs: graceMs });
    sups.push(s);
    return s;
  };
  const spec = (vm: string, profile = 'ok'): LocalAgentSpec => ({
    vm,
    vmDir: join(dir, vm),
    endsWithServer: true,
    instanceId: `id-${vm}`,
    profile,
    labels: { team: 'a', 'bad,key': 'x' },
    certsDir: join(dir, vm, 'certs'),
    workDir: join(dir, vm, 'work'),
    logPath: join(dir, `${vm}.log`),
    pidPath: join(dir, `${vm}.pid`),
  });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-local-agents-'));
    bin = join(dir, 'fake-agent.mjs');
    await writeFile(bin, FAKE_AGENT);
  });
  after(async () => {
    await Promise.all(sups.map((s) => s.stopAll()));
    await rm(dir, { recursive: true, force: true });
  });

  test('start: flags, cwd, log and pid file; stop: SIGTERM, reaped, pid file gone', async () => {
    const s = sup();
    const info = await s.start(spec('agent-a'));
    assert.ok(info.running && alive(info.pid));
    assert.deepEqual(info.argv.slice(1), [
      bin,
      '--server',
      '127.0.0.1:8120',
      '--certs',
      join(dir, 'agent-a', 'certs'),
      '--agent-id',
      'agent-a',
      '--instance-id',
      'id-agent-a',
      '--profile',
      'ok',
      '--work-dir',
      join(dir, 'agent-a', 'work'),
      '--labels',
      'team=a',
      '--exit-with',
      'stdin',
    ]);
    assert.equal(await readlink(`/proc/${info.pid}/cwd`), join(dir, 'agent-a', 'work'));
    assert.match(
      await readlink(`/proc/${info.pid}/fd/0`),
      /^(pipe|socket):/,
      'stdin: a pipe (a socket pair) only this sandboxd holds (--exit-with stdin)',
    );
    assert.equal((await readFile(join(dir, 'agent-a.pid'), 'utf8')).trim(), String(info.pid));
    assert.equal(s.serverAddress, '127.0.0.1:8120', '0.0.0.0 is dialled on loopback');
    const deadline = Date.now() + 10_000;
    while (!(await readFile(join(dir, 'agent-a.log'), 'utf8')).includes('fake agent up')) {
      assert.ok(Date.now() < deadline, 'the agent writes its log');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await s.start(spec('agent-a'))).pid, info.pid, 'a running agent is kept');
    assert.equal(await s.stop('agent-a'), true);
    assert.equal(alive(info.pid), false);
    assert.equal(s.info('agent-a'), null);
    await assert.rejects(stat(join(dir, 'agent-a.pid')));
    assert.equal(await s.stop('agent-a'), false, 'stopping a stopped agent is a no-op');
  });

  test('a VM that outlives sandboxd (daemon-served driver): its agent gets no --exit-with, and /dev/null as stdin', async () => {
    const s = sup();
    const info = await s.start({ ...spec('agent-o'), endsWithServer: false });
    assert.ok(!info.argv.includes('--exit-with'), info.argv.join(' '));
    assert.equal(await readlink(`/proc/${info.pid}/fd/0`), '/dev/null');
    assert.equal(await s.stop('agent-o'), true);
  });

  test('restart replaces the process; an agent that ignores SIGTERM is killed after the grace', async () => {
    const s = sup(300);
    // The stand-in logs "stubborn <pid>" once its SIGTERM handler is in.
    const stubborn = (pid: number): Promise<void> =>
      until(
        `agent ${pid} ignores SIGTERM`,
        () => existsSync(join(dir, 'agent-b.log')) && readFileSync(join(dir, 'agent-b.log'), 'utf8').includes(`stubborn ${pid}`),
      );
    const first = await s.start(spec('agent-b', 'stubborn'));
    await stubborn(first.pid);
    const second = await s.start(spec('agent-b', 'stubborn'), { restart: true });
    await stubborn(second.pid);
    assert.notEqual(second.pid, first.pid);
    assert.equal(alive(first.pid), false);
    const t0 = Date.now();
    await s.stop('agent-b');
    assert.ok(Date.now() - t0 >= 250, 'waited the grace before SIGKILL');
    assert.equal(alive(second.pid), false);
  });

  test('a crashing agent is restarted; exit code 2 (bad configuration) is not', async () => {
    const s = sup();
    const first = await s.start(spec('agent-c', 'crash'));
    await until('restarted', () => (s.info('agent-c')?.pid ?? first.pid) !== first.pid);
    assert.equal(s.info('agent-c')?.restarts, 1);
    await s.stop('agent-c');
    const bad = await s.start(spec('agent-d', 'badconf'));
    await until('exited', () => s.info('agent-d')?.running === false);
    assert.deepEqual(s.info('agent-d')?.lastExit, { code: 2, signal: null });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(s.info('agent-d')?.pid, bad.pid, 'not restarted');
  });

  test("the VM's other processes survive an agent restart and end with the VM", async () => {
    const s = sup(300);
    const sp = { ...spec('agent-f', 'daemon'), endsWithServer: false };
    // The pid file exists (empty) before the daemon's write lands in it: wait for a pid, not for the file.
    const pidIn = (): number =>
      existsSync(join(sp.workDir, 'daemon.pid')) ? Number(readFileSync(join(sp.workDir, 'daemon.pid'), 'utf8')) : 0;
    const daemon = async (): Promise<number> => {
      await until('the daemon is up', () => pidIn() > 0);
      return pidIn();
    };
    const agent = await s.start(sp);
    const first = await daemon();
    const environ = await readFile(`/proc/${first}/environ`, 'latin1');
    assert.ok(environ.split('\0').includes(`${LOCAL_VM_ENV}=${sp.vmDir}`), 'the mark is inherited');
    assert.ok(environ.split('\0').includes(`TMUX_TMPDIR=${join(sp.vmDir, 'tmux')}`), "the tmux directory is the VM's own");
    await rm(join(sp.workDir, 'daemon.pid'));
    await s.start(sp, { restart: true });
    assert.equal(alive(agent.pid), false);
    assert.ok(alive(first), "an agent restart keeps the VM's processes");
    const second = await daemon();
    const t0 = Date.now();
    assert.equal(await s.stop('agent-f'), true);
    assert.ok(!alive(first) && !alive(second), 'a stopped VM leaves nothing running');
    const tookMs = Date.now() - t0;
    assert.ok(tookMs >= 250 && tookMs < 5000, `TERM, the grace, then KILL (${tookMs} ms)`);
  });

  test("with the job pool's finder (a pool thread reads /proc), a stopped VM still leaves nothing running", async () => {
    const pool = await JobPool.start({ mode: 'workers', threads: 1, jobModules: [VM_JOBS_MODULE] });
    try {
      const s = new LocalAgentSupervisor({
        server: { host: '0.0.0.0', port: 8120 },
        agentBin: bin,
        stopGraceMs: 300,
        findProcesses: processFinderOn(pool),
      });
      sups.push(s);
      const sp = { ...spec('agent-p', 'daemon'), endsWithServer: false };
      const pidIn = (): number =>
        existsSync(join(sp.workDir, 'daemon.pid')) ? Number(readFileSync(join(sp.workDir, 'daemon.pid'), 'utf8')) : 0;
      const agent = await s.start(sp);
      await until('the daemon is up', () => pidIn() > 0);
      const daemon = pidIn();
      assert.equal(await s.stop('agent-p'), true);
      assert.ok(!alive(agent.pid) && !alive(daemon), 'the agent and the daemon that ignores SIGTERM are both gone');
    } finally {
      await pool.stop();
    }
  });

  test('at stopAll, only the processes of VMs that end with sandboxd end; the rest are reaped after a crash', async () => {
    const s = sup(300);
    const ends = { ...spec('agent-g', 'daemon'), endsWithServer: true };
    const outlives = { ...spec('agent-h', 'daemon'), endsWithServer: false };
    await Promise.all([s.start(ends), s.start(outlives)]);
    const pidOf = async (sp: LocalAgentSpec): Promise<number> => {
      // The file exists before the daemon's pid is in it (writeFileSync truncates, then writes):
      // reading it then gave 0, a pid no process has, and the test lost track of the daemon.
      const pidNow = (): number =>
        existsSync(join(sp.workDir, 'daemon.pid')) ? Number(readFileSync(join(sp.workDir, 'daemon.pid'), 'utf8')) : 0;
      let pid = 0;
      await until('the daemon is up', () => (pid = pidNow()) > 0);
      return pid;
    };
    const [gone, kept] = await Promise.all([pidOf(ends), pidOf(outlives)]);
    await s.stopAll();
    assert.equal(alive(gone), false);
    assert.ok(alive(kept), 'the VM outlives sandboxd, and so do its processes');
    const next = sup(300);
    const reaped = await next.reapLeftovers([{ vm: 'agent-h', vmDir: outlives.vmDir, pidPath: outlives.pidPath }]);
    assert.deepEqual(
      reaped.ended.map((p) => p.pid),
      [kept],
    );
    assert.deepEqual(reaped.survivors, []);
    assert.equal(alive(kept), false);
  });

  test('the tmux directory is in the VM folder unless its socket path would be too long', () => {
    assert.equal(localTmuxDir('/var/lib/sandboxd/vms/agent-a'), '/var/lib/sandboxd/vms/agent-a/tmux');
    const long = `/home/someone/.local/state/sandboxd/vms/agent-${'x'.repeat(57)}`;
    const dir = localTmuxDir(long);
    assert.match(dir, /\/sbx-tmux-[0-9a-f]{12}$/);
    assert.equal(localTmuxDir(long), dir, 'derived the same way every time');
    assert.ok(Buffer.byteLength(join(dir, 'tmux-4294967294', 'sandboxd')) <= 107);
  });

  test('an orphan left by an earlier sandboxd is stopped before the new agent starts', async () => {
    const sp = spec('agent-e');
    const orphan = spawn(process.execPath, [bin, '--agent-id', 'agent-e', '--profile', 'ok'], { stdio: 'ignore', detached: true });
    orphan.unref();
    await writeFile(sp.pidPath, `${orphan.pid}\n`);
    await until('orphan up', () => alive(orphan.pid!));
    const s = sup();
    const info = await s.start(sp);
    await until('orphan gone', () => !alive(orphan.pid!) || orphan.exitCode !== null);
    assert.notEqual(info.pid, orphan.pid);
    // A pid file naming an unrelated process is only removed, never acted on.
    await s.stop('agent-e');
    await writeFile(sp.pidPath, `${process.pid}\n`);
    await s.start(sp);
    assert.ok(alive(process.pid));
    await s.stopAll();
    await assert.rejects(s.start(sp), /stopped/);
  });
});
