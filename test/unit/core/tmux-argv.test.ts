/**
 * The tmux argvs against the real tmux binary: a private server per test, the client in a real
 * PTY (node-pty), exactly as the agent runs them.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  killOutcomeOf,
  parseTmuxPanes,
  tmuxArg,
  tmuxAttachArgv,
  tmuxCapturePaneArgv,
  tmuxCreateArgv,
  tmuxKillArgv,
  tmuxListPanesArgv,
  tmuxPaneSizeArgv,
} from '../../../src/core/tmux-argv.js';
import { DEADLINE_MS, tail, waitFor } from '../../support/wait.js';
import { shq, TmuxHarness } from '../sessions/tmux-harness.js';

/**
 * The text of `file` once it holds at least as many bytes as `expected` (the command opens it
 * with `>` before it writes, so "it exists" is not "it is written"); the timeout shows what it holds.
 */
async function written(dir: string, file: string, expected: string): Promise<string> {
  const path = join(dir, file);
  await waitFor(`${file} to be written`, () => existsSync(path) && statSync(path).size >= Buffer.byteLength(expected), {
    deadlineMs: DEADLINE_MS.process,
    lastState: () => (existsSync(path) ? `it holds ${tail(readFileSync(path, 'utf8'))}` : 'no such file'),
  });
  return readFileSync(path, 'utf8');
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('tmux argv (pure)', () => {
  test('tmuxArg escapes only a trailing semicolon', () => {
    assert.equal(tmuxArg('a;b'), 'a;b');
    assert.equal(tmuxArg('x;'), 'x\\;');
    assert.equal(tmuxArg('x\\;'), 'x\\\\;');
    assert.equal(tmuxArg(';'), '\\;');
  });

  test('create argv runs the command through /bin/sh -c on the private server with the managed options', () => {
    const argv = tmuxCreateArgv({ sessionName: 'work', command: 'htop', cols: 120, rows: 40 });
    assert.deepEqual(argv.slice(0, 5), ['tmux', '-L', 'sandboxd', '-f', '/dev/null']);
    assert.deepEqual(argv.slice(-5), ['--', '/bin/sh', '-c', 'htop', 'sandboxd-session']);
    const ns = argv.indexOf('new-session');
    assert.deepEqual(argv.slice(ns, ns + 8), ['new-session', '-A', '-s', 'work', '-x', '120', '-y', '40']);
    assert.ok(argv.join(' ').includes('set-option -g status off ;'));
    assert.throws(() => tmuxCreateArgv({ sessionName: 'w', cols: 80, rows: 24 }), TypeError);
    assert.throws(() => tmuxCreateArgv({ sessionName: 'w', command: 'x', cols: 0, rows: 24 }), RangeError);
    assert.throws(() => tmuxCreateArgv({ sessionName: 'w', command: 'x', cols: 80, rows: 24, env: { 'A-B': '1' } }), TypeError);
  });

  test('list-panes output parses into sessions; garbage lines are skipped', () => {
    const out = [
      '1700000000\t100\t80\t24\tmain',
      '1700000000\t101\t80\t24\tmain',
      'junk',
      '1700000001\t200\t120\t40\tname\twith tab',
      '',
    ].join('\n');
    assert.deepEqual(parseTmuxPanes(out), [
      { name: 'main', createdAtSecs: 1700000000, panePids: [100, 101], cols: 80, rows: 24 },
      { name: 'name\twith tab', createdAtSecs: 1700000001, panePids: [200], cols: 120, rows: 40 },
    ]);
    fc.assert(fc.property(fc.string({ maxLength: 300 }), (s) => Array.isArray(parseTmuxPanes(s))));
  });

  test('kill exit codes map to outcomes', () => {
    assert.equal(killOutcomeOf(0), 'killed');
    assert.equal(killOutcomeOf(3), 'not_found');
    assert.equal(killOutcomeOf(4), 'failed');
    assert.equal(killOutcomeOf(137), 'failed');
  });
});

describe('tmux argv against real tmux', { timeout: 180_000 }, () => {
  let h: TmuxHarness;
  before(() => {
    h = new TmuxHarness();
  });
  after(async () => {
    await h.close();
  });

  test('create starts the session in a PTY; stty size inside follows the PTY, including a resize', async () => {
    const argv = tmuxCreateArgv({
      socket: h.socket,
      sessionName: 'sized',
      command: 'while read -r l; do stty size; done',
      cols: 90,
      rows: 30,
    });
    const run = h.spawn(argv, { cols: 90, rows: 30 });
    await h.waitSession('sized');
    run.pty.write('\r');
    await run.waitFor('30 90');
    const size = await h.exec(tmuxPaneSizeArgv({ socket: h.socket, sessionName: 'sized' }));
    assert.equal(size.stdout.trim(), '90 30');
    run.pty.resize(132, 43);
    const paneSize = async (): Promise<string> =>
      (await h.exec(tmuxPaneSizeArgv({ socket: h.socket, sessionName: 'sized' }))).stdout.trim();
    await waitFor('the pane to be resized to 132 43', async () => (await paneSize()) === '132 43', {
      deadlineMs: DEADLINE_MS.process,
      lastState: async () => `pane size ${await paneSize()}`,
    });
    run.pty.write('\r');
    await run.waitFor('43 132');
    const kill = await h.exec(tmuxKillArgv({ socket: h.socket, sessionName: 'sized', signal: 'TERM', graceSeconds: 2 }));
    assert.equal(kill.exitCode, 0, kill.stderr);
    await run.exited;
  });

  test('the session outlives its PTY client; create again re-attaches (-A) instead of starting a second command', async () => {
    const first = h.spawn(
      tmuxCreateArgv({ socket: h.socket, sessionName: 'persist', command: 'echo started-$$; exec sleep 1000', cols: 80, rows: 24 }),
    );
    await first.waitFor(/started-\d+/);
    const pid = /started-(\d+)/.exec(first.output())?.[1];
    first.pty.kill('SIGHUP');
    await first.exited;
    await h.waitSession('persist');
    const second = h.spawn(
      tmuxCreateArgv({ socket: h.socket, sessionName: 'persist', command: 'echo second > second.txt', cols: 80, rows: 24 }),
    );
    const screen = async (): Promise<string> => (await h.exec(tmuxCapturePaneArgv({ socket: h.socket, sessionName: 'persist' }))).stdout;
    await waitFor('the screen to be redrawn for the second client', async () => (await screen()).includes(`started-${pid}`), {
      deadlineMs: DEADLINE_MS.process,
      lastState: async () => `screen ${tail(await screen())}`,
    });
    const panes = parseTmuxPanes((await h.exec(tmuxListPanesArgv({ socket: h.socket }))).stdout).filter((s) => s.name === 'persist');
    assert.equal(panes.length, 1);
    assert.equal(String(panes[0]?.panePids[0]), pid);
    assert.equal(existsSync(join(h.dir, 'second.txt')), false);
    second.pty.kill('SIGHUP');
    await second.exited;
    assert.equal((await h.exec(tmuxKillArgv({ socket: h.socket, sessionName: 'persist', signal: 'KILL' }))).exitCode, 0);
  });

  test('attach argv fails at once when the session is gone (no resurrection with a new command)', async () => {
    const run = h.spawn(tmuxAttachArgv({ socket: h.socket, sessionName: 'never-was' }));
    assert.notEqual(await run.exited, 0);
  });

  test('nasty commands reach /bin/sh byte for byte (semicolons, formats, quotes, newlines, unicode)', async () => {
    const payloads = [
      'plain',
      "it's",
      '"dq" $HOME `id` $(id)',
      '#{session_name} #(touch pwned) ##',
      'a;b; c ;',
      '\\;',
      'line1\nline2',
      'ünïcødé ✓ 漢字',
      '-n',
      '{ }',
      '%s %d',
      '~',
      '\t tab',
    ];
    let i = 0;
    for (const p of payloads) {
      for (const [suffix, extra] of [
        ['', ''],
        [';', ''],
        [' \\;', ';'],
      ] as const) {
        const out = `out${i++}`;
        const command = `printf '%s' ${shq(p)} > ${out}${suffix}`;
        const run = h.spawn(tmuxCreateArgv({ socket: h.socket, sessionName: `nasty${i}`, command, cols: 80, rows: 24 }));
        // The client's own exit code is not the command's (and is 1 when the server exits before
        // the client finished attaching): the file is the evidence.
        await run.exited;
        assert.equal(await written(h.dir, out, p + extra), p + extra, `command ${JSON.stringify(command)}`);
      }
    }
    assert.equal(existsSync(join(h.dir, 'pwned')), false);
  });

  test('random commands and env values survive tmux (property)', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1, maxLength: 40, unit: 'binary' }).filter((s) => !s.includes('\0') && !/\p{Cs}/u.test(s)),
        fc.constantFrom('', ';', ' ;'),
        async (payload, suffix) => {
          const out = `prop${n++}`;
          const run = h.spawn(
            tmuxCreateArgv({
              socket: h.socket,
              sessionName: `prop${n}`,
              command: `printf '%s' "$SBX_V" > ${out}${suffix}`,
              env: { SBX_V: payload + suffix },
              cols: 80,
              rows: 24,
            }),
          );
          await run.exited;
          assert.equal(await written(h.dir, out, payload + suffix), payload + suffix);
        },
      ),
      { numRuns: 15 },
    );
  });

  test('argv form execs the program without a shell', async () => {
    const run = h.spawn(
      tmuxCreateArgv({
        socket: h.socket,
        sessionName: 'argv',
        argv: ['/bin/sh', '-c', 'printf "%s|" "$@" > argv.txt', 'x', 'a b', '$(id)', 'semi;'],
        cols: 80,
        rows: 24,
      }),
    );
    await run.exited;
    assert.equal(await written(h.dir, 'argv.txt', 'a b|$(id)|semi;|'), 'a b|$(id)|semi;|');
  });

  test('kill ends every process of the panes (jobs in other process groups too), then the session; a TERM-ignoring process gets KILL', async () => {
    const run = h.spawn(
      tmuxCreateArgv({ socket: h.socket, sessionName: 'victim', command: 'bash --norc --noprofile -i', cols: 80, rows: 24 }),
    );
    await h.waitSession('victim');
    run.pty.write("sleep 1001 & (trap '' TERM; exec sleep 1002) & (sleep 1003 &) ; echo READY\r");
    await run.waitFor('READY\r\n');
    const panes = parseTmuxPanes((await h.exec(tmuxListPanesArgv({ socket: h.socket }))).stdout).find((s) => s.name === 'victim');
    assert.ok(panes);
    const pids: number[] = [];
    await waitFor(
      "the four jobs to run in the pane's session",
      async () => {
        const r = await h.exec(['pgrep', '-s', String(panes.panePids[0])]);
        pids.splice(0, pids.length, ...r.stdout.split('\n').filter(Boolean).map(Number));
        return pids.length >= 4;
      },
      { deadlineMs: DEADLINE_MS.process, lastState: () => `pids ${JSON.stringify(pids)}` },
    );
    const kill = await h.exec(tmuxKillArgv({ socket: h.socket, sessionName: 'victim', signal: 'TERM', graceSeconds: 1 }));
    assert.equal(kill.exitCode, 0, kill.stderr);
    assert.deepEqual(pids.filter(alive), []);
    await h.waitSession('victim', false);
    await run.exited;
    assert.equal((await h.exec(tmuxKillArgv({ socket: h.socket, sessionName: 'victim', signal: 'TERM' }))).exitCode, 3);
  });

  test('INT and HUP are delivered first; the session dies with its command', async () => {
    for (const signal of ['INT', 'HUP'] as const) {
      const name = `sig-${signal}`;
      const run = h.spawn(
        tmuxCreateArgv({
          socket: h.socket,
          sessionName: name,
          command: `trap 'echo got-${signal} > ${name}.txt; exit 0' ${signal}; echo armed > ${name}.armed; while :; do sleep 0.1; done`,
          cols: 80,
          rows: 24,
        }),
      );
      // The signal must find the trap installed, not merely the session made.
      await written(h.dir, `${name}.armed`, 'armed\n');
      assert.equal((await h.exec(tmuxKillArgv({ socket: h.socket, sessionName: name, signal, graceSeconds: 5 }))).exitCode, 0);
      await run.exited;
      assert.equal(readFileSync(join(h.dir, `${name}.txt`), 'utf8').trim(), `got-${signal}`);
    }
  });
});
