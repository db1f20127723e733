/**
 * ApiClient against a small node:http server on loopback: error envelopes, network failures,
 * timeouts, polling operations, and SSE streams that drop and resume.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ApiClient } from '../../../src/client/api-client.js';
import { ApiError, errorFromResponse } from '../../../src/client/api-error.js';
import type { EventRecord, Operation } from '../../../src/client/types.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let base = '';
const routes = new Map<string, Handler>();
const seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const path = (req.url ?? '').split('?')[0] ?? '';
      const h = routes.get(`${req.method} ${path}`);
      if (h === undefined) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { code: 'route.not_found', message: `no route ${path}` } }));
        return;
      }
      h(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
};

describe('ApiClient requests', () => {
  test('a v1 error envelope becomes ApiError with the status, code and message', async () => {
    routes.set('GET /api/v1/vms/agent-x', (_q, res) =>
      json(res, 404, { error: { code: 'VM_NOT_FOUND', message: "VM 'agent-x' not found" } }),
    );
    const api = new ApiClient({ baseUrl: base });
    await assert.rejects(api.getVm('agent-x'), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 404);
      assert.equal(err.code, 'VM_NOT_FOUND');
      assert.equal(err.message, "VM 'agent-x' not found");
      return true;
    });
  });

  test('a body that is not an envelope falls back to the status text; Retry-After is kept', () => {
    const e = errorFromResponse(503, '', '<html>down</html>', '7');
    assert.equal(e.code, 'http_503');
    assert.match(e.message, /Service Unavailable/);
    assert.equal(e.retryAfterSeconds, 7);
    assert.equal(e.retryable, true);
    assert.equal(errorFromResponse(502, 'Bad Gateway', 'upstream died', null).message, 'Bad Gateway: upstream died');
  });

  test('sends JSON bodies, query parameters and the Idempotency-Key header', async () => {
    routes.set('DELETE /api/v1/vms/agent-a', (_q, res) => json(res, 200, { deleted: true, name: 'agent-a', disk_deleted: true }));
    routes.set('POST /api/v1/agents/a1/sessions', (_q, res) => json(res, 200, { session_id: 's1' }));
    const api = new ApiClient({ baseUrl: `${base}/` });
    const del = await api.deleteVm('agent-a', { force: true, deleteDisk: true });
    assert.equal(del.disk_deleted, true);
    assert.equal(seen.at(-1)?.url, '/api/v1/vms/agent-a?force=true&delete_disk=true');
    await api.createSession('a1', { command: 'top' }, { idempotencyKey: 'k-1' });
    const last = seen.at(-1);
    assert.equal(last?.headers['idempotency-key'], 'k-1');
    assert.equal(last?.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(last?.body ?? ''), { command: 'top' });
  });

  test('readyz resolves with the body of a 503', async () => {
    routes.set('GET /readyz', (_q, res) => json(res, 503, { ready: false, reason: 'starting: grpc' }));
    assert.deepEqual(await new ApiClient({ baseUrl: base }).readyz(), { ready: false, reason: 'starting: grpc' });
  });

  test('an unreachable server is ApiError network (status 0)', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await assert.rejects(new ApiClient({ baseUrl: `http://127.0.0.1:${port}` }).healthz(), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 0);
      assert.equal(err.code, 'network');
      assert.match(err.message, /cannot reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
      return true;
    });
  });

  test('a server that does not answer in time is ApiError timeout', async () => {
    routes.set('GET /healthz', () => undefined);
    await assert.rejects(
      new ApiClient({ baseUrl: base, timeoutMs: 200 }).healthz(),
      (err: unknown) => err instanceof ApiError && err.code === 'timeout',
    );
  });

  test('waitForOperation polls until completed and reports each change', async () => {
    let polls = 0;
    routes.set('GET /api/v1/operations/op-1', (_q, res) => {
      polls++;
      const op: Operation = {
        id: 'op-1',
        type: 'vm_create',
        status: polls < 3 ? 'running' : 'completed',
        target: 'agent-a',
        created_at: new Date().toISOString(),
        progress_percent: Math.min(100, polls * 40),
      };
      if (polls === 2) {
        json(res, 503, { error: { code: 'server.unavailable', message: 'blip' } });
        return;
      }
      json(res, 200, op);
    });
    const seenProgress: number[] = [];
    const op = await new ApiClient({ baseUrl: base }).waitForOperation('op-1', {
      pollMs: 20,
      onProgress: (o) => seenProgress.push(o.progress_percent),
    });
    assert.equal(op.status, 'completed');
    assert.deepEqual(seenProgress, [40, 100]);
  });
});

describe('ApiClient streams', () => {
  test('tailEvents resumes after a dropped connection from the last event id (since)', async () => {
    const record = (id: number): EventRecord => ({
      id,
      event_type: 'vm.started',
      vm_name: 'agent-a',
      timestamp: new Date().toISOString(),
      details: {},
      agent_id: '',
      trace_id: null,
    });
    let connections = 0;
    routes.set('GET /api/v1/events', (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.searchParams.get('follow') !== 'true') {
        // The resume check before reconnecting: the server still knows event 2.
        json(res, 200, { events: [], total_count: 0, last_event_id: 2 });
        return;
      }
      connections++;
      assert.equal(url.searchParams.get('event_type'), 'vm.*');
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const since = Number(url.searchParams.get('since') ?? '0');
      res.write('retry: 50\n: hello\n\n');
      if (connections === 1) {
        assert.equal(url.searchParams.get('since'), null);
        res.write(`id: 1\nevent: event\ndata: ${JSON.stringify(record(1))}\n\n`);
        res.write(`id: 2\nevent: event\ndata: ${JSON.stringify(record(2))}\n\n`);
        res.end();
      } else {
        assert.equal(since, 2);
        assert.equal(req.headers['last-event-id'], '2');
        res.write(`id: 3\nevent: event\ndata: ${JSON.stringify(record(3))}\n\n`);
      }
    });
    const ac = new AbortController();
    const ids: number[] = [];
    let reconnects = 0;
    for await (const e of new ApiClient({ baseUrl: base }).tailEvents(
      { event_type: 'vm.*' },
      { signal: ac.signal, onReconnect: () => reconnects++ },
    )) {
      ids.push(e.id);
      if (ids.length === 3) ac.abort();
    }
    assert.deepEqual(ids, [1, 2, 3]);
    assert.equal(reconnects, 1);
  });

  test('tailEvents starts over when the server restarted and its event ids began again', async () => {
    const record = (id: number): EventRecord => ({
      id,
      event_type: 'vm.started',
      vm_name: 'agent-a',
      timestamp: new Date().toISOString(),
      details: {},
      agent_id: '',
      trace_id: null,
    });
    let connections = 0;
    const sinceSeen: (string | null)[] = [];
    routes.set('GET /api/v1/events', (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.searchParams.get('follow') !== 'true') {
        json(res, 200, { events: [], total_count: 1, last_event_id: 1 });
        return;
      }
      connections++;
      sinceSeen.push(url.searchParams.get('since'));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('retry: 20\n\n');
      if (connections === 1) {
        res.write(`id: 40\nevent: event\ndata: ${JSON.stringify(record(40))}\n\n`);
        res.end();
      } else {
        res.write(`id: 1\nevent: event\ndata: ${JSON.stringify(record(1))}\n\n`);
      }
    });
    const ac = new AbortController();
    const ids: number[] = [];
    for await (const e of new ApiClient({ baseUrl: base }).tailEvents({}, { signal: ac.signal })) {
      ids.push(e.id);
      if (ids.length === 2) ac.abort();
    }
    assert.deepEqual(ids, [40, 1]);
    assert.deepEqual(sinceSeen, [null, '0']);
  });

  test('a 4xx on open rejects with ApiError instead of retrying', async () => {
    routes.set('GET /api/v1/tasks/task-x/logs', (_q, res) =>
      json(res, 404, { error: { code: 'task.not_found', message: 'no task task-x' } }),
    );
    const it = new ApiClient({ baseUrl: base }).taskLogs('task-x');
    await assert.rejects(it.next(), (err: unknown) => err instanceof ApiError && err.code === 'task.not_found');
  });

  test('taskLogs yields typed events and ends after completed', async () => {
    routes.set('GET /api/v1/tasks/task-1/logs', (_q, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      res.write('id: 1\nevent: stdout\ndata: hello\ndata: \n\n');
      res.write('id: 2\nevent: event\ndata: {"tool":"Edit"}\n\n');
      res.write('id: 3\nevent: completed\ndata: 0\n\n');
      // The stream stays open: the client must stop by itself.
    });
    const got = [];
    for await (const ev of new ApiClient({ baseUrl: base }).taskLogs('task-1')) got.push(ev);
    assert.deepEqual(got, [
      { type: 'stdout', text: 'hello\n', id: '1' },
      { type: 'event', data: { tool: 'Edit' }, id: '2' },
      { type: 'completed', exitCode: 0, id: '3' },
    ]);
  });

  test('agentOutput decodes chunks and errors, and resumes with Last-Event-ID without replaying again', async () => {
    const chunk = (text: string): string =>
      JSON.stringify({
        schema: 'svc.agent_output.v1',
        event_type: 'agent_output',
        agent_id: 'a1',
        command_id: 'c1',
        stream: 'stdout',
        timestamp_ms: 1,
        data_base64: btoa(text),
        text,
      });
    const queries: string[] = [];
    routes.set('GET /api/v1/agent-output/stream', (req, res) => {
      queries.push(`${new URL(req.url ?? '', base).search} ${String(req.headers['last-event-id'])}`);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('retry: 20\n\n');
      if (queries.length === 1) {
        res.write(`id: 9-1\nevent: agent_output.replay\ndata: ${chunk('old')}\n\n`);
        res.end(`id: 9-2\nevent: agent_output\ndata: ${chunk('new')}\n\n`);
      } else {
        res.write(
          `event: agent_output.error\ndata: {"schema":"svc.agent_output.v1","event_type":"agent_output.error","code":"stream_end","message":"done","reason":"command_finished"}\n\n`,
        );
      }
    });
    const ac = new AbortController();
    const got: string[] = [];
    for await (const ev of new ApiClient({ baseUrl: base }).agentOutput(
      { command_id: 'c1', replay: true, limit: 10 },
      { signal: ac.signal },
    )) {
      got.push(ev.type === 'agent_output.error' ? `error ${ev.error.code}` : `${ev.type} ${ev.id ?? ''} ${ev.chunk.text}`);
      if (ev.type === 'agent_output.error') ac.abort();
    }
    assert.deepEqual(got, ['agent_output.replay 9-1 old', 'agent_output 9-2 new', 'error stream_end']);
    assert.deepEqual(queries, ['?command_id=c1&replay=true&limit=10 undefined', '?command_id=c1&limit=10 9-2']);
  });
});
