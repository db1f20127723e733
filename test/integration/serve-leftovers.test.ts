/**
 * `sandboxd serve` on the embedded default leaves no process behind. A real server child creates a
 * VM (its local agent), and a tmux session in it running a shell with background programs: one
 * that left the pane's session (setsid) and one that ignores SIGTERM and SIGHUP. Every process of
 * the server is recorded: its descendants (by /proc ppid) and, because tmux daemonizes, every
 * process whose environment carries a mark set on the server.
 *
 * - SIGTERM: the server exits 0 and none of them is left.
 * - SIGKILL: the local agent stops by itself (its stdin, a pipe only the server held, ends:
 *   --exit-with stdin); the VM's other processes may be left, and a server started again on the
 *   same state dir ends them before it is ready, and logs each one.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { distRoot } from '../support/paths.js';

const BIN = join(distRoot, 'src', 'bin', 'sandboxd.js');
/** Set on every server, a fresh value per test: the processes it starts inherit it (tmux too, which is no descendant). */
const kMarkEnv = 'SANDBOXD_LEFTOVERS_TEST';
/** Start-up to the ready line (a restart includes ending the leftovers: one grace period). */
const kReadyMs = 60_000;
/** VM create to its agent registered, on 2 busy cores. */
const kAgentRegisteredMs = 90_000;
/** Session create to its programs running. */
const kSessionRunningMs = 30_000;
/** The server's shutdown deadline (SVC_SHUTDOWN_DEADLINE_MS), and the margin on top for the exit. */
const kShutdownDeadlineMs = 10_000;
const kExitMarginMs = 10_000;
/** After the server is gone (or the restarted one is ready): how long its processes may take to go. */
const kGoneMs = 5_000;
/**
 * A local agent whose sandboxd was killed stops gracefully by itself (src/guest-agent/agent.ts
 * `stop`): its commands' grace (5 s by default), then the flush of pending output (at most 5 s:
 * the session's unacknowledged output is pending, and nobody acknowledges it), then the stream's
 * close (2 s), and a margin.
 */
const kAgentStopMs = 15_000;
/** The session: a shell with a program in its own session and one that ignores TERM and HUP. */
const kSessionCommand = "sleep 3600 & setsid sleep 3601 & (trap '' TERM HUP; exec sleep 3602) & exec bash";

const roots: string[] = [];
const marks: string[] = [];
const servers: ChildProcess[] = [];
/** Every process seen, so `after` can kill what a failing test left. */
const seen = new Map<number, Proc>();

interface Proc {
  readonly pid: number;
  readonly startTicks: string;
  readonly cmdline: string;
}

after(async () => {
  for (const s of servers) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL');
  // Again until none is left: a process killed late may have started another meanwhile.
  for (let round = 0; round < 50; round++) {
    const left = [...seen.values(), ...marks.flatMap((m) => marked(m))].filter(alive);
    if (left.length === 0) break;
    for (const p of left) kill(p);
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});

function kill(p: Proc): void {
  try {
    process.kill(p.pid, 'SIGKILL');
  } catch {
    // gone
  }
}

/** ppid, state and start time of pid, or null when it is gone. */
function statOf(pid: number): { ppid: number; state: string; startTicks: string } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: f[0] ?? '', ppid: Number(f[1]), startTicks: f[19] ?? '' };
  } catch {
    return null;
  }
}

function procOf(pid: number): Proc | null {
  const s = statOf(pid);
  if (s === null || s.state === 'Z') return null;
  try {
    return { pid, startTicks: s.startTicks, cmdline: readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim() };
  } catch {
    return null;
  }
}

/** The same process (not a recycled pid), alive and not a zombie. */
function alive(p: Proc): boolean {
  const s = statOf(p.pid);
  return s !== null && s.state !== 'Z' && s.startTicks === p.startTicks;
}

function allPids(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

/** The NAME=value entries of pid's environment ([] when it is gone). */
function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
  } catch {
    return [];
  }
}

/** Processes carrying `mark`. */
function marked(mark: string): Proc[] {
  const out: Proc[] = [];
  for (const pid of allPids()) {
    if (pid === process.pid) continue;
    if (!environOf(pid).includes(`${kMarkEnv}=${mark}`)) continue;
    const p = procOf(pid);
    if (p !== null) out.push(p);
  }
  return out;
}

