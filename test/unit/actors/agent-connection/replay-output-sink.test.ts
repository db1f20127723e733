/**
 * The replay half of the agent actor's output sink, driven through a real AgentConnectionActor
 * (no threads): per chunk ONE output frame (raw bytes, seq, clock, text carry), nothing encoded; `output.*` calls answer
 * replays and chat joins; gaps and the end are published; retention releases a finished
 * command; stop releases everything; the shard budget bounds all rings together.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import { v1 } from '../../../../proto/index.js';
import { AgentConnectionActor } from '../../../../actors/agent-connection/agent-connection.js';
import { rawOutputSink } from '../../../../actors/agent-connection/command-output.js';
import { AgentFrameKind, decodeOutputFrame, encodeJson } from '../../../../actors/protocol/agent-frames.js';
import { Outbox } from '../../../../actors/runtime/outbox.js';
import { ReplayOutputSink } from '../../../../actors/agent-connection/replay-output-sink.js';
import { Ticker } from '../../../../actors/runtime/ticker.js';
import type { ChatAnswer, ReplayAnswer } from '../../../../actors/protocol/output-calls.js';
import {
  commandKey,
  decodeChatPublish,
  decodeOutputPublish,
  kPublishEnd,
  kPublishGap,
  PublishFrameKind,
} from '../../../../actors/protocol/publish-frames.js';
import { ShardReplay, shardReplay } from '../../../../actors/replay/shard-replay.js';
import { SvcError } from '../../../../src/core/errors.js';
import { repoRoot } from '../../../support/paths.js';
import { FakeActorContext } from '../runtime/fake-actor-context.js';
import { parseSse } from '../replay/sse-parse.js';

const AGENT = 'agent-s1';
const dec = new TextDecoder();
const actors: AgentConnectionActor[] = [];
afterEach(() => {
  for (const a of actors.splice(0)) a.stop();
});

function started(): { ctx: FakeActorContext; actor: AgentConnectionActor } {
  const clock = { now: 1_700_000_000_000 };
  const ctx = new FakeActorContext(`agent:${AGENT}`);
  const actor = new AgentConnectionActor(
    ctx,
    { agentId: AGENT, heartbeatIntervalSeconds: 1, staleAfterMs: 60_000, retentionMs: 60_000 },
    { now: () => clock.now, ticker: new Ticker(3_600_000) },
  );
  actors.push(actor);
  actor.receive(
    AgentFrameKind.kFrameAgentAttach,
    encodeJson({ connId: 1, instanceId: 'i-1', traceId: null, peer: 'p', connectedAtMs: clock.now }),
  );
  send(actor, { registration: { agentId: AGENT, instanceId: 'i-1', hostname: 'h' } });
  return { ctx, actor };
}

function send(actor: AgentConnectionActor, m: v1.IAgentMessage): void {
  actor.receive(AgentFrameKind.kFrameAgentIn, v1.AgentMessage.encode(m).finish());
}

function chunk(actor: AgentConnectionActor, commandId: string, seq: number, text: string, offset = 0): void {
  send(actor, { stdout: { streamId: commandId, seq, offset, data: Buffer.from(text), timestampMs: 5 } });
}

const kinds = (ctx: FakeActorContext, commandId: string): number[] =>
  ctx.frames.filter((f) => f.key === commandId || f.key === commandKey(AGENT, commandId)).map((f) => f.kind);

void describe('replay output sink in the agent actor', () => {
  void test('each chunk crosses once: one output frame with its bytes, seq, clock and text carry; nothing encoded', () => {
    const { ctx, actor } = started();
    actor.call('runCommand', { commandId: 'c-1', command: 'echo' });
    chunk(actor, 'c-1', 1, 'hello\n');
    send(actor, { stdout: { streamId: 'c-1', seq: 2, offset: 6, data: Buffer.from([0x77, 0xe2, 0x82]), timestampMs: 5 } });
    send(actor, { stdout: { streamId: 'c-1', seq: 3, offset: 9, data: Buffer.from([0xac]), timestampMs: 5 } });
    const O = AgentFrameKind.kFrameCommandOutput;
    assert.deepEqual(kinds(ctx, 'c-1'), [PublishFrameKind.kFrameOutputKnown, O, O, O]);
    const frames = ctx.ofKind(O).map((f) => ({ key: f.key, ...decodeOutputFrame(f.payload)! }));
    assert.equal(frames[0]!.key, commandKey(AGENT, 'c-1'));
    assert.equal(dec.decode(frames[0]!.data), 'hello\n');
    assert.deepEqual(
      frames.map((f) => f.seq),
      [1, 2, 3],
    );
    assert.ok(frames[0]!.clock > 0 && frames[1]!.clock > frames[0]!.clock, 'clocks increase');
    assert.deepEqual([...frames[2]!.carry], [0xe2, 0x82], 'the third chunk is decoded after the held bytes of €');
    const replay = actor.call('output.replay', { commandId: 'c-1', mode: 'tail', limit: 10 }) as ReplayAnswer;
    assert.deepEqual(
      parseSse(dec.decode(replay.bytes)).map((e) => (JSON.parse(e.data) as { text: string }).text),
      ['hello\n', 'w', '€'],
    );
  });

  void test('output.replay: buffered events, the state, and the clock that splits old from new', () => {
    const { ctx, actor } = started();
    for (let seq = 1; seq <= 5; seq++) chunk(actor, 'c-r', seq, `line ${seq}\n`, (seq - 1) * 7);
    const a = actor.call('output.replay', { commandId: 'c-r', mode: 'tail', limit: 2 }) as ReplayAnswer;
    assert.equal(a.state, 'running');
    const events = parseSse(dec.decode(a.bytes));
    assert.deepEqual(
      events.map((e) => (JSON.parse(e.data) as { text: string }).text),
      ['line 4\n', 'line 5\n'],
    );
    const lastLive = decodeOutputFrame(ctx.ofKind(AgentFrameKind.kFrameCommandOutput).at(-1)!.payload)!;
    assert.equal(a.last, `${lastLive.clock}-${lastLive.seq}`);
    assert.equal(a.clock, lastLive.clock, 'every earlier event has a clock ≤ the answer clock');
    const none = actor.call('output.replay', { commandId: 'c-r', mode: 'none', limit: 100 }) as ReplayAnswer;
    assert.equal(none.bytes.byteLength, 0);
    assert.equal((actor.call('output.replay', { commandId: 'never', mode: 'tail', limit: 5 }) as ReplayAnswer).state, 'unknown');
    assert.throws(
      () => actor.call('output.replay', { commandId: 'c-r', mode: 'tail', limit: 1001 }),
      (e: unknown) => e instanceof SvcError && e.code === 'request.invalid',
    );
    assert.throws(
      () => actor.call('output.nothing', {}),
      (e: unknown) => e instanceof SvcError && e.code === 'request.invalid',
    );
  });

  void test('missing seqs are published as a gap; the result as the end; retention releases the command', () => {
    const { ctx, actor } = started();
    chunk(actor, 'c-g', 1, 'a');
    chunk(actor, 'c-g', 4, 'd', 3);
    const publishes = ctx.ofKind(PublishFrameKind.kFrameOutputPublish).map((f) => decodeOutputPublish(f.payload)!);
    assert.equal(publishes[0]!.flags, kPublishGap);
    assert.match(dec.decode(publishes[0]!.sse), /"from_seq":2,"to_seq":3/);
    send(actor, { commandResult: { commandId: 'c-g', exitCode: 0, lastSeq: 4 } });
    const end = decodeOutputPublish(ctx.ofKind(PublishFrameKind.kFrameOutputPublish).at(-1)!.payload)!;
    assert.equal(end.flags, kPublishEnd);
    const finished = actor.call('output.replay', { commandId: 'c-g', mode: 'tail', limit: 100 }) as ReplayAnswer;
    assert.equal(finished.state, 'finished');
    assert.ok(finished.end !== undefined && dec.decode(finished.end).includes('"command_finished"'));
    shardReplay.releaseDue(Date.now() + shardReplay.settings.retentionMs + 1000);
    assert.equal(ctx.ofKind(PublishFrameKind.kFrameOutputForget).at(-1)?.key, commandKey(AGENT, 'c-g'));
    assert.equal((actor.call('output.replay', { commandId: 'c-g', mode: 'tail', limit: 100 }) as ReplayAnswer).state, 'expired');
  });

  void test('output.chat projects stream-json: joiners get the events so far, later ones are published', () => {
    const { ctx, actor } = started();
    const lines = readFileSync(join(repoRoot, 'test', 'fixtures', 'stream-json', 'api-error.ndjson'), 'utf8').split('\n');
    const first = `${lines.slice(0, 3).join('\n')}\n`;
    chunk(actor, 'c-chat', 1, first);
    const join1 = actor.call('output.chat', { commandId: 'c-chat', sessionId: 's', afterSeq: 0 }) as ChatAnswer;
    assert.equal(join1.state, 'running');
    const events = parseSse(dec.decode(join1.bytes));
    assert.deepEqual(
      events.map((e) => e.id),
      Array.from({ length: join1.lastSeq }, (_, i) => `s-${i + 1}`),
    );
    chunk(actor, 'c-chat', 2, `${lines.slice(3).join('\n')}`, Buffer.byteLength(first));
    send(actor, { commandResult: { commandId: 'c-chat', exitCode: 0, lastSeq: 2 } });
    const published = ctx.ofKind(PublishFrameKind.kFrameChatPublish).map((f) => decodeChatPublish(f.payload)!);
    assert.ok(published.length > 0);
    assert.ok(published.at(-1)!.terminal, 'the last one is terminal (done)');
    assert.equal(published[0]!.cursor, `s-${join1.lastSeq + 1}`);
    const live = actor.call('output.chat', { commandId: 'c-chat', sessionId: 's', afterSeq: null }) as ChatAnswer;
    assert.equal(live.bytes.byteLength, 0);
    assert.equal(live.terminated, true);
    assert.equal((actor.call('output.chat', { commandId: 'nope', sessionId: 's', afterSeq: 0 }) as ChatAnswer).state, 'unknown');
  });
});

void describe('ReplayOutputSink alone', () => {
  void test('stop releases every ring; the shard budget bounds all rings together', () => {
    const ctx = new FakeActorContext('agent:x');
    const outbox = new Outbox(ctx);
    const shard = new ShardReplay(new Ticker(3_600_000));
    shard.configure({ ringBytes: 64 * 1024, budgetBytes: 100 * 1024 });
    const sink = new ReplayOutputSink(outbox, rawOutputSink(outbox), shard);
    sink.bind({ agentId: 'x', now: Date.now, commandState: () => 'running' });
    const data = new Uint8Array(2000).fill(0x61);
    for (let i = 0; i < 200; i++)
      sink.output(`c-${i % 4}`, { stream: 1, eof: false, seq: Math.floor(i / 4) + 1, offset: 0, timestampMs: 1 }, data);
    assert.ok(shard.stats().ringBytes <= 100 * 1024, `bounded by the budget (${shard.stats().ringBytes})`);
    assert.equal(shard.stats().rings, 4);
    assert.ok(shard.stats().budgetTrims > 0);
    sink.stop();
    assert.deepEqual({ bytes: shard.stats().ringBytes, rings: shard.stats().rings }, { bytes: 0, rings: 0 });
    const before = ctx.frames.length;
    sink.output('c-9', { stream: 1, eof: false, seq: 1, offset: 0, timestampMs: 1 }, data);
    assert.equal(ctx.frames.length, before + 1, 'after stop the output frame, unstored');
    assert.equal(decodeOutputFrame(ctx.frames.at(-1)!.payload)!.clock, 0);
  });

  void test('retention: a finished command is released after retentionMs, not before', () => {
    const ctx = new FakeActorContext('agent:y');
    const outbox = new Outbox(ctx);
    const shard = new ShardReplay(new Ticker(3_600_000));
    shard.configure({ retentionMs: 10_000 });
    const sink = new ReplayOutputSink(outbox, rawOutputSink(outbox), shard);
    sink.bind({ agentId: 'y', now: Date.now, commandState: () => 'finished' });
    sink.output('c', { stream: 1, eof: false, seq: 1, offset: 0, timestampMs: 1 }, Buffer.from('x'));
    sink.result({
      agent_id: 'y',
      command_id: 'c',
      exit_code: 0,
      error: '',
      duration_ms: 1,
      success: true,
      timed_out_by: '',
      last_seq: 1,
      result: 'success',
    });
    shard.releaseDue(Date.now() + 5_000);
    assert.equal(sink.stats().commands, 1);
    shard.releaseDue(Date.now() + 10_500);
    assert.equal(sink.stats().commands, 0);
    assert.equal(shard.stats().released, 1);
    assert.equal((sink.call('output.replay', { commandId: 'c', mode: 'tail', limit: 5 }) as ReplayAnswer).state, 'expired');
  });
});
