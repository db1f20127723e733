/**
 * Mission dispatch end to end (issue 23 items 1 and 6, README "Missions and dispatch"): the whole
 * server on loopback (libvirt's test:///default with a real local agent over mTLS gRPC), real
 * HTTP requests. An operator registers executors; every status of the dispatch route comes from
 * a real request (202, 400, 401 with a wrong token of the same and of another length, 404, 409,
 * 500 from a command that cannot start, 503 for an executor not registered and for an agent not
 * connected); a dispatched mission runs its command on the agent (a file it wrote holds the
 * objective byte for byte, shell metacharacters included) and its mission.* events arrive in
 * order on the events SSE follow stream. Records validate against their JSON Schemas, and no
 * token appears in a listing, an event or a log line.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import pino from 'pino';
import { parseSseText } from '../../src/client/sse-parser.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { repoRoot } from '../support/paths.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName } from './vms-harness.js';

type Json = Record<string, unknown>;

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
const schema = (file: string): ((v: unknown) => boolean) => {
  const s = JSON.parse(readFileSync(join(repoRoot, 'src', 'missions', file), 'utf8')) as { $id: string };
  ajv.addSchema(s);
  const v = ajv.getSchema(s.$id);
  assert.ok(v !== undefined);
  return (x) => {
    const ok = v(x) as boolean;
    assert.ok(ok, `${file}: ${JSON.stringify(v.errors)} for ${JSON.stringify(x)}`);
    return ok;
  };
};
const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
const executorOk = schema('executor-v1.schema.json');
const missionOk = schema('mission-v1.schema.json');

describe('mission dispatch with a real local agent', () => {
  let dir: string;
  let server: ServerHandle;
  let base: string;
  const logLines: string[] = [];
  const vm = uniqueName('msn');
  const tokens: Record<string, string> = {};
  const executors: Record<string, Json> = {};

  const http = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, json: (text === '' ? {} : JSON.parse(text)) as Json };
  };
  const codeOf = (r: { json: Json }): unknown => (r.json['error'] as Json | undefined)?.['code'];
  const dispatch = (token: string | null, body: unknown, session = 'orch-session-1') =>
    http('POST', `/api/v1/sessions/${session}/dispatch`, body, token === null ? {} : { authorization: `Bearer ${token}` });
  const mission = (over: Json = {}): Json => ({
    mission_id: randomUUID(),
    objective: 'say hello',
    long_running: false,
    executor_filter: {},
    metadata: { ticket: 7 },
    ...over,
  });
  const register = async (key: string, body: Json): Promise<void> => {
    const r = await http('POST', '/api/v2/executors', body);
    assert.equal(r.status, 201, r.text);
    tokens[key] = String(r.json['token']);
    executors[key] = r.json['executor'] as Json;
    executorOk(executors[key]);
  };

  /** The events SSE follow stream, parsed as it arrives. */
  function follow(query: string): { events: () => Json[]; close: () => void; opened: Promise<void> } {
    let text = '';
    let close = (): void => undefined;
    const opened = new Promise<void>((resolve, reject) => {
      const req = request(`${base}/api/v1/events?follow=true&${query}`, (res) => {
        assert.equal(res.statusCode, 200);
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('error', () => undefined);
        close = () => res.destroy();
        resolve();
      });
      req.on('error', reject);
      req.end();
    });
    return {
      opened,
      close: () => close(),
      events: () =>
        parseSseText(text)
          .filter((e) => e.event === 'event')
          .map((e) => JSON.parse(e.data) as Json),
    };
  }
  const ofMission = (events: Json[], id: string): Json[] => events.filter((e) => (e['details'] as Json)['mission_id'] === id);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-missions-'));
    const config = loopbackConfig(dir, {
      SVC_ACTORS: 'workers',
      SVC_ACTOR_SHARDS: '1',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
      // The timeout test's sleeper is stopped after this; every other mission ends well under it.
      SVC_MISSION_TIMEOUT_SECONDS: '4',
    });
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        logLines.push(chunk.toString('utf8'));
        cb();
      },
    });
    server = await startServer(config, pino({ level: 'info' }, sink));
    base = `http://127.0.0.1:${server.ports.http}`;
    const r = await http('POST', '/api/v1/vms', { name: vm, vcpus: 1, memory_mb: 256 });
    assert.equal(r.status, 202, r.text);
    const opId = String((r.json['operation'] as Json)['id']);
    const op = await waitFor(
      `VM ${vm} created`,
      async () => {
        const o = (await http('GET', `/api/v1/operations/${opId}`)).json;
        return o['status'] === 'completed' || o['status'] === 'failed' ? o : undefined;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
    );
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    await waitFor('the agent connected', () => ['Ready', 'Busy', 'Starting'].includes(server.agents.registry.get(vm)?.status ?? ''), {
      deadlineMs: DEADLINE_MS.agent,
    });
    // The proof executor: its command writes the objective to a file and prints a line.
    await register('proof', {
      agent_id: vm,
      name: 'proof',
      capabilities: ['shell'],
      command: [
        'sh',
        '-c',
        `printf '%s' "$SVC_MISSION_OBJECTIVE" > '${dir}/proof-'"$SVC_MISSION_ID"; echo "ran $SVC_MISSION_ID for $SVC_MISSION_SESSION_ID"`,
      ],
    });
    await register('default', { agent_id: vm, name: 'default-command' });
    await register('broken', { agent_id: vm, name: 'broken', command: ['/nonexistent/mission-runner', '--go'] });
    await register('failing', { agent_id: vm, name: 'failing', command: ['sh', '-c', 'echo trying; exit 3'] });
    await register('ghost', { agent_id: 'agent-ghost-nowhere', name: 'ghost' });
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('a dispatched mission runs its command on the agent; mission.assigned, started, completed arrive in order on the follow stream', async () => {
    const stream = follow('event_type=mission.*');
    await stream.opened;
    try {
      const objective = `fix "the bug"; rm -rf / # $(whoami) \`id\` 'quoted' ünïcode`;
      const body = mission({ objective, completion: 'tests pass', executor_filter: { agent_id: vm, capabilities: ['shell'] } });
      const r = await dispatch(tokens['proof'] as string, body);
      assert.equal(r.status, 202, r.text);
      assert.deepEqual(Object.keys(r.json).sort(), ['estimated_start', 'executor_id', 'mission_id', 'status']);
      assert.equal(r.json['mission_id'], body['mission_id']);
      assert.equal(r.json['executor_id'], executors['proof']?.['executor_id']);
      assert.equal(r.json['status'], 'assigned');
      assert.ok(!Number.isNaN(Date.parse(String(r.json['estimated_start']))), 'estimated_start is a date-time');
      assert.equal(r.headers.get('location'), `/api/v2/missions/${String(body['mission_id'])}`);

      const id = String(body['mission_id']);
      const seen = await waitFor(
        'mission.completed on the follow stream',
        () => {
          const mine = ofMission(stream.events(), id);
          return mine.some((e) => e['event_type'] === 'mission.completed') ? mine : undefined;
        },
        { deadlineMs: DEADLINE_MS.process, lastState: () => JSON.stringify(stream.events()) },
      );
      assert.deepEqual(
        seen.map((e) => e['event_type']),
        ['mission.assigned', 'mission.started', 'mission.completed'],
      );
      for (const e of seen) {
        assert.equal(e['agent_id'], vm);
        const d = e['details'] as Json;
        assert.equal(d['executor_id'], executors['proof']?.['executor_id']);
        assert.equal(d['session_id'], 'orch-session-1');
      }
      const done = (seen[2] as Json)['details'] as Json;
      assert.equal(done['exit_code'], 0);
      assert.equal(done['output_tail'], `ran ${id} for orch-session-1\n`);
      // The command really ran on the agent, with the objective as data, never as shell code.
      assert.equal(await readFile(join(dir, `proof-${id}`), 'utf8'), objective);

      const m = await http('GET', `/api/v2/missions/${id}`);
      assert.equal(m.status, 200);
      missionOk(m.json);
      assert.equal(m.json['status'], 'completed');
      assert.equal(m.json['completion'], 'tests pass');
      assert.deepEqual(m.json['metadata'], { ticket: 7 });
      // GET /api/v1/events lists the same events in the same order.
      const listed = (await http('GET', '/api/v1/events?event_type=mission.*&limit=5000')).json['events'] as Json[];
      assert.deepEqual(
        ofMission(listed, id).map((e) => e['event_type']),
        ['mission.assigned', 'mission.started', 'mission.completed'],
      );
      // The mission is also an A2A task of its agent's instance (spec 4.8's executor task store):
      // its output is there as artifacts, byte for byte.
      const instance = server.agents.registry.get(vm)?.instance_id ?? vm;
      const artifacts = await waitFor(
        'the mission task output in the A2A task store',
        async () => {
          const a = await http('GET', `/agents/${instance}/v1/tasks/${id}/artifacts`);
          return a.status === 200 && (a.json['artifacts'] as Json[]).length > 0 ? (a.json['artifacts'] as Json[]) : undefined;
        },
        { deadlineMs: DEADLINE_MS.process },
      );
      assert.equal(
        artifacts
          .map((a) => a['artifact'] as Json)
          .filter((a) => a['stream'] === 'stdout')
          .map((a) => String(a['data']))
          .join(''),
        `ran ${id} for orch-session-1\n`,
      );

      // The same mission again replays the first answer and runs nothing.
      const again = await dispatch(tokens['proof'] as string, body);
      assert.equal(again.status, 202);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(again.json, r.json);
      // The same mission_id with another objective is a conflict.
      const other = await dispatch(tokens['proof'] as string, { ...body, objective: 'something else' });
      assert.equal(other.status, 409);
      assert.equal(codeOf(other), 'mission.conflict');
      assert.equal(ofMission(stream.events(), id).length, 3, 'neither the replay nor the conflict emitted events');
    } finally {
      stream.close();
    }
  });

  test('the default command (SVC_MISSION_COMMAND) prints the mission id and objective', async () => {
    const body = mission({ objective: 'summarise the logs' });
    const r = await dispatch(tokens['default'] as string, body);
    assert.equal(r.status, 202, r.text);
    const m = await waitFor(
      'the mission to finish',
      async () => {
        const j = (await http('GET', `/api/v2/missions/${String(body['mission_id'])}`)).json;
        return j['status'] === 'completed' || j['status'] === 'failed' ? j : undefined;
      },
      { deadlineMs: DEADLINE_MS.process, intervalMs: 50 },
    );
    assert.equal(m['status'], 'completed', JSON.stringify(m));
    const done = ((await http('GET', '/api/v1/events?event_type=mission.completed&limit=5000')).json['events'] as Json[]).find(
      (e) => (e['details'] as Json)['mission_id'] === body['mission_id'],
    );
    assert.equal((done?.['details'] as Json)['output_tail'], `mission ${String(body['mission_id'])}\nsummarise the logs\n`);
  });

  test('ten missions in a row each run and complete (dispatch→202 and dispatch→mission.completed printed)', async () => {
    const stream = follow('event_type=mission.completed');
    await stream.opened;
    try {
      const accepted: number[] = [];
      const completed: number[] = [];
      for (let i = 0; i < 10; i++) {
        const body = mission({ objective: `mission ${i}` });
        const t0 = performance.now();
        const r = await dispatch(tokens['default'] as string, body);
        accepted.push(performance.now() - t0);
        assert.equal(r.status, 202, r.text);
        await waitFor('mission.completed', () => ofMission(stream.events(), String(body['mission_id'])).length === 1, {
          deadlineMs: DEADLINE_MS.process,
          intervalMs: 5,
        });
        completed.push(performance.now() - t0);
      }
      const p50 = (xs: number[]): string => ([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number).toFixed(1);
      process.stdout.write(
        `# mission dispatch on a local agent, 10 in a row: p50 dispatch→202 ${p50(accepted)} ms, dispatch→mission.completed ${p50(completed)} ms\n`,
      );
    } finally {
      stream.close();
    }
  });

  test('401: no header, another scheme, a wrong token of the same length and of other lengths; checked before the body', async () => {
    const good = tokens['proof'] as string;
    const last = good.at(-1) === 'A' ? 'B' : 'A';
    const sameLength = `${good.slice(0, -1)}${last}`;
    assert.equal(sameLength.length, good.length);
    for (const [what, headers] of [
      ['no header', {}],
      ['Basic scheme', { authorization: `Basic ${good}` }],
      ['same length', { authorization: `Bearer ${sameLength}` }],
      ['shorter', { authorization: 'Bearer short' }],
      ['longer', { authorization: `Bearer ${good}x` }],
      ['empty bearer', { authorization: 'Bearer ' }],
    ] as const) {
      const r = await http('POST', '/api/v1/sessions/s1/dispatch', mission(), headers);
      assert.equal(r.status, 401, `${what}: ${r.text}`);
      assert.equal(codeOf(r), 'dispatch.unauthorized', what);
    }
    const badBodyBadToken = await dispatch('nope', { mission_id: 'not-a-uuid' });
    assert.equal(badBodyBadToken.status, 401, 'the token is checked before the body');
  });

  test('400 for bad bodies and a bad session id, with the v1 envelope naming the field', async () => {
    const t = tokens['proof'] as string;
    for (const [body, field] of [
      [{ ...mission(), mission_id: 'not-a-uuid' }, 'mission_id'],
      [{ ...mission(), objective: undefined }, 'objective'],
      [{ ...mission(), objective: '' }, 'objective'],
      [{ ...mission(), objective: 42 }, 'objective'],
      [{ ...mission(), long_running: 'yes' }, 'long_running'],
      [{ ...mission(), executor_filter: 'vm' }, 'executor_filter'],
      [{ ...mission(), executor_filter: { agent_id: 'bad id!' } }, 'executor_filter.agent_id'],
      [{ ...mission(), metadata: [1, 2] }, 'metadata'],
      [{ ...mission(), completion: 7 }, 'completion'],
      [[1, 2, 3], 'body'],
    ] as const) {
      const r = await dispatch(t, body);
      assert.equal(r.status, 400, `${field}: ${r.text}`);
      assert.equal(codeOf(r), 'request.invalid');
      assert.match(String((r.json['error'] as Json)['message']), new RegExp(field.replace('.', '\\.')));
    }
    const malformed = await http('POST', '/api/v1/sessions/s1/dispatch', '{"mission_id": ', { authorization: `Bearer ${t}` });
    assert.equal(malformed.status, 400);
    const badSession = await dispatch(t, mission(), '%20bad%20');
    assert.equal(badSession.status, 400);
    assert.equal(codeOf(badSession), 'request.invalid');
  });

  test('404 agent not found, 503 executor not registered', async () => {
    const ghost = await dispatch(tokens['ghost'] as string, mission());
    assert.equal(ghost.status, 404, ghost.text);
    assert.equal(codeOf(ghost), 'dispatch.agent_not_found');
    const unknownFilter = await dispatch(tokens['proof'] as string, mission({ executor_filter: { agent_id: 'agent-not-here' } }));
    assert.equal(unknownFilter.status, 404);
    assert.equal(codeOf(unknownFilter), 'dispatch.agent_not_found');

    const otherAgent = await dispatch(tokens['ghost'] as string, mission({ executor_filter: { agent_id: vm } }));
    assert.equal(otherAgent.status, 503, otherAgent.text);
    assert.equal(codeOf(otherAgent), 'dispatch.executor_not_registered');
    const capability = await dispatch(tokens['proof'] as string, mission({ executor_filter: { capabilities: ['gpu'] } }));
    assert.equal(capability.status, 503);
    assert.equal(codeOf(capability), 'dispatch.executor_not_registered');
    const otherExecutor = await dispatch(
      tokens['proof'] as string,
      mission({ executor_filter: { executor_id: executors['default']?.['executor_id'] } }),
    );
    assert.equal(otherExecutor.status, 503);
    assert.equal(codeOf(otherExecutor), 'dispatch.executor_not_registered');
  });

  test('500 when the command cannot start, with mission.failed (start_failed); a non-zero exit is mission.failed (exit_nonzero)', async () => {
    const stream = follow('event_type=mission.*');
    await stream.opened;
    try {
      const body = mission();
      const r = await dispatch(tokens['broken'] as string, body);
      assert.equal(r.status, 500, r.text);
      assert.equal(codeOf(r), 'dispatch.failed');
      assert.match(String((r.json['error'] as Json)['message']), /nonexistent\/mission-runner/);
      const id = String(body['mission_id']);
      const seen = await waitFor(
        'mission.failed on the stream',
        () => {
          const mine = ofMission(stream.events(), id);
          return mine.some((e) => e['event_type'] === 'mission.failed') ? mine : undefined;
        },
        { deadlineMs: DEADLINE_MS.local, lastState: () => JSON.stringify(stream.events()) },
      );
      assert.deepEqual(
        seen.map((e) => e['event_type']),
        ['mission.assigned', 'mission.failed'],
      );
      assert.equal(((seen[1] as Json)['details'] as Json)['reason'], 'start_failed');
      const m = (await http('GET', `/api/v2/missions/${id}`)).json;
      missionOk(m);
      assert.equal(m['status'], 'failed');
      assert.equal(m['reason'], 'start_failed');

      const failing = mission();
      const f = await dispatch(tokens['failing'] as string, failing);
      assert.equal(f.status, 202, f.text);
      const fid = String(failing['mission_id']);
      const fseen = await waitFor(
        'the failing mission to end',
        () => {
          const mine = ofMission(stream.events(), fid);
          return mine.some((e) => e['event_type'] === 'mission.failed') ? mine : undefined;
        },
        { deadlineMs: DEADLINE_MS.process, lastState: () => JSON.stringify(stream.events()) },
      );
      assert.deepEqual(
        fseen.map((e) => e['event_type']),
        ['mission.assigned', 'mission.started', 'mission.failed'],
      );
      const d = (fseen[2] as Json)['details'] as Json;
      assert.equal(d['reason'], 'exit_nonzero');
      assert.equal(d['exit_code'], 3);
      assert.equal(d['output_tail'], 'trying\n');
    } finally {
      stream.close();
    }
  });

  test('a mission past SVC_MISSION_TIMEOUT_SECONDS fails with reason timeout; one ended by a signal with reason killed', async () => {
    await register('sleeper', { agent_id: vm, name: 'sleeper', command: ['sleep', '120'] });
    await register('signalled', { agent_id: vm, name: 'signalled', command: ['sh', '-c', 'echo bye; kill -KILL $$'] });
    const stream = follow('event_type=mission.failed');
    await stream.opened;
    try {
      const slow = mission({ long_running: false });
      const dead = mission();
      assert.equal((await dispatch(tokens['sleeper'] as string, slow)).status, 202);
      assert.equal((await dispatch(tokens['signalled'] as string, dead)).status, 202);
      const reasonOf = (id: unknown): unknown => (ofMission(stream.events(), String(id))[0]?.['details'] as Json | undefined)?.['reason'];
      await waitFor(
        'both missions failed',
        () => reasonOf(slow['mission_id']) !== undefined && reasonOf(dead['mission_id']) !== undefined,
        {
          deadlineMs: DEADLINE_MS.process,
          lastState: () => JSON.stringify(stream.events()),
        },
      );
      assert.equal(reasonOf(slow['mission_id']), 'timeout');
      assert.equal(reasonOf(dead['mission_id']), 'killed');
      assert.equal((await http('GET', `/api/v2/missions/${String(dead['mission_id'])}`)).json['exit_code'], 137);
    } finally {
      stream.close();
    }
  });

  test("executors are listed without tokens; no token is in an event or a log line; a deleted executor's token stops working", async () => {
    const list = await http('GET', '/api/v2/executors');
    assert.equal(list.status, 200);
    const all = list.json['executors'] as Json[];
    assert.equal(all.length, Object.keys(tokens).length);
    for (const e of all) executorOk(e);
    const one = await http('GET', `/api/v2/executors/${String(executors['proof']?.['executor_id'])}`);
    assert.equal(one.status, 200);
    assert.ok(one.json['last_dispatch_at'] !== null, 'last_dispatch_at is set after a dispatch');
    const missions = await http('GET', `/api/v2/missions?agent_id=${vm}&status=completed`);
    assert.ok((missions.json['missions'] as Json[]).length >= 2);
    for (const m of missions.json['missions'] as Json[]) missionOk(m);
    const events = (await http('GET', '/api/v1/events?limit=5000')).text;
    const everything = [list.text, one.text, missions.text, events, logLines.join('')];
    for (const t of Object.values(tokens)) {
      for (const text of everything) assert.ok(!text.includes(t), 'a token leaked');
      assert.ok(!logLines.join('').includes(t.slice(5)), 'no token body in the log');
    }
    assert.ok(
      logLines.some((l) => l.includes('mission dispatched')),
      'the log was captured',
    );

    const gone = String(executors['failing']?.['executor_id']);
    assert.equal((await http('DELETE', `/api/v2/executors/${gone}`)).status, 200);
    assert.equal(codeOf(await http('GET', `/api/v2/executors/${gone}`)), 'executor.not_found');
    const r = await dispatch(tokens['failing'] as string, mission());
    assert.equal(r.status, 401);
    assert.equal(codeOf(await http('GET', `/api/v2/missions/${randomUUID()}`)), 'mission.not_found');
  });

  test('sbx executor register, sbx mission dispatch (token from SBX_EXECUTOR_TOKEN) and sbx mission get', async () => {
    const sbx = (args: string[], env: Record<string, string> = {}) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [SBX_BIN, ...args], {
          env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: dir, XDG_CONFIG_HOME: dir, SBX_SERVER: base, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
      });
    const reg = await sbx(['executor', 'register', vm, '--name', 'cli', '--capabilities', 'shell,git', '--json']);
    assert.equal(reg.code, 0, reg.stderr);
    const registered = JSON.parse(reg.stdout) as { executor: Json; token: string };
    executorOk(registered.executor);
    assert.deepEqual(registered.executor['capabilities'], ['shell', 'git']);
    const listed = await sbx(['executor', 'list', '--agent', vm]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(String(registered.executor['executor_id'])));
    assert.ok(!listed.stdout.includes(registered.token), 'the list never shows a token');

    const noToken = await sbx(['mission', 'dispatch', 'x']);
    assert.notEqual(noToken.code, 0);
    assert.match(noToken.stderr, /SBX_EXECUTOR_TOKEN/);
    const id = randomUUID();
    const sent = await sbx(['mission', 'dispatch', 'from the cli', '--mission-id', id, '--session', 'cli-1', '--json'], {
      SBX_EXECUTOR_TOKEN: registered.token,
    });
    assert.equal(sent.code, 0, sent.stderr);
    assert.equal((JSON.parse(sent.stdout) as Json)['mission_id'], id);
    await waitFor('the CLI mission completed', async () => (await http('GET', `/api/v2/missions/${id}`)).json['status'] === 'completed', {
      deadlineMs: DEADLINE_MS.process,
      intervalMs: 50,
    });
    const got = await sbx(['mission', 'get', id, '--json']);
    assert.equal((JSON.parse(got.stdout) as Json)['session_id'], 'cli-1');
    const text = await sbx(['mission', 'get', id]);
    assert.match(text.stdout, /status:\s+completed/);
  });

  test('503 when the agent is not connected', async () => {
    assert.equal((await http('POST', `/api/v1/vms/${vm}/stop`)).status, 200);
    await waitFor('agent Disconnected', () => server.agents.registry.get(vm)?.status === 'Disconnected', {
      deadlineMs: DEADLINE_MS.agent,
    });
    const r = await dispatch(tokens['proof'] as string, mission());
    assert.equal(r.status, 503, r.text);
    assert.equal(codeOf(r), 'dispatch.no_agents');
  });
});