/** Every process of the server: its descendants and every process with its mark, the server excluded. */
function processesOf(server: Server): Proc[] {
  const children = new Map<number, number[]>();
  for (const pid of allPids()) {
    const s = statOf(pid);
    if (s !== null) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  }
  const found = new Map<number, Proc>();
  const queue = [...(children.get(server.child.pid ?? -1) ?? [])];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    const p = procOf(pid);
    if (p !== null) found.set(pid, p);
    queue.push(...(children.get(pid) ?? []));
  }
  for (const p of marked(server.mark)) if (p.pid !== server.child.pid) found.set(p.pid, p);
  for (const p of found.values()) seen.set(p.pid, p);
  return [...found.values()];
}

function describeProcs(procs: readonly Proc[]): string {
  return procs.map((p) => `  ${p.pid}: ${p.cmdline}`).join('\n');
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until none of `procs` is alive; fails naming the survivors. */
async function assertAllGone(procs: readonly Proc[], when: string, withinMs = kGoneMs): Promise<void> {
  const deadline = Date.now() + withinMs;
  let left = procs.filter(alive);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    left = left.filter(alive);
  }
  assert.equal(
    left.length,
    0,
    `${when}, ${left.length} process(es) of the server are still alive ${withinMs} ms later:\n${describeProcs(left)}`,
  );
}

