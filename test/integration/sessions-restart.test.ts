/**
 * Session reconciliation after a sandboxd restart, with a real agent and real tmux: the server
 * stops while a session runs a long command and starts again on the same state dir and gRPC
 * port; the agent reconnects by itself. The session is listed under the same id, its command
 * still runs and new output arrives; a tmux session the server never knew is killed after the
 * grace period; the session.* events come in order.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import {
  PtyClient,
  eventsOf,
  pidAlive,
  spawnSessionAgent,
  startSessionsServer,
  tmuxOn,
  waitForAgent,
  type AgentProc,
  type SessionsServer,
} from './sessions-harness.js';

const AGENT = 'sess-restart-1';
const servers: SessionsServer[] = [];
const clients: PtyClient[] = [];
let agent: AgentProc | undefined;
let dir = '';

after(async () => {
  for (const c of clients) c.ws.terminate();
  for (const s of servers) await s.stop();
  await agent?.kill();
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

interface Listed {
  session_id: string;
  state: string;
  liveness: { agent_connected: boolean };
}

async function listed(srv: SessionsServer): Promise<Listed[]> {
  const r = await srv.json<{ sessions: Listed[] }>('GET', `/api/v1/agents/${AGENT}/sessions`);
  return r.status === 200 ? r.body.sessions : [];
}

function lastTick(text: string): number {
  const all = [...text.matchAll(/tick-(\d+)/g)].map((m) => Number(m[1]));
  return all.length === 0 ? 0 : Math.max(...all);
}

test('after a restart the session is kept and still runs; an unknown tmux session is killed after the grace period', async () => {
  dir = await mkdtemp(join(tmpdir(), 'sandboxd-sessr-'));
  const first = await startSessionsServer(dir);
  servers.push(first);
  agent = await spawnSessionAgent(first, AGENT);
  await waitForAgent(first, agent, AGENT);

  const created = await first.json<{ session_id: string }>('POST', `/api/v1/agents/${AGENT}/sessions`, {
    session_name: 'long-run',
    command: 'i=0; while true; do i=$((i+1)); echo "tick-$i"; sleep 0.3; done',
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const sid = created.body.session_id;
  const before = await PtyClient.open(first.wsBase, sid);
  clients.push(before);
  await before.join('observer');
  await before.waitText(/tick-3/);
  const panePid = Number((await tmuxOn(agent, ['list-panes', '-t', '=long-run', '-F', '#{pane_pid}'])).stdout.trim());
  assert.ok(panePid > 0 && pidAlive(panePid));

  // A session the server never knew: made directly on the agent's tmux server.
  assert.equal((await tmuxOn(agent, ['new-session', '-d', '-s', 'rogue', 'sleep 10000'])).code, 0);
  const roguePid = Number((await tmuxOn(agent, ['list-panes', '-t', '=rogue', '-F', '#{pane_pid}'])).stdout.trim());
  assert.ok(roguePid > 0 && pidAlive(roguePid));

  const grpcPort = first.grpc;
  await first.stop();
  await before.waitClosed();
  const tickAtStop = lastTick(before.text());

  const second = await startSessionsServer(dir, grpcPort);
  servers.push(second);
  // Loaded from the store before the agent is back: listed, detached.
  assert.ok((await listed(second)).some((s) => s.session_id === sid));
  await waitForAgent(second, agent, AGENT);
  await waitFor(
    'the session to run again under the same id',
    async () => (await listed(second)).find((s) => s.session_id === sid && s.state === 'running'),
    {
      deadlineMs: DEADLINE_MS.agent,
      lastState: async () =>
        `sessions ${JSON.stringify(await listed(second))}; events ${JSON.stringify((await eventsOf(second, AGENT)).map((e) => e.event_type))}`,
    },
  );
  assert.ok(pidAlive(panePid), 'the long command was not restarted');

  const afterRestart = await PtyClient.open(second.wsBase, sid);
  clients.push(afterRestart);
  await afterRestart.join('observer');
  await waitFor(
    `new output after the restart (a tick after tick-${tickAtStop + 2})`,
    () => lastTick(afterRestart.text()) > tickAtStop + 2,
    {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => afterRestart.describe(),
    },
  );

  const sessionEvents = async (): Promise<{ event_type: string; details: Record<string, unknown> }[]> =>
    (await eventsOf(second, AGENT)).filter((e) => e.event_type.startsWith('session.'));
  // What a timeout shows: the agent's tmux sessions and the reconciliation's events with their details.
  const tmuxSessions = async (): Promise<string> =>
    `sessions on the agent's tmux: ${JSON.stringify((await tmuxOn(agent!, ['list-sessions'])).stdout)}; session events ${JSON.stringify(
      (await sessionEvents()).map((e) => [e.event_type, e.details]),
    )}`;
  await waitFor('the unknown tmux session to be killed', async () => (await tmuxOn(agent!, ['has-session', '-t', '=rogue'])).code !== 0, {
    deadlineMs: DEADLINE_MS.agent,
    lastState: tmuxSessions,
  });
  await waitFor(`its process (pid ${roguePid}) to be gone`, () => !pidAlive(roguePid), { deadlineMs: DEADLINE_MS.process });
  assert.ok(pidAlive(panePid), 'the known session survived the reconciliation');

  const events = await waitFor(
    'the reconciliation to complete',
    async () => {
      const ev = await sessionEvents();
      return ev.some((e) => e.event_type === 'session.reconcile_complete' || e.event_type === 'session.reconcile_failed') ? ev : undefined;
    },
    { deadlineMs: DEADLINE_MS.agent, lastState: async () => `events ${JSON.stringify((await sessionEvents()).map((e) => e.event_type))}` },
  );
  const types = events.map((e) => e.event_type);
  const order = [
    'session.query_sent',
    'session.report_received',
    'session.reconcile_started',
    'session.preserved',
    'session.killed',
    'session.reconcile_complete',
  ];
  let at = -1;
  for (const t of order) {
    const i = types.indexOf(t, at + 1);
    assert.ok(i > at, `${t} after ${order[order.indexOf(t) - 1] ?? 'start'} in ${JSON.stringify(types)}`);
    at = i;
  }
  assert.equal(types.filter((t) => t === 'session.query_sent').length, 1, 'one query per connect');
  const preserved = events.filter((e) => e.event_type === 'session.preserved').map((e) => e.details['session_id']);
  assert.ok(preserved.includes(sid), `preserved ${JSON.stringify(preserved)}`);
  const killed = events.filter((e) => e.event_type === 'session.killed').map((e) => e.details['session_id']);
  assert.deepEqual(killed, ['tmux:rogue']);
});
