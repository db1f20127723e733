/**
 * Interactive sessions end to end with the real parts: the agents server and the sessions
 * component wired as in src/main.ts, a real sandbox-agent over mTLS gRPC, real tmux, pty-ws.v1
 * over real WebSockets. Roles, input, resize, idempotent create, verified kill, bad input, a
 * client that stops reading.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import {
  PtyClient,
  pidAlive,
  spawnSessionAgent,
  startSessionsServer,
  tmuxOn,
  waitForAgent,
  type AgentProc,
  type SessionsServer,
} from './sessions-harness.js';

const AGENT = 'sess-live-1';
let dir = '';
let srv: SessionsServer;
let agent: AgentProc;
const clients: PtyClient[] = [];

interface Created {
  session_id: string;
  session_name: string;
  agent_id: string;
}

async function open(sessionId: string): Promise<PtyClient> {
  const c = await PtyClient.open(srv.wsBase, sessionId);
  clients.push(c);
  return c;
}

async function create(body: Record<string, unknown>, key?: string): Promise<{ status: number; body: Created & Record<string, unknown> }> {
  return await srv.json<Created & Record<string, unknown>>(
    'POST',
    `/api/v1/agents/${AGENT}/sessions`,
    body,
    key === undefined ? {} : { 'idempotency-key': key },
  );
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sandboxd-sess-'));
  srv = await startSessionsServer(dir);
  agent = await spawnSessionAgent(srv, AGENT);
  await waitForAgent(srv, agent, AGENT);
});

after(async () => {
  for (const c of clients) c.ws.terminate();
  await srv?.stop();
  await agent?.kill();
  await rm(dir, { recursive: true, force: true });
});

void describe('sessions with a real agent and real tmux', () => {
  test('controller types, observer reads; a second controller is downgraded; observer input is refused; resize reaches the PTY', async () => {
    const r = await create({ session_name: 'live-one' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const sid = r.body.session_id;
    const ctl = await open(sid);
    const hello = await ctl.next('binding_hello');
    assert.equal(hello['binding'], 'pty-ws.v1');
    assert.equal((await ctl.join('controller'))['role'], 'controller');
    const obs = await open(sid);
    assert.equal((await obs.join('observer'))['role'], 'observer');
    const second = await open(sid);
    const granted = await second.join('controller');
    assert.equal(granted['role'], 'observer', 'a second controller is downgraded');
    assert.equal(granted['requested_role'], 'controller');

    await ctl.waitForShell();
    ctl.type('echo "hello-$((6*7))"\r');
    await obs.waitText(/hello-42/);

    obs.type('echo "observer-typed-$((5*5))"\r');
    const err = await obs.next('error');
    assert.equal(err['code'], 'input_not_permitted');
    ctl.type('echo "after-$((2*2))"\r');
    await obs.waitText(/after-4/);
    assert.doesNotMatch(obs.text(), /observer-typed-25/, 'observer input never reached the PTY');

    ctl.send({ op: 'pty.session_resize', cols: 101, rows: 31 });
    await ctl.next('pty.resize');
    // The frame says the hub resized; the pane follows asynchronously (PTY → tmux client → tmux server).
    await ctl.askUntil('stty size\r', /31 101/, 'stty size to show the new size 31 101');
  });

  test('an idempotent retry returns the same session; a different body with the key conflicts', async () => {
    const a = await create({ session_name: 'idem-one' }, 'key-1');
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const b = await create({ session_name: 'idem-one' }, 'key-1');
    assert.equal(b.status, 200);
    assert.equal(b.body.session_id, a.body.session_id);
    const c = await create({ session_name: 'idem-two' }, 'key-1');
    assert.equal(c.status, 409);
    assert.equal((c.body as unknown as { error: { code: string } }).error.code, 'idempotency.key_conflict');
    const list = await srv.json<{ sessions: { session_id: string }[] }>('GET', `/api/v1/agents/${AGENT}/sessions`);
    assert.equal(list.body.sessions.filter((s) => s.session_id === a.body.session_id).length, 1);
  });

  test('DELETE kills the whole process tree, verified', async () => {
    const r = await create({ session_name: 'kill-me', command: 'sleep 1000 & sleep 1001 & wait' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const panes = await waitFor(
      'the tmux session kill-me',
      async () => {
        const l = await tmuxOn(agent, ['list-panes', '-t', '=kill-me', '-F', '#{pane_pid}']);
        return l.code === 0 && l.stdout.trim() !== '' ? l.stdout.trim().split('\n').map(Number) : undefined;
      },
      {
        deadlineMs: DEADLINE_MS.process,
        lastState: async () => `sessions on the agent's tmux: ${JSON.stringify((await tmuxOn(agent, ['list-sessions'])).stdout)}`,
      },
    );
    let pids: number[] = [];
    const tree = await waitFor(
      "the shell and both sleeps in the pane's session",
      async () => {
        const { execFileSync } = await import('node:child_process');
        pids = panes.flatMap((p) =>
          execFileSync('pgrep', ['-s', String(p)], { encoding: 'utf8' })
            .trim()
            .split('\n')
            .filter((x) => x !== '')
            .map(Number),
        );
        return pids.length >= 3 ? pids : undefined;
      },
      { deadlineMs: DEADLINE_MS.process, lastState: () => `pids ${JSON.stringify(pids)}` },
    );
    const del = await srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${r.body.session_id}?signal=TERM`);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.deepEqual(del.body, { killed: true });
    for (const pid of tree) assert.equal(pidAlive(pid), false, `pid ${pid} is gone`);
    assert.notEqual((await tmuxOn(agent, ['has-session', '-t', '=kill-me'])).code, 0);
    const list = await srv.json<{ sessions: { session_id: string }[] }>('GET', `/api/v1/agents/${AGENT}/sessions`);
    assert.equal(
      list.body.sessions.some((s) => s.session_id === r.body.session_id),
      false,
    );
  });

  test('unknown agent and session ids are 404 envelopes; a malformed frame closes that client only', async () => {
    const noAgent = await srv.json<{ error: { code: string } }>('GET', '/api/v1/agents/nobody/sessions');
    assert.equal(noAgent.status, 404);
    assert.equal(noAgent.body.error.code, 'agent.not_found');
    const noSession = await srv.json<{ error: { code: string } }>(
      'DELETE',
      `/api/v1/agents/${AGENT}/sessions/00000000-0000-0000-0000-000000000000`,
    );
    assert.equal(noSession.status, 404);
    assert.equal(noSession.body.error.code, 'session.not_found');
    assert.equal(await PtyClient.refusedStatus(`${srv.wsBase}/api/v1/sessions/nope/pty`), 404);

    const r = await create({ session_name: 'bad-frames' });
    assert.equal(r.status, 200);
    const good = await open(r.body.session_id);
    await good.join('controller');
    const bad = await open(r.body.session_id);
    await bad.join('observer');
    bad.ws.send('{not json');
    assert.equal(await bad.waitClosed(), 4400);
    await good.waitForShell();
    good.type('echo "still-$((3*3))"\r');
    await good.waitText(/still-9/);
  });

  test('a client that stops reading is dropped; the other viewers get everything', async () => {
    const r = await create({ session_name: 'slow-one' });
    assert.equal(r.status, 200);
    const ctl = await open(r.body.session_id);
    await ctl.join('controller');
    const slow = await open(r.body.session_id);
    await slow.join('observer');
    await ctl.waitForShell();
    slow.ws.pause();
    // A big terminal makes tmux send big redraws: megabytes reach the clients in seconds.
    ctl.send({ op: 'pty.session_resize', cols: 400, rows: 200 });
    await ctl.next('pty.resize');
    ctl.type('yes "$(printf %0390d 0)" | head -n 600000; echo "done-$((7*8))"\r');
    // Dropped while the output still runs (membership loses it), and the controller saw it all.
    const membership = async (): Promise<unknown> =>
      (
        await srv.json<{ sessions: { session_id: string; membership: { attachment_count: number } }[] }>(
          'GET',
          `/api/v1/agents/${AGENT}/sessions`,
        )
      ).body.sessions.find((s) => s.session_id === r.body.session_id)?.membership;
    await waitFor(
      'the stalled client to be dropped (one attachment left)',
      async () => ((await membership()) as { attachment_count?: number } | undefined)?.attachment_count === 1,
      {
        deadlineMs: DEADLINE_MS.endToEnd,
        intervalMs: 100,
        lastState: async () => `membership ${JSON.stringify(await membership())}; controller ${ctl.describe()}`,
      },
    );
    await ctl.waitText(/done-56/, DEADLINE_MS.endToEnd);
    slow.ws.resume();
    // 4413 when the close frame still fits behind the queued bytes; a stalled socket may only
    // see the connection end (1006).
    assert.ok([4413, 1006].includes(await slow.waitClosed()));
  });
});
