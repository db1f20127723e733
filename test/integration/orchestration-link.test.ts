/**
 * The orchestration link (ORCH_SERVE_ENDPOINT) and the aiwg bridge over it, against a WebSocket
 * server this test starts on 127.0.0.1 (orchestration-harness.ts): registration arrives first;
 * every event of a scripted flow (events POSTed to /api/v1/events) arrives in order; the server
 * is stopped and started again on the same port and the link reconnects, registers again and
 * delivers what was queued during the outage; with a small queue the overflow arrives as one gap
 * record with the count before the newest events; a dead endpoint leaves the server answering,
 * counts failures in svc_orch_link_* and logs one line; GET /api/v1/aiwg/status tells
 * connected true/false as it is; POST /api/v1/aiwg/reconnect opens a new connection now; `sbx aiwg
 * status|reconnect` show and do the same.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import type { Component } from '../../src/component/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { orchestrationComponent } from '../../src/orchestration/component.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { serverRoutesComponent } from '../../src/server/server-routes.js';
import type { BridgeStatus } from '../../src/wire/aiwg.js';
import { serverPort } from '../support/ports.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { runSbx, type CliServer } from './cli-harness.js';
import { linkSchemas, OrchTestServer, type OrchMessage } from './orchestration-harness.js';

const components = (): Component[] => [eventsComponent(), serverRoutesComponent, httpComponent, orchestrationComponent()];
const checkStatus = linkSchemas().status;

interface Booted {
  server: ServerHandle;
  base: string;
  /** Log lines of the server (JSON), for the rate-limit check. */
  lines: Record<string, unknown>[];
}

async function boot(dir: string, env: Record<string, string>): Promise<Booted> {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const server = await startServer(loopbackConfig(dir, env), pino({ level: 'info' }, sink), { components: components() });
  return { server, base: `http://127.0.0.1:${server.ports.http}`, lines };
}

/** `sbx` against a booted server (a child process, its HOME under `dir`). */
function sbx(b: Booted, home: string, args: readonly string[]): ReturnType<typeof runSbx> {
  const srv: CliServer = { server: b.server, baseUrl: b.base, home, stop: () => Promise.resolve() };
  return runSbx(srv, args, { timeoutMs: DEADLINE_MS.process });
}

