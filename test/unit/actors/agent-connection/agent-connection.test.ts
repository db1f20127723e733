/**
 * The agent-connection actor fed with encoded messages, no sockets and no threads: the
 * registration handshake, heartbeats and the status machine (with a fake clock), bad input
 * (ignored and counted, the actor keeps working), identity mismatches (stream closed with
 * PERMISSION_DENIED), commands with de-duplicated output, gaps and resume cursors, retention.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import fc from 'fast-check';
import { MAX_MESSAGE_BYTES, v1 } from '../../../../proto/index.js';
import { AgentConnectionActor, kRegistrationTimeoutMs } from '../../../../actors/agent-connection/agent-connection.js';
import {
  AgentFrameKind,
  decodeConnPrefixed,
  decodeJson,
  decodeOutputFrame,
  encodeJson,
  type AgentEventFrame,
  type AgentMetricFrame,
  type AgentSnapshot,
  type CommandGapFrame,
  type CommandResultFrame,
} from '../../../../actors/protocol/agent-frames.js';
import { Ticker } from '../../../../actors/runtime/ticker.js';
import { GrpcStatus, SvcError } from '../../../../src/core/errors.js';
import { FakeActorContext } from '../runtime/fake-actor-context.js';

const AGENT = 'agent-u1';
const INSTANCE = 'i-u1';

interface Rig {
  ctx: FakeActorContext;
  actor: AgentConnectionActor;
  clock: { now: number };
  ticker: Ticker;
}

const rigs: Rig[] = [];
afterEach(() => {
  for (const r of rigs.splice(0)) r.actor.stop();
});

function rig(init: Partial<{ staleAfterMs: number; retentionMs: number; maxFinishedCommands: number }> = {}): Rig {
  const clock = { now: 1_700_000_000_000 };
  const ticker = new Ticker(3_600_000, () => clock.now);
  const ctx = new FakeActorContext(`agent:${AGENT}`);
  const actor = new AgentConnectionActor(
    ctx,
    {
      agentId: AGENT,
      heartbeatIntervalSeconds: 1,
      staleAfterMs: init.staleAfterMs ?? 3000,
      retentionMs: init.retentionMs ?? 10_000,
      ...(init.maxFinishedCommands !== undefined ? { maxFinishedCommands: init.maxFinishedCommands } : {}),
    },
    { now: () => clock.now, ticker },
  );
  const r = { ctx, actor, clock, ticker };
  rigs.push(r);
  return r;
}

const enc = (m: v1.IAgentMessage): Uint8Array => v1.AgentMessage.encode(m).finish();
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function attach(r: Rig, connId = 1, instanceId = INSTANCE): void {
  r.actor.receive(
    AgentFrameKind.kFrameAgentAttach,
    encodeJson({ connId, instanceId, traceId: 'trace-1', peer: '127.0.0.1:1', connectedAtMs: r.clock.now }),
  );
}

function detach(r: Rig, connId = 1): void {
  r.actor.receive(AgentFrameKind.kFrameAgentDetach, encodeJson({ connId, reason: 'test' }));
}

function send(r: Rig, m: v1.IAgentMessage): void {
  r.actor.receive(AgentFrameKind.kFrameAgentIn, enc(m));
}

function register(r: Rig, extra: Partial<v1.IAgentRegistration> = {}): void {
  send(r, {
    registration: {
      agentId: AGENT,
      instanceId: INSTANCE,
      hostname: 'h',
      ipAddress: '10.0.0.2',
      system: { os: 'Linux', kernel: '6', cpuCores: 2, memoryBytes: 8, diskBytes: 9 },
      ...extra,
    },
  });
}

function toAgent(r: Rig): { connId: number; msg: v1.ManagementMessage }[] {
  return r.ctx.ofKind(AgentFrameKind.kFrameSendToAgent).map((f) => {
    const d = decodeConnPrefixed(f.payload)!;
    return { connId: d.connId, msg: v1.ManagementMessage.decode(d.rest) };
  });
}

function events(r: Rig): AgentEventFrame[] {
  return r.ctx.ofKind(AgentFrameKind.kFrameAgentEvent).map((f) => decodeJson<AgentEventFrame>(f.payload));
}

function lastSnapshot(r: Rig): AgentSnapshot | undefined {
  const s = r.ctx.ofKind(AgentFrameKind.kFrameAgentSnapshot).at(-1);
  return s === undefined ? undefined : decodeJson<AgentSnapshot>(s.payload);
}

function rejected(r: Rig): string[] {
  return r.ctx
    .ofKind(AgentFrameKind.kFrameAgentMetric)
    .map((f) => decodeJson<AgentMetricFrame>(f.payload))
    .flatMap((m) => (m.type === 'message_rejected' ? [m.reason] : []));
}

function heartbeat(r: Rig, status = v1.AgentStatus.READY): void {
  send(r, { heartbeat: { agentId: AGENT, timestampMs: r.clock.now, status, runningCommands: 0 } });
}

void describe('agent-connection actor: registration and status', () => {
  void test('registration is answered with RegistrationAck (config interval, server time) then SessionQuery, and the agent is Starting', async () => {
    const r = rig();
    attach(r, 7);
    register(r);
    await flush();
    const out = toAgent(r);
    assert.deepEqual(
      out.map((o) => o.msg.payload),
      ['registrationAck', 'sessionQuery'],
    );
    assert.ok(
      out.every((o) => o.connId === 7),
      'addressed to the stream that registered',
    );
    assert.equal(out[0]?.msg.registrationAck?.accepted, true);
    assert.equal(out[0]?.msg.registrationAck?.heartbeatIntervalSeconds, 1);
    assert.equal(out[0]?.msg.registrationAck?.serverTimeMs, r.clock.now);
    assert.equal(out[1]?.msg.sessionQuery?.reportAll, true);
    const snap = lastSnapshot(r)!;
    assert.equal(snap.status, 'Starting');
    assert.equal(snap.hostname, 'h');
    assert.deepEqual(snap.system_info, { os: 'Linux', kernel: '6', cpu_cores: 2, memory_bytes: 8, disk_bytes: 9 });
    assert.equal(snap.metrics, undefined);
    const types = events(r).map((e) => e.event_type);
    assert.deepEqual(types, ['agent.connected', 'agent.status_changed', 'agent.registered', 'session.query_sent']);
    assert.equal(events(r)[0]?.trace_id, 'trace-1');
  });

  void test('the main thread gets the registered agent (snapshot) before agent.registered, in the same turn', () => {
    const r = rig();
    attach(r, 7);
    register(r);
    // No flush: what a client reacting to agent.registered can find must already be on its way.
    const order = r.ctx.frames.flatMap((f) => {
      if (f.kind === AgentFrameKind.kFrameAgentSnapshot) return ['snapshot'];
      if (f.kind === AgentFrameKind.kFrameAgentEvent) return [decodeJson<AgentEventFrame>(f.payload).event_type];
      return [];
    });
    const registered = order.indexOf('agent.registered');
    assert.ok(registered > 0, order.join(', '));
    assert.ok(order.slice(0, registered).includes('snapshot'), `a snapshot precedes agent.registered: ${order.join(', ')}`);
    const snap = decodeJson<AgentSnapshot>(r.ctx.ofKind(AgentFrameKind.kFrameAgentSnapshot)[0]!.payload);
    assert.equal(snap.status, 'Starting');
  });

  void test('heartbeats drive the status; missing heartbeats make it Stale; the next one ends that', async () => {
    const r = rig({ staleAfterMs: 3000 });
    attach(r);
    register(r);
    heartbeat(r, v1.AgentStatus.BUSY);
    await flush();
    assert.equal(r.actor.status, 'Busy');
    r.clock.now += 2999;
    r.ticker.tickNow();
    assert.equal(r.actor.status, 'Busy', 'not stale at the threshold');
    r.clock.now += 2;
    r.ticker.tickNow();
    assert.equal(r.actor.status, 'Stale');
    await flush();
    assert.equal(lastSnapshot(r)?.status, 'Stale');
    heartbeat(r, v1.AgentStatus.AGENT_STATUS_UNSPECIFIED);
    assert.equal(r.actor.status, 'Busy', 'an unspecified status keeps the last reported one');
    heartbeat(r, v1.AgentStatus.STALE);
    assert.equal(r.actor.status, 'Busy', 'agents cannot report server-assigned statuses');
    heartbeat(r, v1.AgentStatus.ERROR);
    assert.equal(r.actor.status, 'Error');
    const moves = events(r)
      .filter((e) => e.event_type === 'agent.status_changed')
      .map((e) => `${String(e.details['from'])}>${String(e.details['to'])}`);
    assert.deepEqual(moves, ['Disconnected>Starting', 'Starting>Busy', 'Busy>Stale', 'Stale>Busy', 'Busy>Error']);
    assert.equal(
      events(r).filter((e) => e.event_type === 'agent.heartbeat').length,
      4,
      'one heartbeat event per heartbeat (the store samples)',
    );
  });

  void test('metrics messages fill the spec metrics object (integers, three load averages)', async () => {
    const r = rig();
    attach(r);
    register(r);
    send(r, {
      metrics: {
        agentId: AGENT,
        cpuPercent: 12.300000190734863,
        memoryUsedBytes: 5,
        memoryTotalBytes: 10,
        diskUsedBytes: 1,
        diskTotalBytes: 2,
        loadAvg: [0.5],
        uptimeSeconds: 77,
      },
    });
    await flush();
    assert.deepEqual(lastSnapshot(r)?.metrics, {
      cpu_percent: 12.3,
      memory_used_bytes: 5,
      memory_total_bytes: 10,
      disk_used_bytes: 1,
      disk_total_bytes: 2,
      load_avg: [0.5, 0, 0],
      uptime_seconds: 77,
    });
  });

  void test('the stream ending makes the agent Disconnected; after the retention period the actor asks to be removed', async () => {
    const r = rig({ retentionMs: 10_000 });
    attach(r);
    register(r);
    heartbeat(r);
    detach(r);
    await flush();
    assert.equal(r.actor.status, 'Disconnected');
    assert.equal(lastSnapshot(r)?.disconnected_at, r.clock.now);
    assert.ok(events(r).some((e) => e.event_type === 'agent.disconnected'));
    r.clock.now += 9_999;
    r.ticker.tickNow();
    assert.equal(r.ctx.ofKind(AgentFrameKind.kFrameAgentRemoved).length, 0);
    r.clock.now += 1;
    r.ticker.tickNow();
    r.ticker.tickNow();
    assert.equal(r.ctx.ofKind(AgentFrameKind.kFrameAgentRemoved).length, 1, 'asked once');
    // A new stream cancels the removal request's effect: the agent registers again.
    attach(r, 2);
    register(r);
    assert.equal(r.actor.status, 'Starting');
  });

  void test('a stale Detach (an older stream) changes nothing; a new Attach supersedes the old stream', async () => {
    const r = rig();
    attach(r, 1);
    register(r);
    heartbeat(r);
    attach(r, 2);
    assert.equal(r.actor.status, 'Disconnected', 'the old stream ended');
    detach(r, 1);
    register(r);
    assert.equal(r.actor.status, 'Starting');
    await flush();
    assert.deepEqual(
      toAgent(r)
        .filter((o) => o.msg.payload === 'registrationAck')
        .map((o) => o.connId),
      [1, 2],
    );
  });

  void test('a stream that never registers is closed after the registration timeout', () => {
    const r = rig();
    attach(r, 3);
    r.clock.now += kRegistrationTimeoutMs + 1;
    r.ticker.tickNow();
    const close = r.ctx.ofKind(AgentFrameKind.kFrameAgentClose);
    assert.equal(close.length, 1);
    const d = decodeConnPrefixed(close[0]!.payload)!;
    assert.equal(d.connId, 3);
    assert.equal(d.rest[0], GrpcStatus.DEADLINE_EXCEEDED);
  });
});

void describe('agent-connection actor: bad input', () => {
  void test('undecodable, oversized, unknown oneof, before registration, registration twice: ignored, counted, logged; the actor keeps working', async () => {
    const r = rig();
    r.actor.receive(AgentFrameKind.kFrameAgentIn, enc({ heartbeat: {} }));
    attach(r);
    r.actor.receive(AgentFrameKind.kFrameAgentIn, Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
    r.actor.receive(AgentFrameKind.kFrameAgentIn, new Uint8Array(MAX_MESSAGE_BYTES + 1));
    r.actor.receive(AgentFrameKind.kFrameAgentIn, Uint8Array.from([0x9a, 0x06, 0x00]));
    heartbeat(r);
    send(r, { stdout: { streamId: 'c', data: Buffer.from('x'), seq: 1 } });
    register(r);
    register(r);
    r.actor.receive(200, new Uint8Array([1]));
    send(r, { stdout: { streamId: '', data: Buffer.from('x'), seq: 1 } });
    heartbeat(r);
    await flush();
    assert.deepEqual(rejected(r), [
      'not_attached',
      'undecodable',
      'oversized',
      'unknown_payload',
      'before_registration',
      'before_registration',
      'registration_twice',
      'unknown_frame',
      'invalid_field',
    ]);
    assert.equal(r.actor.status, 'Ready');
    assert.equal(toAgent(r).filter((o) => o.msg.payload === 'registrationAck').length, 1);
    assert.ok(r.ctx.logs.some((l) => l.level === 'warn' && l.msg === 'agent message ignored'));
    assert.equal(r.ctx.ofKind(AgentFrameKind.kFrameAgentClose).length, 0, 'no bad input closes the stream');
  });

  void test('a registration naming another agent or instance closes the stream with PERMISSION_DENIED', () => {
    for (const bad of [{ agentId: 'someone-else' }, { instanceId: 'i-other' }]) {
      const r = rig();
      attach(r, 4);
      register(r, bad);
      const close = r.ctx.ofKind(AgentFrameKind.kFrameAgentClose);
      assert.equal(close.length, 1, JSON.stringify(bad));
      const d = decodeConnPrefixed(close[0]!.payload)!;
      assert.equal(d.connId, 4);
      assert.equal(d.rest[0], GrpcStatus.PERMISSION_DENIED);
      assert.equal(toAgent(r).length, 0, 'no ack');
      heartbeat(r);
      assert.equal(r.actor.status, 'Disconnected', 'later frames of the refused stream are ignored');
    }
  });

  void test('arbitrary bytes never throw out of receive, before or after registration', async () => {
    const r = rig();
    attach(r);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        r.actor.receive(AgentFrameKind.kFrameAgentIn, bytes);
      }),
      { numRuns: 300 },
    );
    const r2 = rig();
    attach(r2);
    register(r2);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 1, max: 255 }), (bytes, kind) => {
        r2.actor.receive(
          kind === AgentFrameKind.kFrameAgentAttach || kind === AgentFrameKind.kFrameAgentDetach ? AgentFrameKind.kFrameAgentIn : kind,
          bytes,
        );
      }),
      { numRuns: 300 },
    );
    heartbeat(r2);
    await flush();
    assert.ok(['Ready', 'Starting', 'Busy', 'Error', 'ShuttingDown', 'Stale'].includes(r2.actor.status));
  });
});

void describe('agent-connection actor: commands', () => {
  function started(): Rig {
    const r = rig();
    attach(r);
    register(r);
    heartbeat(r);
    return r;
  }

  function outputs(r: Rig): { key: string; seq: number; data: string; stream: number }[] {
    return r.ctx.ofKind(AgentFrameKind.kFrameCommandOutput).map((f) => {
      const o = decodeOutputFrame(f.payload)!;
      return { key: f.key, seq: o.seq, data: Buffer.from(o.data).toString(), stream: o.stream };
    });
  }

  void test('runCommand sends a CommandRequest, emits started events and counts the command', () => {
    const r = started();
    const res = r.actor.call('runCommand', {
      commandId: 'c-1',
      command: 'echo',
      args: ['a'],
      timeoutSeconds: 5,
      allocatePty: true,
      ptyCols: 100,
      source: 'exec',
    });
    assert.deepEqual(res, { commandId: 'c-1' });
    const req = toAgent(r).find((o) => o.msg.payload === 'command')?.msg.command;
    assert.equal(req?.commandId, 'c-1');
    assert.deepEqual(req?.args, ['a']);
    assert.equal(req?.timeoutSeconds, 5);
    assert.equal(req?.allocatePty, true);
    assert.ok(events(r).some((e) => e.event_type === 'agent.command.started' && e.details['source'] === 'exec'));
    assert.ok(events(r).some((e) => e.event_type === 'agent.pty.created'));
    // A session's PTY command is announced by the sessions service instead (once, with the session's details).
    r.actor.call('runCommand', {
      commandId: 'c-2',
      command: 'tmux',
      allocatePty: true,
      sessionId: 's-1',
      sessionName: 'main',
      source: 'exec',
    });
    assert.equal(events(r).filter((e) => e.event_type === 'agent.pty.created').length, 1);
    assert.throws(
      () => r.actor.call('runCommand', { commandId: 'c-1', command: 'echo' }),
      (err: unknown) => err instanceof SvcError && err.code === 'request.invalid',
    );
    assert.throws(
      () => r.actor.call('runCommand', { commandId: 'bad id!', command: 'echo' }),
      (err: unknown) => err instanceof SvcError && err.code === 'request.invalid',
    );
  });

  void test('runCommand on a disconnected agent is server.unavailable', () => {
    const r = started();
    detach(r);
    assert.throws(
      () => r.actor.call('runCommand', { commandId: 'c-2', command: 'true' }),
      (err: unknown) => err instanceof SvcError && err.code === 'server.unavailable',
    );
  });

  void test('chunks are delivered once in seq order; a jump is a gap; the result ends the command and later resends are dropped', () => {
    const r = started();
    r.actor.call('runCommand', { commandId: 'c-3', command: 'x' });
    const chunk = (seq: number, data: string, stream: 'stdout' | 'stderr' = 'stdout'): void =>
      send(r, { [stream]: { streamId: 'c-3', data: Buffer.from(data), seq } });
    chunk(1, 'a');
    chunk(2, 'b', 'stderr');
    chunk(1, 'a');
    chunk(2, 'b');
    chunk(5, 'e');
    chunk(4, 'd');
    send(r, { commandResult: { commandId: 'c-3', exitCode: 0, lastSeq: 6, durationMs: 12 } });
    chunk(6, 'f');
    send(r, { commandResult: { commandId: 'c-3', exitCode: 0, lastSeq: 6 } });
    assert.deepEqual(
      outputs(r).map((o) => `${o.seq}${o.data}`),
      ['1a', '2b', '5e'],
    );
    assert.equal(outputs(r)[1]?.stream, 2);
    const gaps = r.ctx.ofKind(AgentFrameKind.kFrameCommandGap).map((f) => decodeJson<CommandGapFrame>(f.payload));
    assert.deepEqual(
      gaps.map((g) => [g.first_seq, g.last_seq]),
      [
        [3, 4],
        [6, 6],
      ],
    );
    const results = r.ctx.ofKind(AgentFrameKind.kFrameCommandResult).map((f) => decodeJson<CommandResultFrame>(f.payload));
    assert.equal(results.length, 1);
    assert.equal(results[0]?.result, 'success');
    const finished = r.ctx
      .ofKind(AgentFrameKind.kFrameAgentMetric)
      .map((f) => decodeJson<AgentMetricFrame>(f.payload))
      .filter((m) => m.type === 'command_finished');
    assert.equal(finished.length, 1);
  });

  void test('an OutputGap from the agent is passed on once; output of an unknown command is adopted', () => {
    const r = started();
    send(r, { stdout: { streamId: 'orphan', data: Buffer.from('x'), seq: 1 } });
    send(r, { outputGap: { commandId: 'orphan', firstSeq: 2, lastSeq: 9, lostBytes: 800, reason: 'buffer full' } });
    send(r, { outputGap: { commandId: 'orphan', firstSeq: 2, lastSeq: 9, lostBytes: 800, reason: 'buffer full' } });
    send(r, { stdout: { streamId: 'orphan', data: Buffer.from('y'), seq: 10 } });
    send(r, { commandResult: { commandId: 'orphan', exitCode: 137, lastSeq: 10 } });
    assert.deepEqual(
      outputs(r).map((o) => o.seq),
      [1, 10],
    );
    const gaps = r.ctx.ofKind(AgentFrameKind.kFrameCommandGap).map((f) => decodeJson<CommandGapFrame>(f.payload));
    assert.equal(gaps.length, 1);
    assert.equal(gaps[0]?.lost_bytes, 800);
    assert.equal(decodeJson<CommandResultFrame>(r.ctx.ofKind(AgentFrameKind.kFrameCommandResult)[0]!.payload).result, 'killed');
    const finished = r.ctx
      .ofKind(AgentFrameKind.kFrameAgentMetric)
      .map((f) => decodeJson<AgentMetricFrame>(f.payload))
      .filter((m) => m.type === 'command_finished');
    assert.equal(finished.length, 0, 'adopted commands are not counted (never counted as started)');
  });

  void test('a re-registration gets the seqs the server holds as cursors', () => {
    const r = started();
    r.actor.call('runCommand', { commandId: 'c-4', command: 'x' });
    for (let seq = 1; seq <= 3; seq++) send(r, { stdout: { streamId: 'c-4', data: Buffer.from(`${seq}`), seq } });
    detach(r);
    attach(r, 2);
    register(r, {
      cursors: [
        { commandId: 'c-4', lastSeq: 5 },
        { commandId: 'never-seen', lastSeq: 2 },
      ],
    });
    const acks = toAgent(r).filter((o) => o.msg.payload === 'registrationAck');
    const cursors = acks.at(-1)?.msg.registrationAck?.cursors ?? [];
    assert.deepEqual(
      cursors.map((c) => [c.commandId, Number(c.lastSeq)]),
      [['c-4', 3]],
    );
    send(r, { stdout: { streamId: 'c-4', data: Buffer.from('3'), seq: 3 } });
    send(r, { stdout: { streamId: 'c-4', data: Buffer.from('4'), seq: 4 } });
    assert.deepEqual(
      outputs(r).map((o) => o.seq),
      [1, 2, 3, 4],
    );
  });

  void test('expireCommand ends a command as a timeout, kills it, and makes a late result a duplicate', () => {
    const r = started();
    r.actor.call('runCommand', { commandId: 'c-5', command: 'x' });
    assert.equal(r.actor.call('expireCommand', { commandId: 'c-5', reason: 'gave up' }), true);
    assert.equal(r.actor.call('expireCommand', { commandId: 'c-5' }), false);
    const kill = toAgent(r).find((o) => o.msg.payload === 'ptyControl');
    assert.equal(kill?.msg.ptyControl?.signal?.signalNumber, 9);
    send(r, { commandResult: { commandId: 'c-5', exitCode: 0 } });
    const results = r.ctx.ofKind(AgentFrameKind.kFrameCommandResult).map((f) => decodeJson<CommandResultFrame>(f.payload));
    assert.equal(results.length, 1);
    assert.equal(results[0]?.result, 'timeout');
    assert.equal(results[0]?.exit_code, -1);
  });

  void test('output waits while the outbound ring is full and keeps its order', () => {
    const r = started();
    r.actor.call('runCommand', { commandId: 'c-6', command: 'x' });
    r.ctx.full = true;
    for (let seq = 1; seq <= 20; seq++) send(r, { stdout: { streamId: 'c-6', data: Buffer.from(`${seq},`), seq } });
    assert.equal(outputs(r).length, 0);
    r.ctx.drain();
    return flush().then(() => {
      assert.deepEqual(
        outputs(r).map((o) => o.seq),
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
    });
  });
});
