/**
 * The sessions component end to end with real tmux and real PTYs (LocalAgentPort plays the
 * agent; only gRPC is missing): the routes through inject(), clients as in-memory sinks on the
 * hubs, the registry on disk, reconciliation after a restart of "sandboxd".
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startScreenStates } from '../../../actors/terminal/screen-states.js';
import { registerSessionRoutes } from '../../../src/sessions/routes.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import type { RequestView } from '../../../src/http/types.js';
import { HitlService } from '../../../src/sessions/hitl.js';
import { BindingStore } from '../../../src/idempotency/binding-store.js';
import { Idempotency } from '../../../src/idempotency/idempotency.js';
import type { SessionEvent } from '../../../src/sessions/reconcile.js';
import { SessionReconciler } from '../../../src/sessions/session-reconciler.js';
import { SessionRegistry } from '../../../src/sessions/session-registry.js';
import { SessionService } from '../../../src/sessions/session-service.js';
import { SessionStore } from '../../../src/sessions/session-store.js';
import { type SessionCreateResponse, type SessionListEntry } from '../../../src/sessions/session-types.js';
import { parseTmuxPanes, tmuxCreateArgv, tmuxListPanesArgv } from '../../../src/core/tmux-argv.js';
import { attach, type FakeSink } from './fake-sink.js';
import { LocalAgentPort } from './local-agent-port.js';
import { TmuxHarness } from './tmux-harness.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

const URLS = { httpBaseUrl: 'http://127.0.0.1:8122', wsBaseUrl: 'ws://127.0.0.1:8121' };
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Waits until `cond` holds for what `sink` received; the timeout shows its last frames and output. */
function untilSeen(sink: FakeSink, what: string, cond: () => boolean): Promise<true> {
  return waitFor(what, cond, {
    deadlineMs: DEADLINE_MS.process,
    wake: (recheck) => sink.onFrame(recheck),
    lastState: () => sink.describe(),
  });
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

interface Server {
  store: SessionStore;
  service: SessionService;
  router: Router;
  events: SessionEvent[];
  reconciler: SessionReconciler;
  hitl: HitlService;
  killed: { value: number };
}

const screens = startScreenStates();
after(() => screens.stop());

describe('sessions end to end (real tmux, real PTYs)', { timeout: 240_000 }, () => {
  let h: TmuxHarness;
  let dir: string;
  let port: LocalAgentPort;
  const agents = new Map([['agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true }]]);

  /** One "sandboxd": store, registry, service, routes, reconciler — on the shared state dir. */
  function startServer(): Server {
    const store = new SessionStore(joinPath(dir, 'sessions'));
    const events: SessionEvent[] = [];
    const killed = { value: 0 };
    const counter = (c: { value: number }) => ({ inc: (n = 1) => void (c.value += n) });
    const registry = new SessionRegistry({ store });
    const hitl: HitlService = new HitlService({
      writeInput: (sid, d) => service.writeInput(sid, d),
      sessionInfo: (sid) => service.hitlInfo(sid),
      settleMs: 100,
    });
    const service: SessionService = new SessionService({
      registry,
      agents: { get: (id) => agents.get(id), byInstance: (i) => [...agents.values()].find((a) => a.instanceId === i) },
      port,
      // The server's idempotency store, on the same state dir: bindings outlive a "restart" too.
      idempotency: new Idempotency({ store: new BindingStore(joinPath(dir, 'idempotency')) }),
      hitl,
      metrics: { sessionsKilledTotal: counter(killed) },
      emit: (e) => events.push(e),
      tmuxSocket: h.socket,
      killGraceSeconds: 1,
      hub: { pingIntervalMs: 0 },
      screen: screens,
    });
    const reconciler = new SessionReconciler({
      sessions: registry,
      emit: (e) => events.push(e),
      metrics: { sessionReconciliationsTotal: counter({ value: 0 }), sessionsKilledTotal: counter(killed) },
      graceSeconds: 1,
      onPlan: (a, p) => service.applyPlan(a, p),
      transport: {
        sendSessionQuery: (agentId) =>
          queueMicrotask(() => reconciler.reportReceived(agentId, { sessions: port.report(), timestampMs: Date.now() })),
        sendSessionReconcile: (agentId, msg) => {
          port
            .reconcile(msg)
            .then((ack) => reconciler.ackReceived(agentId, ack))
            .catch((err: unknown) => assert.fail(String(err)));
        },
      },
    });
    port.sink = service;
    const router = new Router();
    // The caller's URLs: its Host when it sends one (as sessionsComponent does through src/http/public-url.ts).
    const urls = (req: RequestView) => {
      const host = req.headers['host'];
      return host === undefined ? URLS : { httpBaseUrl: `http://${host}`, wsBaseUrl: `ws://${host.replace(/:\d+$/, '')}:8121` };
    };
    registerSessionRoutes(router, { sessions: service, urls });
    return { store, service, router, events, reconciler, hitl, killed };
  }

  async function create(
    s: Server,
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; json: SessionCreateResponse; headers: Record<string, string> }> {
    const r = await inject(s.router, { method: 'POST', url: '/api/v1/agents/agent-1/sessions', body, headers });
    return { status: r.status, json: r.json() as SessionCreateResponse, headers: r.headers };
  }

  async function list(s: Server): Promise<SessionListEntry[]> {
    return ((await inject(s.router, { method: 'GET', url: '/api/v1/agents/agent-1/sessions' })).json() as { sessions: SessionListEntry[] })
      .sessions;
  }

  before(() => {
    h = new TmuxHarness();
  });
  after(async () => {
    await h.close();
  });
  beforeEach(() => {
    dir = mkdtempSync(joinPath(tmpdir(), 'sbx-svc-'));
    port = new LocalAgentPort(h);
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true });
  });
  afterEach(() => {
    port.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('create → a controller types → an observer reads; a second controller is downgraded; observer input is ignored; resize reaches stty size', async () => {
    const s = startServer();
    const res = await create(s, { command: 'bash --norc --noprofile -i', session_name: 'pair' });
    assert.equal(res.status, 200);
    assert.equal(res.json.session_name, 'pair');
    const hub = s.service.hub(res.json.session_id);
    assert.ok(hub);
    const ctl = attach(hub, { role: 'controller', cols: 100, rows: 30 });
    const obs = attach(hub);
    const ctl2 = attach(hub, { role: 'controller' });
    assert.equal(ctl2.last('RoleAssigned')?.payload['role'], 'observer');
    assert.equal(ctl2.last('RoleAssigned')?.payload['reason'], 'lease_held');
    await h.waitSession('pair');
    hub.input(obs, enc('echo OBSERVER-WAS-HERE\r'));
    await untilSeen(obs, 'the refusal of the observer input', () => obs.last('Error')?.payload['code'] === 'PERMISSION_DENIED');
    hub.input(ctl, enc('echo hello-$((6*7)); stty size\r'));
    await untilSeen(obs, "the observer to see the controller's command", () => obs.output().includes('hello-42'));
    await untilSeen(obs, "stty size to show the controller's size", () => obs.output().includes('30 100'));
    hub.resize(ctl, 90, 20);
    // The resize travels PTY → tmux client → tmux server → pane asynchronously: ask until it shows.
    let asked = 0;
    await untilSeen(obs, 'the resize to reach the PTY (stty size 20 90)', () => {
      if (Date.now() - asked > 500) {
        asked = Date.now();
        hub.input(ctl, enc('stty size\r'));
      }
      return obs.output().includes('20 90');
    });
    assert.ok(!obs.output().includes('OBSERVER-WAS-HERE'));
    const entry = (await list(s))[0];
    assert.deepEqual(entry?.membership, { controllers: [`c-${ctl.id}`], observers: [`c-${obs.id}`, `c-${ctl2.id}`], attachment_count: 3 });
    assert.equal(entry?.liveness.agent_connected, true);
    assert.equal(entry?.has_screen, true);
    assert.ok((entry?.liveness.replay_newest_seq ?? 0) > 0);
    assert.equal(entry?.state, 'running');
    await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${res.json.session_id}?signal=KILL` });
    s.store.close();
  });

  test('Idempotency-Key: a retry returns the same session (Idempotency-Replayed), a different body conflicts; no second terminal', async () => {
    const s = startServer();
    const a = await create(s, { command: 'sleep 600' }, { 'idempotency-key': 'key-1' });
    const b = await create(s, { command: 'sleep 600' }, { 'idempotency-key': 'key-1' });
    assert.equal(b.status, 200);
    assert.equal(b.headers['idempotency-replayed'], 'true');
    assert.deepEqual(b.json, a.json);
    // A replay through another host name (a proxy, a tunnel) answers with that caller's URLs.
    const viaProxy = await create(s, { command: 'sleep 600' }, { 'idempotency-key': 'key-1', host: 'tunnel.example:9000' });
    assert.equal(viaProxy.headers['idempotency-replayed'], 'true');
    assert.equal(viaProxy.json.session_id, a.json.session_id);
    assert.equal(viaProxy.json.pty_ws_url, `ws://tunnel.example:9000/api/v1/sessions/${a.json.session_id}/pty`);
    assert.equal(viaProxy.json.ws_endpoint, 'ws://tunnel.example:8121/');
    assert.equal(a.json.pty_ws_url, `ws://127.0.0.1:8122/api/v1/sessions/${a.json.session_id}/pty`);
    const c = await inject(s.router, {
      method: 'POST',
      url: '/api/v1/agents/agent-1/sessions',
      body: { command: 'top' },
      headers: { 'idempotency-key': 'key-1' },
    });
    assert.equal(c.status, 409);
    assert.equal((c.json() as { error: { code: string } }).error.code, 'idempotency.key_conflict');
    assert.equal((await list(s)).length, 1);
    assert.equal([...port.running.values()].length, 1);
    await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${a.json.session_id}?signal=KILL` });
    s.store.close();
  });

  test('DELETE kills the whole process tree, verified, and the session ends for its clients', async () => {
    const s = startServer();
    const res = await create(s, { command: 'bash --norc --noprofile -i', session_name: 'doomed' });
    const hub = s.service.hub(res.json.session_id);
    assert.ok(hub);
    const ctl = attach(hub, { role: 'controller' });
    await h.waitSession('doomed');
    hub.input(ctl, enc("sleep 1001 & (trap '' TERM HUP; exec sleep 1002) & echo STARTED\r"));
    await untilSeen(ctl, 'the jobs to start', () => ctl.output().includes('STARTED\r\n'));
    const pane = parseTmuxPanes((await h.exec(tmuxListPanesArgv({ socket: h.socket }))).stdout).find((p) => p.name === 'doomed');
    assert.ok(pane);
    const pids = (await h.exec(['pgrep', '-s', String(pane.panePids[0])])).stdout.split('\n').filter(Boolean).map(Number);
    assert.ok(pids.length >= 3, `pids ${pids.join(',')}`);
    const del = await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${res.json.session_id}?signal=HUP` });
    assert.equal(del.status, 200);
    assert.deepEqual(del.json(), { killed: true });
    assert.deepEqual(pids.filter(alive), []);
    await h.waitSession('doomed', false);
    assert.equal(ctl.last('Closed')?.payload['reason'], 'killed');
    assert.equal(ctl.closeCode, 1000);
    assert.deepEqual(await list(s), []);
    assert.equal(s.killed.value, 1);
    assert.deepEqual(
      s.events.map((e) => e.event_type),
      ['agent.pty.created', 'agent.pty.closed'],
    );
    const again = await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${res.json.session_id}` });
    assert.equal(again.status, 404);
    assert.equal((again.json() as { error: { code: string } }).error.code, 'session.not_found');
    s.store.close();
  });

  test('bad input: unknown agent 404, backend 501, bad signal 400, disconnected agent 503 (session kept)', async () => {
    const s = startServer();
    const r404 = await inject(s.router, { method: 'POST', url: '/api/v1/agents/nobody/sessions', body: {} });
    assert.deepEqual([r404.status, (r404.json() as { error: { code: string } }).error.code], [404, 'agent.not_found']);
    assert.equal((await inject(s.router, { method: 'GET', url: '/api/v1/agents/nobody/sessions' })).status, 404);
    const r501 = await create(s, { session_backend: 'zellij' });
    assert.equal(r501.status, 501);
    const ok = await create(s, { command: 'sleep 600' });
    const r400 = await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${ok.json.session_id}?signal=USR1` });
    assert.equal(r400.status, 400);
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: false });
    s.service.agentDisconnected('agent-1');
    const r503 = await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${ok.json.session_id}` });
    assert.equal(r503.status, 503);
    assert.equal((await create(s, {})).status, 503);
    const entries = await list(s);
    assert.deepEqual(
      entries.map((e) => [e.session_id, e.state, e.liveness.agent_connected]),
      [[ok.json.session_id, 'detached', false]],
    );
    s.store.close();
  });

  test('restart of sandboxd: same session id listed, command still running, new output arrives; an unknown session is killed after the grace period, events in order', async () => {
    const s1 = startServer();
    const res = await create(s1, { command: 'i=0; while :; do echo tick-$i; i=$((i+1)); sleep 0.1; done', session_name: 'long' });
    const id = res.json.session_id;
    const hub1 = s1.service.hub(id);
    assert.ok(hub1);
    const obs1 = attach(hub1);
    await untilSeen(obs1, 'ticks before the restart', () => obs1.output().includes('tick-3'));
    const lastSeqBefore = Math.max(...obs1.sequences());

    // sandboxd goes away (the agent keeps running and buffers; here: output is dropped).
    port.sink = null;
    s1.store.close();
    // Meanwhile someone starts a session on the agent that sandboxd never knew.
    await port.startPty('agent-1', {
      commandId: 'cmd-stranger',
      sessionId: 'stranger',
      sessionName: 'stranger',
      argv: tmuxCreateArgv({ socket: h.socket, sessionName: 'stranger', command: 'sleep 1000', cols: 80, rows: 24 }),
      cols: 80,
      rows: 24,
      term: 'xterm-256color',
      timeoutSeconds: 0,
    });
    await h.waitSession('stranger');

    const s2 = startServer();
    const before = await list(s2);
    assert.deepEqual(
      before.map((e) => [e.session_id, e.state]),
      [[id, 'detached']],
    );
    s2.service.agentConnected('agent-1');
    s2.reconciler.agentRegistered('agent-1');
    await waitFor(
      'the reconciliation to finish',
      () => s2.events.some((e) => e.event_type === 'session.reconcile_complete' || e.event_type === 'session.reconcile_failed'),
      {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => `events ${JSON.stringify(s2.events.map((e) => e.event_type))}`,
      },
    );
    assert.deepEqual(
      s2.events.map((e) => e.event_type),
      [
        'session.query_sent',
        'session.report_received',
        'session.reconcile_started',
        'session.preserved',
        'session.killed',
        'session.reconcile_complete',
      ],
    );
    assert.equal(s2.events[3]?.details['session_id'], id);
    assert.equal(s2.events[4]?.details['session_id'], 'stranger');
    await h.waitSession('stranger', false);
    await h.waitSession('long');
    const after = await list(s2);
    assert.deepEqual(
      after.map((e) => [e.session_id, e.state, e.command_id]),
      [[id, 'running', res.json.command_id]],
    );
    const hub2 = s2.service.hub(id);
    assert.ok(hub2);
    // The new server keeps no replay from before its start: the old cursor is out of range, a keyframe follows.
    const obs2 = attach(hub2, { replayFrom: lastSeqBefore });
    await untilSeen(obs2, 'new ticks after the restart', () => /tick-\d+/.test(obs2.output()));
    assert.ok(
      obs2.all('Error').some((e) => e.payload['code'] === 'REPLAY_OUT_OF_RANGE'),
      obs2.describe(),
    );
    assert.ok(obs2.names().includes('Keyframe'));
    // The new hub never reuses a number of the old one, however much it has sent before the join.
    // (Frames outside the stream, such as the hello, carry sequence 0.)
    const numbered = obs2.sequences().filter((n) => n > 0);
    assert.ok(numbered.length > 0 && Math.min(...numbered) > lastSeqBefore, `sequences after the restart: ${numbered.slice(0, 5).join()}`);
    assert.ok(s2.killed.value >= 1);
    await inject(s2.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${id}?signal=KILL` });
    s2.store.close();
  });

  test('agent restart: the tmux session outlives the PTY client and is re-attached as a new generation; a vanished one closes', async () => {
    const s = startServer();
    const kept = await create(s, { command: 'i=0; while :; do echo beat-$i; i=$((i+1)); sleep 0.1; done', session_name: 'survivor' });
    const lost = await create(s, { command: 'sleep 1000', session_name: 'victim2' });
    await h.waitSession('survivor');
    await h.waitSession('victim2');
    port.crashAgent();
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: false });
    s.service.agentDisconnected('agent-1');
    await h.tmux('kill-session', '-t', '=victim2');
    assert.deepEqual(
      (await list(s)).map((e) => e.state),
      ['detached', 'detached'],
    );
    agents.set('agent-1', { agentId: 'agent-1', instanceId: 'inst-1', connected: true });
    const keptHub = s.service.hub(kept.json.session_id);
    assert.ok(keptHub);
    const obs = attach(keptHub);
    s.service.agentConnected('agent-1');
    s.reconciler.agentRegistered('agent-1');
    const sessions = async (): Promise<string> => JSON.stringify((await list(s)).map((e) => [e.session_name, e.state, e.command_id]));
    await waitFor('output of generation 1 (the re-attached tmux client)', () => /beat-\d+/.test(obs.output()), {
      deadlineMs: DEADLINE_MS.process,
      wake: (recheck) => obs.onFrame(recheck),
      lastState: async () => `${obs.describe()}; sessions ${await sessions()}; events ${JSON.stringify(s.events.map((e) => e.event_type))}`,
    });
    await waitFor('the vanished session to close', async () => (await list(s)).length === 1, {
      deadlineMs: DEADLINE_MS.process,
      lastState: sessions,
    });
    const [entry] = await list(s);
    assert.equal(entry?.session_id, kept.json.session_id);
    assert.equal(entry?.state, 'running');
    assert.notEqual(entry?.command_id, kept.json.command_id);
    assert.ok(
      s.events.some(
        (e) =>
          e.event_type === 'agent.pty.closed' && e.details['session_id'] === lost.json.session_id && e.details['reason'] === 'not_found',
      ),
    );
    await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${kept.json.session_id}?signal=KILL` });
    s.store.close();
  });

  test('a session waiting at a prompt shows up as a HITL request; responding types the answer', async () => {
    const s = startServer();
    const res = await create(s, {
      command: 'printf "Proceed with deploy? [y/N] "; read a; echo "answer=$a"; sleep 600',
      session_name: 'asks',
    });
    const askHub = s.service.hub(res.json.session_id);
    assert.ok(askHub);
    const obs = attach(askHub);
    await waitFor('a HITL request', () => s.hitl.list().length === 1, { deadlineMs: DEADLINE_MS.process, lastState: () => obs.describe() });
    const req = s.hitl.list()[0];
    assert.equal(req?.kind, 'confirm');
    assert.equal(req?.prompt, 'Proceed with deploy? [y/N]');
    assert.deepEqual([req?.session_id, req?.agent_id, req?.command_id], [res.json.session_id, 'agent-1', res.json.command_id]);
    await s.hitl.respond(req?.id ?? '', 'y');
    await untilSeen(obs, 'the answer to reach the program', () => obs.output().includes('answer=y'));
    // A negative check: three settle periods (settleMs 100) in which the answered prompt must not come back.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(s.hitl.list(), [], 'answered: not raised again');
    s.hitl.stop();
    await inject(s.router, { method: 'DELETE', url: `/api/v1/agents/agent-1/sessions/${res.json.session_id}?signal=KILL` });
    s.store.close();
  });
});
