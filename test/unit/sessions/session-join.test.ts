/**
 * Sessions started by a pty.join_session selection (SessionService.startForJoin) and the session
 * host's capabilities (hostCapabilities), with real GNU screen, tmux and PTYs: LocalAgentPort plays
 * the agent (only gRPC is missing). Output is read where the agent delivers it (every command's
 * output, by command id), not through a hub, so these tests hold whatever the hub's frames are.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { execArgv } from '../../../src/core/tmux-argv.js';
import type { OneShotCommandRequest, OneShotResult } from '../../../src/sessions/agent-port.js';
import type { SessionEvent } from '../../../src/sessions/reconcile.js';
import { sessionBackendPlan } from '../../../src/sessions/session-backends.js';
import { hostProbeArgv } from '../../../src/sessions/session-host.js';
import type { JoinStart } from '../../../src/sessions/session-join.js';
import { SessionRegistry } from '../../../src/sessions/session-registry.js';
import { SessionService } from '../../../src/sessions/session-service.js';
import { SessionStore } from '../../../src/sessions/session-store.js';
import { alive, BackendDir } from './backend-kit.js';
import { LocalAgentPort } from './local-agent-port.js';
import { TmuxHarness } from './tmux-harness.js';
import { DEADLINE_MS, tail, waitFor } from '../../support/wait.js';
import { newTerminal, screenOf, write } from '../terminal/screens.js';

const URLS = { httpBaseUrl: 'http://127.0.0.1:8122', wsBaseUrl: 'ws://127.0.0.1:8121' };
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const SID = (n: number): string => `5e55${String(n).padStart(4, '0')}-0000-4000-8000-000000000000`;
const BASH = ['bash', '--norc', '--noprofile', '-i'];

/** A LocalAgentPort whose probe answer can be replaced (a host without screen, a silent agent). */
class ProbePort extends LocalAgentPort {
  probe: ((req: OneShotCommandRequest) => Promise<OneShotResult> | undefined) | undefined;
  override runCommand(agentId: string, req: OneShotCommandRequest): Promise<OneShotResult> {
    const isProbe = req.argv[3] === hostProbeArgv()[3];
    return (isProbe ? this.probe?.(req) : undefined) ?? super.runCommand(agentId, req);
  }
}