async function status(base: string): Promise<BridgeStatus> {
  const res = await fetch(`${base}/api/v1/aiwg/status`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as BridgeStatus;
  assert.equal(checkStatus(body), null, JSON.stringify(body));
  return body;
}

async function postEvent(base: string, n: number): Promise<void> {
  const res = await fetch(`${base}/api/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ event_type: 'vm.started', vm_name: `agent-flow-${n}`, details: { step: n } }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** One sample of a metric from GET /metrics (0 when absent). */
async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

const steps = (msgs: readonly OrchMessage[]): number[] =>
  msgs.filter((m) => m.type === 'event').map((m) => (m['event'] as { details: { step: number } }).details.step);

void describe('orchestration link', { timeout: 120_000 }, () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-orch-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  void test('registers, pushes every event in order, survives a restart of the server, and reconnects on request', async () => {
    const port = await serverPort();
    const orch = new OrchTestServer(port);
    await orch.start();
    const b = await boot(join(dir, 'flow'), {
      ORCH_SERVE_ENDPOINT: `ws://127.0.0.1:${port}/ws/sandbox/s-1?token=s3cret-token`,
      SVC_ORCH_BACKOFF_INITIAL_MS: '50',
      SVC_ORCH_BACKOFF_MAX_MS: '400',
    });
    try {
      const wait = <T>(what: string, check: () => T | undefined | false | null | Promise<T | undefined | false | null>): Promise<T> =>
        waitFor(what, check, {
          deadlineMs: DEADLINE_MS.local,
          wake: (cb) => orch.onChange(cb),
          lastState: () => JSON.stringify({ connections: orch.connections, invalid: orch.invalid }),
        });

      // Registration: the first message of the connection, on the path and query configured.
      const first = await wait('the first connection and its register message', () => orch.connections[0]?.messages[0]);
      assert.equal(orch.connections[0]?.url, '/ws/sandbox/s-1?token=s3cret-token');
      assert.equal(first.type, 'register');
      assert.equal(first['protocol'], 'sandboxd.orch-link/v1');
      assert.equal(first['connection'], 1);
      assert.equal(first['http_endpoint'], `http://127.0.0.1:${b.server.ports.http}`);
      const bootId = first['boot_id'];

      const up = await status(b.base);
      assert.equal(up.connected, true);
      assert.equal(up.configured, true);
      assert.equal(up.state, 'open');
      assert.equal(up.session_count, 0);
      assert.equal(up.last_event_secs, -1, 'no event went out yet');
      assert.equal(up.endpoint, `ws://127.0.0.1:${port}/ws/sandbox/s-1`, 'no query (the token) in the status');
      assert.equal(await metric(b.base, 'svc_orch_link_connected'), 1);
      const shown = await sbx(b, dir, ['aiwg', 'status', '--no-color']);
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, /connected:\s+yes/);
      assert.doesNotMatch(shown.stdout, /s3cret/);

      // A scripted flow: every event arrives, in order, ids increasing.
      for (let i = 1; i <= 5; i++) await postEvent(b.base, i);
      await wait('events 1-5', () => steps(orch.all()).length >= 5);
      assert.deepEqual(steps(orch.all()), [1, 2, 3, 4, 5]);
      const seqs = orch.all().flatMap((m) => (m.type === 'event' ? [m['seq'] as number] : []));
      assert.deepEqual(
        seqs,
        [...seqs].sort((x, y) => x - y),
      );
      const sent = await status(b.base);
      assert.ok(sent.last_event_secs >= 0 && sent.last_event_secs <= 5, `last_event_secs ${sent.last_event_secs}`);
      assert.equal(sent.events_sent, 5);

      // The orchestration server goes away: status says so, events queue up.
      await orch.stop();
      await waitFor('status connected false', async () => !(await status(b.base)).connected, { deadlineMs: DEADLINE_MS.local });
      for (let i = 6; i <= 8; i++) await postEvent(b.base, i);
      const down = await status(b.base);
      assert.equal(down.connected, false);
      assert.equal(down.queued, 3);
      assert.equal(await metric(b.base, 'svc_orch_link_connected'), 0);

      // Back on the same port: a new connection registers again, then the outage's events, then new ones.
      await orch.start();
      await wait('a second connection with events 6-8', () => steps(orch.connections[1]?.messages ?? []).length >= 3);
      const second = orch.connections[1]!.messages;
      assert.equal(second[0]?.type, 'register');
      assert.equal(second[0]?.['connection'], 2);
      assert.equal(second[0]?.['boot_id'], bootId, 'the same run of sandboxd');
      assert.deepEqual(steps(second), [6, 7, 8]);
      assert.equal(
        second.some((m) => m.type === 'gap'),
        false,
        'nothing was dropped',
      );
      assert.equal((await status(b.base)).connected, true);
      await postEvent(b.base, 9);
      await wait('event 9', () => steps(orch.all()).includes(9));
      assert.deepEqual(steps(orch.all()), [1, 2, 3, 4, 5, 6, 7, 8, 9]);

      // Reconnect on request: the open connection is dropped and a third one registers now.
      const reconnectsBefore = await metric(b.base, 'svc_orch_link_reconnects_total');
      const res = await fetch(`${b.base}/api/v1/aiwg/reconnect`, { method: 'POST' });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { ok: true });
      await wait('a third connection with its register message', () => orch.connections[2]?.messages[0]);
      assert.equal(orch.connections[2]!.messages[0]!.type, 'register');
      await wait('the second connection closed', () => orch.connections[1]!.closed);
      assert.equal(await metric(b.base, 'svc_orch_link_reconnects_total'), reconnectsBefore + 1);
      await postEvent(b.base, 10);
      await wait('event 10 on the third connection', () => steps(orch.connections[2]!.messages).includes(10));
      assert.deepEqual(steps(orch.all()), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      assert.deepEqual(orch.invalid, []);

      // sandboxd stopping closes the connection.
      await b.server.stop();
      await wait('the third connection closed by the stop', () => orch.connections[2]!.closed);
    } finally {
      await b.server.stop();
      await orch.stop();
    }
  });

  void test('a dead endpoint: the server answers, failures are counted, one log line; the overflow arrives as a counted gap', async () => {
    const port = await serverPort();
    const orch = new OrchTestServer(port); // not started: nothing listens on the port
    const b = await boot(join(dir, 'dead'), {
      ORCH_SERVE_ENDPOINT: `ws://127.0.0.1:${port}/orch`,
      SVC_ORCH_QUEUE_MAX_EVENTS: '3',
      SVC_ORCH_BACKOFF_INITIAL_MS: '20',
      SVC_ORCH_BACKOFF_MAX_MS: '100',
      SVC_ORCH_LOG_INTERVAL_SECONDS: '3600',
    });
    try {
      // Requests are answered while the link fails over and over.
      await waitFor('three failed connection attempts', async () => (await metric(b.base, 'svc_orch_link_connect_failures_total')) >= 3, {
        deadlineMs: DEADLINE_MS.local,
        intervalMs: 50,
      });
      for (let i = 1; i <= 10; i++) await postEvent(b.base, i);
      const down = await status(b.base);
      assert.equal(down.connected, false);
      assert.ok(['waiting', 'connecting'].includes(down.state), down.state);
      assert.equal(down.queued, 3);
      assert.equal(down.events_dropped, 7);
      assert.equal(await metric(b.base, 'svc_orch_link_events_dropped_total'), 7);
      assert.equal((await fetch(`${b.base}/healthz`)).status, 200);
      // Many failures, one line (the interval is an hour).
      await waitFor('more failures', async () => (await metric(b.base, 'svc_orch_link_connect_failures_total')) >= 6, {
        deadlineMs: DEADLINE_MS.local,
        intervalMs: 50,
      });
      const linkLines = b.lines.filter((l) => l['component'] === 'orchestration');
      assert.equal(linkLines.length, 1, JSON.stringify(linkLines));
      assert.equal(linkLines[0]?.['msg'], 'orchestration link: cannot reach the orchestration server');

      // The endpoint comes up: register, one gap with the count, then the three newest events.
      await orch.start();
      await waitFor('the queued events', () => steps(orch.all()).length >= 3, {
        deadlineMs: DEADLINE_MS.local,
        wake: (cb) => orch.onChange(cb),
        lastState: () => JSON.stringify(orch.connections),
      });
      const msgs = orch.connections[0]!.messages;
      assert.equal(msgs[0]?.type, 'register');
      assert.equal(msgs[0]?.['queued'], 3);
      assert.equal(msgs[0]?.['pending_gap'], 7);
      assert.deepEqual(msgs[1], { type: 'gap', dropped: 7, from_seq: 1, to_seq: 7 });
      assert.deepEqual(steps(msgs), [8, 9, 10]);
      assert.equal(await metric(b.base, 'svc_orch_link_gaps_sent_total'), 1);
      const up = await status(b.base);
      assert.equal(up.connected, true);
      // The line saying it is back goes out despite the interval.
      const back = b.lines.filter((l) => l['component'] === 'orchestration');
      assert.equal(back.at(-1)?.['msg'], 'orchestration link: registered');
      assert.deepEqual(orch.invalid, []);
    } finally {
      await b.server.stop();
      await orch.stop();
    }
  });

  void test('events recorded while the server started (before the link) are sent first', async () => {
    const port = await serverPort();
    const orch = new OrchTestServer(port);
    await orch.start();
    // A component listed before the link that records an event as it starts.
    const early: Component = {
      name: 'early',
      start(ctx) {
        ctx.need('events').append({ event_type: 'vm.defined', vm_name: 'agent-early' });
        return Promise.resolve({ stop: () => Promise.resolve() });
      },
    };
    const server = await startServer(
      loopbackConfig(join(dir, 'early'), { ORCH_SERVE_ENDPOINT: `ws://127.0.0.1:${port}/` }),
      pino({ level: 'silent' }),
      {
        components: [eventsComponent(), early, httpComponent, orchestrationComponent()],
      },
    );
    try {
      const first = await waitFor('the first event message', () => orch.all().find((m) => m.type === 'event'), {
        deadlineMs: DEADLINE_MS.local,
        wake: (cb) => orch.onChange(cb),
      });
      assert.deepEqual({ seq: first['seq'], vm: (first['event'] as { vm_name: string }).vm_name }, { seq: 1, vm: 'agent-early' });
    } finally {
      await server.stop();
      await orch.stop();
    }
  });

  void test('a peer that stops answering pings loses the connection, and the link connects again', async () => {
    const port = await serverPort();
    const orch = new OrchTestServer(port, { autoPong: false });
    await orch.start();
    const dead = join(dir, 'pong');
    const server = await startServer(
      loopbackConfig(dead, {
        ORCH_SERVE_ENDPOINT: `ws://127.0.0.1:${port}/`,
        SVC_ORCH_BACKOFF_INITIAL_MS: '20',
        SVC_ORCH_BACKOFF_MAX_MS: '100',
      }),
      pino({ level: 'silent' }),
      { components: [eventsComponent(), httpComponent, orchestrationComponent({ pingIntervalMs: 100 })] },
    );
    try {
      await waitFor(
        'the first connection ended and a second one registered',
        () => orch.connections[0]?.closed === true && orch.connections[1]?.messages[0],
        {
          deadlineMs: DEADLINE_MS.local,
          wake: (cb) => orch.onChange(cb),
          lastState: () => JSON.stringify(orch.connections),
        },
      );
      assert.equal(orch.connections[1]!.messages[0]!.type, 'register');
    } finally {
      await server.stop();
      await orch.stop();
    }
  });

  void test('standalone (ORCH_SERVE_ENDPOINT unset): status says not connected, reconnect is 409 aiwg.not_configured', async () => {
    const b = await boot(join(dir, 'standalone'), {});
    try {
      const s = await status(b.base);
      assert.deepEqual(s, {
        connected: false,
        session_count: 0,
        last_event_secs: -1,
        configured: false,
        state: 'disabled',
        endpoint: null,
        events_sent: 0,
        events_dropped: 0,
        queued: 0,
        connections: 0,
      });
      const res = await fetch(`${b.base}/api/v1/aiwg/reconnect`, { method: 'POST' });
      assert.equal(res.status, 409);
      const body = (await res.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'aiwg.not_configured');
      const shown = await sbx(b, dir, ['aiwg', 'status', '--json']);
      assert.equal(shown.code, 0, shown.stderr);
      assert.equal((JSON.parse(shown.stdout) as BridgeStatus).configured, false);
      const refused = await sbx(b, dir, ['aiwg', 'reconnect']);
      assert.equal(refused.code, 4, 'exit 4: conflict (409)');
      assert.match(refused.stderr, /aiwg\.not_configured/);
    } finally {
      await b.server.stop();
    }
  });
});
