/**
 * The backend plans (src/sessions/session-backends.ts): their argv, and what they do when the
 * agent runs them, with real GNU screen, real tmux and real PTYs (node-pty, as the agent uses).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  execArgv,
  SESSION_SHELL_NAME,
  tmuxAttachArgv,
  tmuxCreateArgv,
  tmuxHasSessionArgv,
  tmuxKillArgv,
} from '../../../src/core/tmux-argv.js';
import { programArgv, sessionBackendPlan, type SessionBackendPlan } from '../../../src/sessions/session-backends.js';
import { alive, BackendDir } from './backend-kit.js';
import { TmuxHarness } from './tmux-harness.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

const isRoot = process.getuid?.() === 0;
/** bash --norc's prompt (`bash-5.2$ `, `# ` as root). */
const PROMPT = /bash-[\d.]+[$#] /;

function plan(backend: string, cls: string, ctx: Parameters<typeof sessionBackendPlan>[2]): SessionBackendPlan {
  const p = sessionBackendPlan(backend, cls, ctx);
  assert.ok(p, `${backend}/${cls}`);
  return p;
}

void describe('session backend plans: argv', () => {
  void test('the program: argv as given, a command through /bin/sh -lc, else the login shell with -l', () => {
    assert.deepEqual(programArgv({ argv: ['vim', '-u', 'NONE'] }), ['vim', '-u', 'NONE']);
    assert.deepEqual(programArgv({ command: 'echo $HOME; ls' }), ['/bin/sh', '-lc', 'echo $HOME; ls', SESSION_SHELL_NAME]);
    const login = programArgv({});
    assert.deepEqual([login[0], login[1], login[3]], ['/bin/sh', '-c', SESSION_SHELL_NAME]);
    assert.match(login[2] ?? '', /exec "\$s" -l$/);
    assert.throws(() => programArgv({ argv: [] }), TypeError);
    assert.throws(() => programArgv({ argv: ['a'], command: 'b' }), TypeError);
  });

  void test("tmux/managed is tmux-argv.ts's managed session: new-session -A, attach-session, has-session, the kill script", () => {
    const socket = { name: 'sock-1' };
    const p = plan('tmux', 'managed', { tmuxSocket: socket });
    assert.equal(p.reattachable, true);
    assert.deepEqual(
      p.startArgv({ sessionName: 's1', program: { argv: ['htop'] }, cols: 100, rows: 30, env: { A: 'b' } }),
      tmuxCreateArgv({ socket, sessionName: 's1', argv: ['htop'], cols: 100, rows: 30, env: { A: 'b' } }),
    );
    assert.deepEqual(p.reattachArgv('s1'), tmuxAttachArgv({ socket, sessionName: 's1' }));
    assert.deepEqual(p.hasSessionArgv('s1'), tmuxHasSessionArgv({ socket, sessionName: 's1' }));
    assert.deepEqual(
      p.killArgv({ sessionName: 's1', signal: 'HUP', graceSeconds: 2 }),
      tmuxKillArgv({ socket, sessionName: 's1', signal: 'HUP', graceSeconds: 2 }),
    );
  });

  void test('screen/managed and native/direct: one script each, user text only as positional parameters', () => {
    const scr = plan('screen', 'managed', { runtimeDir: '/run/x' });
    const argv = scr.startArgv({ sessionName: 's1', program: { command: 'echo "$(id)"; x;' }, cols: 80, rows: 24 });
    assert.deepEqual(argv.slice(0, 2), ['/bin/sh', '-c']);
    assert.deepEqual(argv.slice(3), ['sandboxd-screen', 'start', '/run/x', 's1', '/bin/sh', '-lc', 'echo "$(id)"; x;', SESSION_SHELL_NAME]);
    assert.deepEqual(scr.killArgv({ sessionName: 's1', signal: 'TERM', graceSeconds: 5 }).slice(3), [
      'sandboxd-screen',
      'kill',
      '/run/x',
      's1',
      'TERM',
      '5',
    ]);
    const nat = plan('native', 'direct', {});
    assert.equal(nat.reattachable, false);
    assert.equal(nat.reattachArgv('n1'), undefined);
    assert.equal(nat.hasSessionArgv('n1'), undefined);
    assert.deepEqual(nat.startArgv({ sessionName: 'n1', program: { argv: ['top'] }, cols: 80, rows: 24 }).slice(3), [
      'sandboxd-native',
      'start',
      '',
      'n1',
      'top',
    ]);
  });

  void test('names and grace periods are checked; pairs sandboxd does not run have no plan', () => {
    const scr = plan('screen', 'managed', {});
    assert.throws(() => scr.reattachArgv('a.b'), TypeError);
    assert.throws(() => scr.hasSessionArgv('-x'), TypeError);
    assert.throws(() => scr.killArgv({ sessionName: 's', signal: 'TERM', graceSeconds: -1 }), RangeError);
    assert.throws(() => plan('native', 'direct', {}).killArgv({ sessionName: 's', signal: 'TERM', graceSeconds: 1.5 }), RangeError);
    for (const [b, c] of [
      ['zellij', 'managed'],
      ['native', 'managed'],
      ['tmux', 'direct'],
      ['screen', 'direct'],
      ['zellij', 'direct'],
      ['bogus', 'managed'],
    ] as const)
      assert.equal(sessionBackendPlan(b, c), undefined, `${b}/${c}`);
  });
});

void describe('session backend plans on real screen and PTYs', { timeout: 180_000 }, () => {
  let h: TmuxHarness;
  let rt: BackendDir;
  let scr: SessionBackendPlan;
  let nat: SessionBackendPlan;
  const run = (argv: string[] | undefined): Promise<number> => {
    assert.ok(argv);
    return execArgv(argv, { env: h.env }).then((r) => r.exitCode);
  };

  before(() => {
    h = new TmuxHarness();
    rt = new BackendDir();
    scr = plan('screen', 'managed', { runtimeDir: rt.dir });
    nat = plan('native', 'direct', { runtimeDir: rt.dir });
  });
  after(async () => {
    await rt.close();
    await h.close();
  });

  void test('screen: a transparent session of the PTY size that survives a hangup, is re-attached and killed whole', async () => {
    const start = scr.startArgv({ sessionName: 'scr', program: { argv: ['bash', '--norc', '--noprofile', '-i'] }, cols: 100, rows: 30 });
    const first = h.spawn(start, { cols: 100, rows: 30 });
    await first.waitFor(PROMPT);
    // ^A (screen's usual command key) reaches bash: readline's beginning-of-line, then ^E its end.
    first.pty.write('cho size-$((6*7)); stty size; echo $TERM\x01e\x05\r');
    await first.waitFor(/size-42\r\n30 100\r\nscreen-256color/);
    first.pty.write("(trap '' TERM HUP; exec sleep 1004) & echo bg=$!\r");
    await first.waitFor(/bg=\d+/);
    const bg = Number(/bg=(\d+)/.exec(first.output())?.[1]);
    assert.ok(alive(bg));
    // The agent goes away: its PTY hangs up, and screen detaches instead of ending.
    first.pty.kill('SIGHUP');
    await first.exited;
    assert.equal(await run(scr.hasSessionArgv('scr')), 0);
    // Names are matched exactly, never as screen's prefixes.
    assert.equal(await run(scr.hasSessionArgv('sc')), 1);
    assert.equal(await run(scr.hasSessionArgv('scr2')), 1);
    const again = h.spawn(scr.reattachArgv('scr') ?? [], { cols: 90, rows: 20 });
    again.pty.write('stty size\r');
    await again.waitFor('20 90');
    const r = await execArgv(scr.killArgv({ sessionName: 'scr', signal: 'TERM', graceSeconds: 1 }), { env: h.env });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(alive(bg), false, 'the TERM-ignoring job got KILL after the grace period');
    assert.equal(await again.exited, 0);
    assert.deepEqual(await rt.screens(), []);
    assert.equal(await run(scr.hasSessionArgv('scr')), 1);
    assert.equal(await run(scr.killArgv({ sessionName: 'scr', signal: 'TERM', graceSeconds: 1 })), 3);
    assert.equal(await run(scr.reattachArgv('scr')), 1);
  });

  void test('screen: start attaches to a live session of the same name; a prefix-named neighbour is never touched', async () => {
    const a = h.spawn(scr.startArgv({ sessionName: 'pair2', program: { command: 'echo neighbour; exec sleep 600' }, cols: 80, rows: 24 }));
    await a.waitFor('neighbour');
    const b = h.spawn(scr.startArgv({ sessionName: 'pair', program: { command: 'echo pair-$((1+1)); exec cat' }, cols: 80, rows: 24 }));
    await b.waitFor('pair-2');
    b.pty.kill('SIGHUP');
    await b.exited;
    // Starting "pair" again attaches to it (like tmux new-session -A): no second session.
    const c = h.spawn(scr.startArgv({ sessionName: 'pair', program: { command: 'echo SECOND' }, cols: 80, rows: 24 }));
    await c.waitFor('pair-2');
    assert.ok(!c.output().includes('SECOND'));
    assert.equal((await rt.screens()).filter((s) => s.endsWith('.pair')).length, 1);
    assert.equal(await run(scr.killArgv({ sessionName: 'pair', signal: 'KILL', graceSeconds: 0 })), 0);
    assert.equal(await run(scr.hasSessionArgv('pair')), 1);
    assert.equal(await run(scr.hasSessionArgv('pair2')), 0);
    assert.equal(await run(scr.killArgv({ sessionName: 'pair2', signal: 'TERM', graceSeconds: 1 })), 0);
    await a.exited;
    assert.deepEqual(await rt.screens(), []);
  });

  void test('native: the program is the PTY command; the kill ends its terminal session, and a stale pid file is not trusted', async () => {
    const start = nat.startArgv({ sessionName: 'nat', program: { argv: ['bash', '--norc', '--noprofile', '-i'] }, cols: 80, rows: 24 });
    const run1 = h.spawn(start);
    await run1.waitFor(PROMPT);
    run1.pty.write('echo leader=$$ umask=$(umask); (trap "" TERM HUP; exec sleep 1005) & echo bg=$!\r');
    await run1.waitFor(/bg=\d+/);
    const leader = Number(/leader=(\d+)/.exec(run1.output())?.[1]);
    const bg = Number(/bg=(\d+)/.exec(run1.output())?.[1]);
    assert.equal(leader, run1.pty.pid, 'the program replaced the start script');
    assert.match(run1.output(), /umask=0022/, "the script's private umask does not reach the program");
    assert.equal(rt.nativePidFile('nat')?.pid, leader);
    const r = await execArgv(nat.killArgv({ sessionName: 'nat', signal: 'TERM', graceSeconds: 1 }), { env: h.env });
    assert.equal(r.exitCode, 0, r.stderr);
    await run1.exited;
    assert.equal(alive(bg), false);
    assert.equal(rt.nativePidFile('nat'), undefined);
    assert.equal(await run(nat.killArgv({ sessionName: 'nat', signal: 'TERM', graceSeconds: 1 })), 3);

    // A pid file naming a live session leader that started at another time: not ours.
    const stranger = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    const pid = stranger.pid ?? 0;
    await waitFor('the stranger to run', () => alive(pid), { deadlineMs: DEADLINE_MS.process });
    mkdirSync(join(rt.dir, 'native'), { recursive: true });
    writeFileSync(join(rt.dir, 'native', 'stale.pid'), `${pid} 1\n`);
    assert.equal(await run(nat.killArgv({ sessionName: 'stale', signal: 'KILL', graceSeconds: 0 })), 3);
    assert.ok(alive(pid), 'a reused pid is never killed');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    writeFileSync(join(rt.dir, 'native', 'stale.pid'), `${pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}\n`);
    assert.equal(await run(nat.killArgv({ sessionName: 'stale', signal: 'TERM', graceSeconds: 1 })), 0);
    assert.equal(alive(pid), false);
    stranger.unref();
  });

  void test('native: without a program, the login shell (-l) of the user', async () => {
    const run1 = h.spawn(nat.startArgv({ sessionName: 'login', program: {}, cols: 80, rows: 24 }));
    run1.pty.write('shopt -q login_shell && echo LOGIN-$((20+22)); exit\r');
    await run1.waitFor('LOGIN-42');
    assert.equal(await run1.exited, 0);
  });

  void test(
    'a runtime directory that is not ours fails the start (exit 125) instead of being used',
    { skip: !isRoot && 'needs root (chown)' },
    async () => {
      const other = join(rt.dir, '..', 'foreign');
      mkdirSync(join(other, 'screen'), { recursive: true });
      chownSync(other, 65534, 65534);
      const p = plan('screen', 'managed', { runtimeDir: other });
      const r = await execArgv(p.hasSessionArgv('x') ?? [], { env: h.env });
      assert.equal(r.exitCode, 125);
      assert.match(r.stderr, /not owned by/);
    },
  );
});