void describe('sessions started by a join (real screen, tmux and PTYs)', { timeout: 240_000 }, () => {
  let h: TmuxHarness;
  let rt: BackendDir;
  let dir: string;
  let port: ProbePort;
  let store: SessionStore;
  let service: SessionService;
  let events: SessionEvent[];
  /** Output of every PTY command, by command id. */
  let output: Map<string, string>;
  const agents = new Map([['agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true }]]);

  function startService(): void {
    store = new SessionStore(join(dir, 'sessions'));
    events = [];
    service = new SessionService({
      registry: new SessionRegistry({ store }),
      agents: {
        get: (id) => agents.get(id),
        byInstance: (id) => [...agents.values()].find((a) => a.instanceId === id || a.agentId === id),
      },
      port,
      emit: (e) => events.push(e),
      tmuxSocket: h.socket,
      runtimeDir: rt.dir,
      killGraceSeconds: 1,
    });
    port.sink = {
      commandOutput: (id, seq, data) => {
        output.set(id, (output.get(id) ?? '') + Buffer.from(data).toString('latin1'));
        service.commandOutput(id, seq, data);
      },
      commandFinished: (id, code) => service.commandFinished(id, code),
    };
  }

  /** Waits until the session's current PTY command printed `text`. */
  async function seen(sessionId: string, text: string | RegExp): Promise<void> {
    const out = (): string => output.get(service.hitlInfo(sessionId)?.commandId ?? '') ?? '';
    await waitFor(
      `output ${String(text)} of session ${sessionId}`,
      () => (typeof text === 'string' ? out().includes(text) : text.test(out())),
      {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => `output ${tail(out())}`,
      },
    );
  }

  /** Waits until the session's screen (its output played into a 100×30 terminal) starts with `lines`. */
  async function seenOnScreen(sessionId: string, lines: readonly string[]): Promise<void> {
    const shown = async (): Promise<string[]> => {
      const term = newTerminal(100, 30);
      await write(term, output.get(service.hitlInfo(sessionId)?.commandId ?? '') ?? '');
      const screen = screenOf(term).lines;
      term.dispose();
      return screen;
    };
    let last: string[] = [];
    await waitFor(
      `lines ${JSON.stringify(lines)} on the screen of session ${sessionId}`,
      async () => {
        last = await shown();
        return lines.every((l, i) => last[i] === l);
      },
      { deadlineMs: DEADLINE_MS.process, lastState: () => `screen ${JSON.stringify(last.slice(0, lines.length + 2))}` },
    );
  }

  function join1(sel: Partial<JoinStart> & { backend: string; class: string }): JoinStart {
    return { cols: 100, rows: 30, ...sel };
  }

  async function rejects(p: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
    await assert.rejects(p, (e: unknown) => e instanceof SvcError && e.code === code && (message === undefined || message.test(e.message)));
  }

  before(() => {
    h = new TmuxHarness();
    rt = new BackendDir();
  });
  after(async () => {
    await rt.close();
    await h.close();
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-join-'));
    port = new ProbePort(h);
    output = new Map();
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true });
    startService();
  });
  afterEach(() => {
    port.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the host probe reports what this machine has, once per registration', async () => {
    const caps = await service.hostCapabilities('agent-1');
    const pairs = Object.fromEntries(caps.pairs.map((p) => [`${p.session_backend}/${p.session_class}`, p]));
    assert.deepEqual(Object.keys(pairs).sort(), ['native/direct', 'screen/managed', 'tmux/managed', 'zellij/managed']);
    assert.equal(pairs['tmux/managed']?.available, true);
    assert.equal(pairs['screen/managed']?.available, true);
    assert.equal(pairs['native/direct']?.available, true);
    assert.equal(pairs['zellij/managed']?.available, false);
    assert.match(pairs['zellij/managed']?.reason ?? '', /Debian 12 has no zellij package/);
    assert.deepEqual([caps.default_backend, caps.default_class], ['tmux', 'managed']);
    assert.deepEqual([...caps.supported_backends].sort(), ['native', 'screen', 'tmux']);
    assert.deepEqual([...caps.supported_classes].sort(), ['direct', 'managed']);
    assert.deepEqual([caps.observe_supported, caps.drive_supported, caps.reattach_supported], [true, true, true]);
    const probes = (): number => port.oneShots.filter((a) => a[3] === 'sandboxd-probe').length;
    assert.equal(probes(), 1);
    await service.hostCapabilities('agent-1');
    assert.equal(service.hostCapabilitiesCached('agent-1'), await service.hostCapabilities('agent-1'));
    assert.equal(probes(), 1, 'cached');
    service.agentDisconnected('agent-1');
    service.agentConnected('agent-1');
    await service.hostCapabilities('agent-1');
    assert.equal(probes(), 2, 'probed again after a new registration');
    await rejects(service.hostCapabilities('nobody'), 'agent.not_found');
  });

  test('a probe that does not answer in time: native/direct only, with the reason; the late answer fills the cache', async () => {
    store.close();
    let answer: (r: OneShotResult) => void = () => undefined;
    port.probe = () => new Promise((r) => (answer = r));
    service = new SessionService({
      registry: new SessionRegistry({ store: (store = new SessionStore(join(dir, 'sessions2'))) }),
      agents: { get: (id) => agents.get(id), byInstance: () => undefined },
      port,
      hostProbeTimeoutMs: 100,
    });
    // The probe's timer is unref'd (a server has its listeners); here nothing else keeps the loop up.
    const hold = setInterval(() => undefined, 1000);
    const caps = await service.hostCapabilities('agent-1').finally(() => clearInterval(hold));
    assert.deepEqual(
      caps.pairs.filter((p) => p.available).map((p) => p.session_backend),
      ['native'],
    );
    assert.match(caps.pairs.find((p) => p.session_backend === 'tmux')?.reason ?? '', /could not probe the agent: no answer within 100 ms/);
    assert.deepEqual([caps.default_backend, caps.default_class, caps.reattach_supported], ['native', 'direct', false]);
    await rejects(
      service.startForJoin('agent-1', SID(9), join1({ backend: 'screen', class: 'managed' })),
      'session_backend.not_implemented',
      /could not probe/,
    );
    answer({ exitCode: 0, output: 'tmux yes\nscreen no\nzellij no\npgrep yes\npkill yes\n' });
    await waitFor(
      'the late answer to be cached',
      () => service.hostCapabilitiesCached('agent-1')?.supported_backends.includes('tmux') === true,
      {
        deadlineMs: DEADLINE_MS.local,
      },
    );
    const late = service.hostCapabilitiesCached('agent-1');
    assert.equal(late?.pairs.find((p) => p.session_backend === 'screen')?.reason, 'screen is not installed on the agent');
  });

  test('screen/managed: started with cwd and env, typed into, re-attached after the agent lost its PTY command, killed whole', async () => {
    const cwd = join(h.dir, 'work dir');
    mkdirSync(cwd, { recursive: true });
    const id = SID(1);
    const rec = await service.startForJoin(
      'agent-1',
      id,
      join1({ backend: 'screen', class: 'managed', argv: BASH, cwd: 'work dir', env: { GREETING: 'hi there; $(not run)' } }),
    );
    assert.deepEqual(
      [rec.sessionId, rec.sessionBackend, rec.sessionClass, rec.state, rec.command, rec.cols],
      [id, 'screen', 'managed', 'running', 'bash --norc --noprofile -i', 100],
    );
    const entry = service.list('agent-1', URLS).sessions[0];
    assert.deepEqual([entry?.session_id, entry?.session_backend, entry?.session_class], [id, 'screen', 'managed']);
    assert.deepEqual(events[0]?.details, {
      session_id: id,
      command_id: rec.commandId,
      session_name: rec.sessionName,
      command: rec.command,
      session_backend: 'screen',
      session_class: 'managed',
    });
    await seen(id, /[$#] /);
    await service.writeInput(id, enc('echo "[$GREETING]"; pwd; stty size\r'));
    await seen(id, '[hi there; $(not run)]');
    await seen(id, `${realpathSync(cwd)}\r\n30 100`);

    // The agent restarts: its PTY commands die with it; the screen session stays.
    port.crashAgent();
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: false });
    service.agentDisconnected('agent-1');
    assert.equal(service.list('agent-1', URLS).sessions[0]?.state, 'detached');
    assert.equal(
      (await execArgv(sessionBackendPlan('screen', 'managed', { runtimeDir: rt.dir })?.hasSessionArgv(rec.sessionName) ?? [])).exitCode,
      0,
    );
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true });
    service.agentConnected('agent-1');
    service.applyPlan('agent-1', { keep: [], kill: [], running: [], reattach: [id] });
    await waitFor('the re-attached generation', () => service.list('agent-1', URLS).sessions[0]?.command_id !== rec.commandId, {
      deadlineMs: DEADLINE_MS.process,
    });
    // screen redraws the window for the new display: the old output is on it.
    await seen(id, 'hi there');
    await service.writeInput(id, enc('echo again-$((40+2))\r'));
    await seen(id, 'again-42');
    assert.equal(service.list('agent-1', URLS).sessions[0]?.state, 'running');

    assert.deepEqual(await service.kill('agent-1', id, 'TERM'), { killed: true });
    assert.deepEqual(await rt.screens(), []);
    assert.deepEqual(service.list('agent-1', URLS).sessions, []);
    assert.deepEqual(
      events.map((e) => [e.event_type, e.details['reason']]),
      [
        ['agent.pty.created', undefined],
        ['agent.pty.closed', 'killed'],
      ],
    );
  });

  test('native/direct: the command through sh -lc, typed into, killed; lost with the agent, it ends and nothing of it is left', async () => {
    const id = SID(2);
    const rec = await service.startForJoin(
      'agent-1',
      id,
      join1({ backend: 'native', class: 'direct', command: 'echo start-$((6*7)); exec bash --norc --noprofile -i', env: { X: 'y' } }),
    );
    assert.deepEqual(
      [rec.sessionBackend, rec.sessionClass, rec.command],
      ['native', 'direct', 'echo start-$((6*7)); exec bash --norc --noprofile -i'],
    );
    await seen(id, 'start-42');
    await service.writeInput(id, enc('echo x=$X; stty size\r'));
    await seen(id, 'x=y\r\n30 100');
    assert.deepEqual(await service.kill('agent-1', id, 'TERM'), { killed: true });
    assert.deepEqual(service.list('agent-1', URLS).sessions, []);
    await waitFor('the PTY command to end', () => port.running.size === 0, { deadlineMs: DEADLINE_MS.process });

    // A native session whose program ignores the hangup of a lost PTY: a re-attach kills it and ends the session.
    const id2 = SID(3);
    await service.startForJoin(
      'agent-1',
      id2,
      join1({ backend: 'native', class: 'direct', command: "trap '' HUP; echo pid=$$; exec sleep 600" }),
    );
    await seen(id2, /pid=\d+/);
    const pid = Number(/pid=(\d+)/.exec(output.get(service.hitlInfo(id2)?.commandId ?? '') ?? '')?.[1]);
    port.crashAgent();
    service.agentDisconnected('agent-1');
    assert.ok(alive(pid), 'the program outlived its PTY');
    service.agentConnected('agent-1');
    await service.reattach(id2);
    assert.equal(alive(pid), false);
    assert.deepEqual(service.list('agent-1', URLS).sessions, []);
    assert.equal(events.at(-1)?.details['reason'], 'not_found');
  });

  test("native/direct without a program: the user's login shell", async () => {
    const id = SID(4);
    const rec = await service.startForJoin('agent-1', id, join1({ backend: 'native', class: 'direct', env: { HOME: h.dir } }));
    assert.equal(rec.command, '');
    await service.writeInput(id, enc('shopt -q login_shell && echo LOGIN-$((20+22))\r'));
    await seen(id, 'LOGIN-42');
    assert.deepEqual(await service.kill('agent-1', id, 'KILL'), { killed: true });
  });

  test('tmux/managed by a join: argv, cwd and env reach the pane', async () => {
    const id = SID(5);
    await service.startForJoin(
      'agent-1',
      id,
      join1({ backend: 'tmux', class: 'managed', argv: ['sh', '-c', 'echo "v=$V"; pwd; exec cat'], env: { V: 'w;' }, cwd: '/' }),
    );
    // What the pane shows, not the bytes tmux drew it with: a redraw may place a line by cursor
    // moves instead of CR LF, so the output is played into a terminal of the pane's size.
    await seenOnScreen(id, ['v=w;', '/']);
    assert.equal(service.list('agent-1', URLS).sessions[0]?.session_backend, 'tmux');
    assert.deepEqual(await service.kill('agent-1', id, 'TERM'), { killed: true });
  });

  test('unsupported or malformed selections fail closed before anything starts', async () => {
    const cases: [string, JoinStart, string, RegExp?][] = [
      [SID(10), join1({ backend: 'native', class: 'managed' }), 'session_class.not_implemented', /native\/managed is not a pair/],
      [SID(11), join1({ backend: 'tmux', class: 'direct' }), 'session_class.not_implemented'],
      [SID(12), join1({ backend: 'screen', class: 'direct' }), 'session_class.not_implemented'],
      [SID(13), join1({ backend: 'zellij', class: 'managed' }), 'session_backend.not_implemented', /Debian 12/],
      [SID(14), join1({ backend: 'vt52', class: 'managed' }), 'session_backend.not_implemented'],
      [SID(15), join1({ backend: 'tmux', class: 'hosted' }), 'session_class.not_implemented'],
      ['not-a-uuid', join1({ backend: 'native', class: 'direct' }), 'request.invalid', /not a UUID/],
      [SID(16), join1({ backend: 'native', class: 'direct', argv: ['a'], command: 'b' }), 'request.invalid'],
      [SID(17), join1({ backend: 'native', class: 'direct', argv: [] }), 'request.invalid'],
      [SID(18), join1({ backend: 'native', class: 'direct', env: { 'BAD-NAME': 'x' } }), 'request.invalid'],
      [SID(19), join1({ backend: 'native', class: 'direct', cols: 0 }), 'request.invalid'],
      [SID(20), join1({ backend: 'native', class: 'direct', argv: ['a\0b'] }), 'request.invalid'],
    ];
    for (const [id, sel, code, message] of cases) await rejects(service.startForJoin('agent-1', id, sel), code, message);
    await rejects(service.startForJoin('nobody', SID(21), join1({ backend: 'native', class: 'direct' })), 'agent.not_found');
    // A host without screen: the pair is advertised unavailable, and a join for it fails closed.
    port.probe = () => Promise.resolve({ exitCode: 0, output: 'tmux yes\nscreen no\nzellij no\npgrep yes\npkill yes\n' });
    service.agentConnected('agent-1');
    await rejects(
      service.startForJoin('agent-1', SID(22), join1({ backend: 'screen', class: 'managed' })),
      'session_backend.not_implemented',
      /screen is not installed on the agent; available: tmux\/managed, native\/direct/,
    );
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: false });
    await rejects(service.startForJoin('agent-1', SID(23), join1({ backend: 'native', class: 'direct' })), 'server.unavailable');
    assert.equal(port.running.size, 0, 'no PTY command was sent');
    assert.deepEqual(service.list('agent-1', URLS).sessions, []);
    assert.deepEqual(events, []);
    assert.deepEqual(await rt.screens(), []);
  });

  test("a live session's id is not started twice; a failed start leaves nothing behind", async () => {
    const id = SID(30);
    await service.startForJoin('agent-1', id, join1({ backend: 'native', class: 'direct', argv: ['sleep', '600'] }));
    await rejects(service.startForJoin('agent-1', id, join1({ backend: 'native', class: 'direct', argv: ['true'] })), 'session.id_in_use');
    assert.equal(port.running.size, 1);
    assert.deepEqual(await service.kill('agent-1', id, 'TERM'), { killed: true });
    port.connected = false;
    await rejects(service.startForJoin('agent-1', SID(31), join1({ backend: 'native', class: 'direct' })), 'server.unavailable');
    assert.equal(service.hub(SID(31)), undefined);
    assert.deepEqual(service.list('agent-1', URLS).sessions, []);
  });
});
