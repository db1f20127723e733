/**
 * The MCP routes without sockets (inject and a memory SSE sink): the SDK's streamable HTTP transport
 * on the handler contract, the refusal on the trusted local listener, JSON-RPC errors for bad
 * bodies, the SSE pump's pacing, and discovery when the admin listener is off.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import { SvcError } from '../../../src/core/errors.js';
import { inject, MemorySseSink, type InjectResponse } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import type { RequestPeer } from '../../../src/http/types.js';
import { buildDiscovery } from '../../../src/mcp/discovery.js';
import { InFlight } from '../../../src/mcp/in-flight.js';
import { registerMcpRoutes } from '../../../src/mcp/routes.js';
import type { McpServerDeps } from '../../../src/mcp/server.js';
import { fleetTools } from '../../../src/mcp/tools.js';
import type { Agent } from '../../../src/wire/agents.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

const TD = 'sandboxd.test';
const AGENTS: Agent[] = [
  { id: 'agent-a', hostname: 'a', ip_address: '10.0.0.1', status: 'Ready', connected_at: 1, last_heartbeat: 2 },
  { id: 'agent-b', hostname: 'b', ip_address: '10.0.0.2', status: 'Disconnected', connected_at: 1, last_heartbeat: 2 },
];
const unused = (): never => {
  throw new SvcError('server.unavailable', 'not in this test');
};

function deps(): McpServerDeps {
  const tools = fleetTools({
    agents: { list: () => AGENTS, get: (id) => AGENTS.find((a) => a.id === id) },
    vms: { list: () => Promise.resolve({ vms: [], total: 0 }), create: unused, waitForOperation: unused, getOperation: () => null },
    commands: { start: unused },
    tasks: { get: unused, taskLog: unused },
    execDefaultTimeoutSeconds: 60,
    directRuntimeSsh: false,
  });
  return { tools, resources: [], logger: pino({ level: 'silent' }) };
}

function router(): Router {
  const r = new Router();
  const server = deps();
  registerMcpRoutes(r, {
    identity: new OperatorIdentity({
      trustDomain: TD,
      localRole: 'admin',
      roles: () => ({ ok: true, roles: new Map([['alice', 'admin']]) }),
    }),
    server,
    inFlight: new InFlight(),
    discovery: () => buildDiscovery(server, { trustDomain: TD, adminAddress: null }),
  });
  return r;
}

const peer = (name: string): RequestPeer => ({
  transport: 'mtls',
  spiffeId: `spiffe://${TD}/operator/${name}`,
  fingerprint256: `FP:${name}`,
});
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};

/** Drives an SSE answer to its end; the JSON-RPC messages it carried. */
async function messages(res: InjectResponse, sink = new MemorySseSink()): Promise<Record<string, unknown>[]> {
  assert.ok(res.sse, `not an SSE answer: ${res.status} ${res.text}`);
  await res.sse.start(sink, res.sse.view);
  await new Promise<void>((resolve) => sink.onClose(resolve));
  return sink.frames
    .join('')
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
}

void describe('MCP routes', () => {
  void test('the trusted local listener is refused with identity.operator_required, naming the admin listener', async () => {
    const res = await inject(router(), { method: 'POST', url: '/api/v2/admin/mcp', headers: HEADERS, body: INITIALIZE });
    assert.equal(res.status, 403);
    const { error } = res.json() as { error: { code: string; message: string } };
    assert.equal(error.code, 'identity.operator_required');
    assert.match(error.message, /admin listener/);
  });

  void test('an operator initializes over SSE; a viewer (not in the roles table) lists agents through the tool', async () => {
    const r = router();
    const init = await messages(
      await inject(r, { method: 'POST', url: '/api/v2/admin/mcp', headers: HEADERS, body: INITIALIZE, peer: peer('alice') }),
    );
    const result = init[0]?.['result'] as { serverInfo: { name: string }; protocolVersion: string };
    assert.equal(result.serverInfo.name, 'sandboxd');
    assert.equal(result.protocolVersion, '2025-06-18');
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_agents', arguments: { status: 'Ready' } } };
    const res = await messages(
      await inject(r, {
        method: 'POST',
        url: '/api/v2/admin/mcp',
        headers: { ...HEADERS, 'mcp-protocol-version': '2025-06-18' },
        body: call,
        peer: peer('vera'),
      }),
    );
    const out = res[0]?.['result'] as { structuredContent: { agents: Agent[]; total: number } };
    assert.deepEqual(out.structuredContent, { agents: [AGENTS[0]], total: 1 });
  });

  void test('bad bodies get JSON-RPC errors with a 4xx; notifications get 202; GET is 405', async () => {
    const r = router();
    const bad = await inject(r, { method: 'POST', url: '/api/v2/admin/mcp', headers: HEADERS, body: '{not json', peer: peer('alice') });
    assert.equal(bad.status, 400);
    assert.equal((bad.json() as { error: { code: number } }).error.code, -32700);
    const noAccept = await inject(r, {
      method: 'POST',
      url: '/api/v2/admin/mcp',
      headers: { 'content-type': 'application/json' },
      body: INITIALIZE,
      peer: peer('alice'),
    });
    assert.equal(noAccept.status, 406);
    const note = await inject(r, {
      method: 'POST',
      url: '/api/v2/admin/mcp',
      headers: HEADERS,
      body: { jsonrpc: '2.0', method: 'notifications/initialized' },
      peer: peer('alice'),
    });
    assert.equal(note.status, 202);
    const get = await inject(r, { method: 'GET', url: '/api/v2/admin/mcp', peer: peer('alice') });
    assert.equal(get.status, 405);
    assert.equal(get.headers['allow'], 'POST');
  });

  void test('the SSE pump waits while the client is backpressured and ends the stream once it drained', async () => {
    const res = await inject(router(), {
      method: 'POST',
      url: '/api/v2/admin/mcp',
      headers: HEADERS,
      body: INITIALIZE,
      peer: peer('alice'),
    });
    const sink = new MemorySseSink();
    sink.setBackpressure(true);
    assert.ok(res.sse);
    const pumping = res.sse.start(sink, res.sse.view);
    await waitFor('the first frame', () => sink.frames.length === 1, { deadlineMs: DEADLINE_MS.local });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(sink.frames.length, 1, 'one frame written, then it waits');
    assert.equal(sink.closed, false);
    sink.setBackpressure(false);
    await pumping;
    assert.equal(sink.closed, true);
  });

  void test('discovery says the endpoint is unavailable when the admin listener is off', async () => {
    const res = await inject(router(), { method: 'GET', url: '/api/v2/admin/mcp/discovery' });
    assert.equal(res.status, 200);
    const d = res.json() as { available: boolean; reason: string; endpoint: { url: string | null }; tools: { name: string }[] };
    assert.equal(d.available, false);
    assert.match(d.reason, /SVC_ADMIN_ADDR=off/);
    assert.equal(d.endpoint.url, null);
    assert.equal(d.tools.length, 5);
  });
});