interface Server {
  readonly child: ChildProcess;
  readonly mark: string;
  readonly url: string;
  readonly stdout: () => string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function serve(root: string, mark: string): Promise<Server> {
  const passOn = Object.fromEntries(
    ['SANDBOXD_TEST_RUN', 'SANDBOXD_TEST_FILE'].flatMap((k) => (process.env[k] === undefined ? [] : [[k, process.env[k]]])),
  );
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: {
      ...passOn,
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: join(root, 'home'),
      SVC_STATE_DIR: join(root, 'state'),
      SECRETS_DIR: join(root, 'secrets'),
      SVC_HTTP_ADDR: '127.0.0.1:0',
      SVC_WS_ADDR: '127.0.0.1:0',
      SVC_GRPC_ADDR: '127.0.0.1:0',
      SVC_ADMIN_ADDR: '127.0.0.1:0',
      SVC_ACTOR_SHARDS: '1',
      SVC_SHUTDOWN_DEADLINE_MS: String(kShutdownDeadlineMs),
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      TERM: 'xterm-256color',
      [kMarkEnv]: mark,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  servers.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = await Promise.race([
    waitFor('the ready line', kReadyMs, () => /sandboxd ready: API and dashboard (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1]),
    exit.then((e) => {
      throw new Error(`sandboxd exited (${JSON.stringify(e)}) before it was ready:\n${out}\n${err}`);
    }),
  ]);
  return { child, mark, url, stdout: () => out, exit };
}

async function api(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(new URL(path, url), {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await r.text();
  return { status: r.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

/** Resolves when the event stream reports the agent registered (events so far included). */
async function agentRegistered(url: string, vm: string): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no agent.registered for ${vm} within ${kAgentRegisteredMs} ms`)), kAgentRegisteredMs);
  try {
    const r = await fetch(new URL(`/api/v1/events?follow=true&since=0&event_type=agent.registered&agent_id=${vm}`, url), {
      signal: ac.signal,
    });
    assert.equal(r.status, 200);
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of r.body as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (text.includes('"agent.registered"')) return;
    }
    throw new Error('the event stream ended before the agent registered');
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** A VM with a running tmux session as in the file comment; resolves with every process of the server. */
async function vmWithSession(s: Server, root: string, vm: string): Promise<Proc[]> {
  const registered = agentRegistered(s.url, vm);
  const created = await api(s.url, 'POST', '/api/v1/vms', { name: vm, profile: 'basic' });
  assert.equal(created.status, 202, JSON.stringify(created.json));
  await registered;
  const session = await api(s.url, 'POST', `/api/v1/agents/${vm}/sessions`, { session_name: 'leftovers', command: kSessionCommand });
  assert.equal(session.status, 200, JSON.stringify(session.json));
  const procs = await waitFor("the session's shell and programs", kSessionRunningMs, () => {
    const ps = processesOf(s);
    const running = (re: RegExp): boolean => ps.some((p) => re.test(p.cmdline));
    return running(/^sleep 3600$/) && running(/^sleep 3601$/) && running(/^sleep 3602$/) && running(/^bash$/) ? ps : undefined;
  });
  const cmdlines = procs.map((p) => p.cmdline);
  assert.ok(
    cmdlines.some((c) => c.includes('sandbox-agent.js')),
    `the local agent runs:\n${describeProcs(procs)}`,
  );
  assert.ok(
    cmdlines.some((c) => c.startsWith('tmux ')),
    `a tmux server runs:\n${describeProcs(procs)}`,
  );
  const tmuxDir = join(root, 'state', 'vms', vm, 'tmux');
  assert.ok(
    existsSync(join(tmuxDir, `tmux-${process.getuid?.() ?? 0}`, 'sandboxd')),
    `the VM's tmux socket is in its own folder ${tmuxDir}`,
  );
  return procs;
}

/** A fresh temp dir (HOME, state, secrets) and mark for one test. */
function newRun(): { root: string; mark: string } {
  const root = mkdtempSync(join(tmpdir(), 'sbx-lo-'));
  roots.push(root);
  mkdirSync(join(root, 'home'));
  const mark = randomUUID();
  marks.push(mark);
  return { root, mark };
}

describe('sandboxd serve on the embedded default leaves no process behind', { timeout: 300_000 }, () => {
  test('SIGTERM ends the local agent, its tmux server and every program in it', async () => {
    const { root, mark } = newRun();
    const s = await serve(root, mark);
    const procs = await vmWithSession(s, root, 'agent-lo-term');
    s.child.kill('SIGTERM');
    const exit = await Promise.race([
      s.exit,
      new Promise<never>((_, reject) =>
        setTimeout(
          () => reject(new Error(`sandboxd did not exit within ${kShutdownDeadlineMs + kExitMarginMs} ms of SIGTERM`)),
          kShutdownDeadlineMs + kExitMarginMs,
        ).unref(),
      ),
    ]);
    // 0: the stop finished within SVC_SHUTDOWN_DEADLINE_MS (past it, sandboxd exits 1).
    assert.equal(exit.code, 0, s.stdout().slice(-4000));
    await assertAllGone(procs, 'after sandboxd exited on SIGTERM');
    assert.match(s.stdout(), /ended a process of a stopped local VM/);
  });

  test('after SIGKILL, the next start on the same state dir ends what the dead server left', async () => {
    const { root, mark } = newRun();
    const first = await serve(root, mark);
    const procs = await vmWithSession(first, root, 'agent-lo-kill');
    first.child.kill('SIGKILL');
    await first.exit;
    const agents = procs.filter((q) => /sandbox-agent\.js/.test(q.cmdline));
    assert.ok(agents.length > 0, describeProcs(procs));
    await assertAllGone(agents, 'the local agent, once the sandboxd that started it was killed', kAgentStopMs);
    const second = await serve(root, mark);
    await assertAllGone(procs, 'after a restart on the same state dir was ready');
    const reaped = second
      .stdout()
      .split('\n')
      .filter((l) => l.includes('ended a process that an earlier sandboxd left running'));
    // The ones that cannot end on their own. tmux clients can (a client whose terminal went with
    // the killed agent exits by itself, and its cmdline is the server's), so for tmux only the
    // server must be among those logged.
    for (const p of procs.filter((q) => /^sleep 360[0-2]$|^bash$/.test(q.cmdline))) {
      assert.ok(
        reaped.some((l) => l.includes(`"pid":${p.pid},`)),
        `the restart logs ending ${p.pid} (${p.cmdline}):\n${reaped.join('\n')}`,
      );
    }
    assert.ok(
      reaped.some((l) => l.includes('"cmdline":"tmux ')),
      `the restart logs ending the tmux server:\n${reaped.join('\n')}`,
    );
    const own = processesOf(second);
    second.child.kill('SIGTERM');
    assert.equal((await second.exit).code, 0, second.stdout().slice(-4000));
    await assertAllGone(own, 'after the restarted sandboxd exited on SIGTERM');
  });
});
