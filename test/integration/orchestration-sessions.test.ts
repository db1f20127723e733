/**
 * The orchestration link on a server with real sessions (a sandbox-agent process over mTLS gRPC,
 * real tmux; sessions-harness.ts): the aiwg bridge's session_count follows the session registry
 * (1 while a session lives, 0 after DELETE), and the loopback orchestration server receives every
 * event the server recorded during that flow (agent connected and registered, PTY created and
 * closed, …), exactly the store's list, in id order.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { orchestrationComponent } from '../../src/orchestration/component.js';
import type { BridgeStatus } from '../../src/wire/aiwg.js';
import type { EventPage } from '../../src/wire/events.js';
import { serverPort } from '../support/ports.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { OrchTestServer } from './orchestration-harness.js';
import { spawnSessionAgent, startSessionsServer, waitForAgent, type AgentProc, type SessionsServer } from './sessions-harness.js';

const AGENT = 'agent-orch-sessions';

void describe('orchestration link with real sessions', { timeout: 240_000 }, () => {
  let dir = '';
  let orch: OrchTestServer | undefined;
  let srv: SessionsServer | undefined;
  let agent: AgentProc | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-orch-sessions-'));
    orch = new OrchTestServer(await serverPort());
    await orch.start();
    srv = await startSessionsServer(dir, 0, 2, {
      env: { ORCH_SERVE_ENDPOINT: `ws://127.0.0.1:${orch.port}/orch`, SVC_ORCH_BACKOFF_INITIAL_MS: '50', SVC_ORCH_BACKOFF_MAX_MS: '400' },
      components: [orchestrationComponent()],
    });
    agent = await spawnSessionAgent(srv, AGENT);
    await waitForAgent(srv, agent, AGENT);
  });
  after(async () => {
    await srv?.stop();
    await agent?.kill();
    await orch?.stop();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  void test('session_count follows the registry; the server gets every event of the flow in order', async () => {
    const s = srv!;
    const o = orch!;
    const bridge = async (): Promise<BridgeStatus> => (await s.json<BridgeStatus>('GET', '/api/v1/aiwg/status')).body;
    assert.equal((await bridge()).session_count, 0);

    const created = await s.json<{ session_id: string }>('POST', `/api/v1/agents/${AGENT}/sessions`, {
      session_name: 'orch-flow',
      command: 'sleep 1000',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    let last: BridgeStatus | undefined;
    await waitFor('session_count 1', async () => (last = await bridge()).session_count === 1, {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => JSON.stringify(last),
    });
    assert.equal(last?.connected, true);

    const del = await s.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${created.body.session_id}?signal=TERM`);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    await waitFor('session_count 0', async () => (last = await bridge()).session_count === 0, {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => JSON.stringify(last),
    });

    // Every event the store holds reached the orchestration server, in id order, nothing else.
    const storeIds = async (): Promise<number[]> =>
      (await s.json<EventPage>('GET', '/api/v1/events?limit=5000')).body.events.map((e) => e.id);
    const sentIds = (): number[] => o.all().flatMap((m) => (m.type === 'event' ? [m['seq'] as number] : []));
    let want: number[] = [];
    await waitFor(
      'the events of the store at the orchestration server',
      async () => {
        want = await storeIds();
        return JSON.stringify(sentIds()) === JSON.stringify(want);
      },
      { deadlineMs: DEADLINE_MS.local, lastState: () => `store ${JSON.stringify(want)}, sent ${JSON.stringify(sentIds())}` },
    );
    const types = o.all().flatMap((m) => (m.type === 'event' ? [(m['event'] as { event_type: string }).event_type] : []));
    for (const t of ['agent.connected', 'agent.pty.created', 'agent.pty.closed'])
      assert.ok(types.includes(t), `${t} in ${JSON.stringify(types)}`);
    assert.ok(types.indexOf('agent.pty.created') < types.lastIndexOf('agent.pty.closed'), 'created before closed');
    assert.equal(o.all().filter((m) => m.type === 'gap').length, 0);
    assert.deepEqual(o.invalid, []);
  });
});
