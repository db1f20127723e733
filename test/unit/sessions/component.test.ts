import { MemoryBindingStore } from '../../../src/idempotency/binding-store.js';
import { Idempotency } from '../../../src/idempotency/idempotency.js';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import type { SessionAgentPort } from '../../../src/sessions/agent-port.js';
import type { SessionEvent } from '../../../src/sessions/reconcile.js';
import { createSessions } from '../../../src/sessions/component.js';

test('createSessions wires routes, WS routes and reconciliation on a durable store; stop is idempotent', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-comp-'));
  const sent: string[] = [];
  const events: SessionEvent[] = [];
  const started: string[] = [];
  const port: SessionAgentPort = {
    startPty: (_a, req) => {
      started.push(req.argv.join(' '));
      return Promise.resolve();
    },
    writeStdin: () => true,
    resizePty: () => true,
    runCommand: () => Promise.resolve({ exitCode: 0, output: '' }),
  };
  const counter = { inc: () => undefined };
  const make = () =>
    createSessions({
      stateDir: join(dir, 'sessions'),
      idempotency: new Idempotency({ store: new MemoryBindingStore() }),
      agents: {
        get: (id) => (id === 'a1' ? { agentId: 'a1', instanceId: 'i1', connected: true } : undefined),
        byInstance: (id) => (id === 'i1' ? { agentId: 'a1', instanceId: 'i1', connected: true } : undefined),
      },
      port,
      transport: {
        sendSessionQuery: (a) => sent.push(`query ${a}`),
        sendSessionReconcile: (a, m) => sent.push(`reconcile ${a} kill=${m.killSessionIds.join(',')}`),
      },
      urls: () => ({ httpBaseUrl: 'http://127.0.0.1:8122', wsBaseUrl: 'ws://127.0.0.1:8121' }),
      emit: (e) => events.push(e),
      metrics: { sessionReconciliationsTotal: counter, sessionsKilledTotal: counter },
      logger: { warn: () => undefined, info: () => undefined },
    });
  try {
    const s = make();
    const router = new Router();
    s.registerRoutes(router);
    assert.deepEqual(
      s.wsRoutes.map((r) => r.path),
      ['/api/v1/sessions/:session_id/pty', '/agents/:instance_id/sessions/:session_id/attach', '/ws/sessions/:session_id/orchestrate'],
    );
    const created = await inject(router, { method: 'POST', url: '/api/v1/agents/a1/sessions', body: { command: 'vim' } });
    assert.equal(created.status, 200);
    const id = (created.json() as { session_id: string }).session_id;
    assert.match(
      started[0] ?? '',
      /^tmux -L sandboxd -f \/dev\/null start-server ; .* new-session -A -s terminal-[0-9a-f]{8} -x 80 -y 24 -- \/bin\/sh -c vim sandboxd-session$/,
    );
    assert.deepEqual((await inject(router, { method: 'GET', url: '/api/v1/hitl' })).json(), { requests: [] });
    await s.stop();
    await s.stop();

    const again = make();
    assert.equal(again.registry.get(id)?.state, 'detached');
    again.agentConnected('a1');
    assert.ok(
      again.reconciler.reportReceived('a1', {
        sessions: [
          { sessionId: id, commandId: again.registry.get(id)?.commandId ?? '' },
          { sessionId: 'other', commandId: 'x' },
        ],
      }),
    );
    assert.deepEqual(sent, ['query a1', 'reconcile a1 kill=other']);
    assert.equal(again.registry.get(id)?.state, 'running');
    again.agentDisconnected('a1');
    assert.equal(again.registry.get(id)?.state, 'detached');
    assert.equal(events.at(-1)?.event_type, 'session.reconcile_failed');
    await again.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
