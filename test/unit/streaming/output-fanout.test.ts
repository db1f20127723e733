/**
 * The main-thread fanout without sockets (routes driven with inject + MemorySseSink, a scripted
 * actor system): the frames the actors emit reach every matching subscriber as the same bytes,
 * command-scoped streams end with the command, chat frames reach their session, foreign frame
 * kinds are left to others, malformed ones are dropped; plus the index, topics and chat parts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ChatProjection } from '../../../actors/replay/chat-projection.js';
import { CommandReplay } from '../../../actors/replay/command-replay.js';
import { decodeOutputFrame, encodeOutputFrame, OutputStream, type OutputFrame } from '../../../actors/protocol/agent-frames.js';
import { chatTopic, commandKey, encodeChatPublish, PublishFrameKind } from '../../../actors/protocol/publish-frames.js';
import { inject, MemorySseSink } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { CommandIndex } from '../../../src/streaming/command-index.js';
import { shardActorIds, startOutputFanout, type OutputFanout } from '../../../src/streaming/output-fanout.js';
import {
  commandScopedTopics,
  outputPublishTopics,
  outputPublishTopicsAllStreams,
  outputSubscriptionTopic,
} from '../../../src/streaming/output-topics.js';
import { parseSse } from '../actors/replay/sse-parse.js';

const enc = new TextEncoder();

type ChunkListener = (agentId: string, commandId: string, frame: OutputFrame) => void;

async function rig(): Promise<{ fanout: OutputFanout; router: Router; spawned: string[]; chunk: ChunkListener }> {
  const spawned: string[] = [];
  const listeners: ChunkListener[] = [];
  const fanout = await startOutputFanout({
    actors: {
      shards: 3,
      shardOf: (id) => Number(/\d+$/.exec(id)?.[0] ?? 0) % 3,
      spawn: (_type, id) => {
        spawned.push(id);
        return Promise.resolve();
      },
      // every agent actor answers: running, nothing buffered
      call: <T>(): Promise<T> =>
        Promise.resolve({ state: 'running', bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: false, clock: 0 } as T),
    },
    agents: {
      registry: { subscribe: () => () => undefined },
      subscribeOutput: (l) => {
        listeners.push(l);
        return () => undefined;
      },
    },
    logger: pino({ level: 'silent' }),
    metrics: createMetrics({ defaultMetrics: false }),
  });
  const router = new Router();
  fanout.registerRoutes(router);
  return { fanout, router, spawned, chunk: (a, c, f) => listeners.forEach((l) => l(a, c, f)) };
}

async function open(router: Router, url: string): Promise<MemorySseSink> {
  const res = await inject(router, { method: 'GET', url });
  assert.equal(res.status, 200, res.text);
  const sink = new MemorySseSink();
  await res.sse!.start(sink, res.sse!.view);
  return sink;
}

void describe('output fanout (main thread)', () => {
  void test('one output-shard actor per shard', async () => {
    const { spawned, fanout } = await rig();
    assert.deepEqual(spawned, ['output-shard:0', 'output-shard:1', 'output-shard:2']);
    assert.equal(shardActorIds({ shards: 1, shardOf: () => 0 }).length, 1);
    await fanout.stop();
  });

  void test('a chunk reaches every matching subscriber as the same bytes; the end closes command-scoped ones', async () => {
    const { fanout, router, chunk } = await rig();
    const byCommand = await open(router, '/api/v1/agent-output/stream?agent_id=a&command_id=c');
    const byAgent = await open(router, '/api/v1/agent-output/stream?agent_id=a');
    const stderrOnly = await open(router, '/api/v1/agent-output/stream?agent_id=a&stream=stderr');
    const other = await open(router, '/api/v1/agent-output/stream?agent_id=b');
    const replay = new CommandReplay('a', 'c', { ringBytes: 1 << 20 });
    const live = { seq: 1, stream: 'stdout' as const, offset: 0, timestampMs: 1, eof: false, bytes: enc.encode('hi\n') };
    const carry = replay.chunk(live, 77)!;
    // The one frame that crosses from the actor: Exec, listeners and the fanout read it.
    const payload = encodeOutputFrame({ ...live, stream: OutputStream.stdout, clock: 77, carry }, live.bytes);
    chunk('a', 'c', decodeOutputFrame(payload)!);
    payload.fill(0); // the fanout must have copied what it keeps
    assert.equal(byCommand.frames.length, 1);
    assert.equal(byCommand.frames[0], byAgent.frames[0]);
    assert.equal(parseSse(byCommand.frames[0]!)[0]!.id, '77-1');
    assert.equal(stderrOnly.frames.length, 0);
    assert.equal(other.frames.length, 0);
    fanout.onEmit(PublishFrameKind.kFrameOutputPublish, commandKey('a', 'c'), replay.end(0, 1));
    assert.ok(byCommand.closed, 'the command-scoped stream ends with its command');
    assert.match(byCommand.frames.at(-1)!, /"stream_end"/);
    assert.equal(byAgent.closed, false);
    assert.equal(fanout.stats().sseSubscribers, 3);
    await fanout.stop();
    assert.ok(byAgent.closed);
    assert.match(byAgent.frames.at(-1)!, /server_stopping/);
  });

  void test('chat frames reach their session; a terminal one ends it; other kinds are not ours', async () => {
    const { fanout, router } = await rig();
    fanout.onEmit(PublishFrameKind.kFrameOutputKnown, commandKey('a', 'c'), new Uint8Array(0));
    assert.equal(fanout.stats().indexedCommands, 1);
    const s = await open(router, '/api/v1/agent-output/chat?command_id=c&session_id=s');
    const other = await open(router, '/api/v1/agent-output/chat?command_id=c&session_id=t');
    fanout.onEmit(
      PublishFrameKind.kFrameChatPublish,
      chatTopic('c', 's'),
      encodeChatPublish(false, 's-1', enc.encode('id: s-1\nevent: delta\ndata: {}\n\n')),
    );
    fanout.onEmit(
      PublishFrameKind.kFrameChatPublish,
      chatTopic('c', 's'),
      encodeChatPublish(true, 's-2', enc.encode('id: s-2\nevent: done\ndata: {}\n\n')),
    );
    assert.deepEqual(
      parseSse(s.frames.join('')).map((e) => e.id),
      ['s-1', 's-2'],
    );
    assert.ok(s.closed);
    assert.equal(other.frames.length, 0);
    assert.equal(
      fanout.onEmit(48, commandKey('a', 'c'), new Uint8Array(40)),
      false,
      'command output frames belong to the agents component',
    );
    assert.equal(
      fanout.onEmit(PublishFrameKind.kFrameOutputPublish, commandKey('a', 'c'), new Uint8Array(3)),
      true,
      'malformed: dropped, not thrown',
    );
    fanout.onEmit(PublishFrameKind.kFrameOutputForget, commandKey('a', 'c'), new Uint8Array(0));
    assert.equal(fanout.stats().indexedCommands, 0);
    await fanout.stop();
  });

  void test('bad queries are 400 envelopes before any stream starts', async () => {
    const { fanout, router } = await rig();
    for (const url of [
      '/api/v1/agent-output/stream?replay=true',
      '/api/v1/agent-output/stream?limit=2000&command_id=c',
      '/api/v1/agent-output/chat',
    ]) {
      const res = await inject(router, { method: 'GET', url });
      assert.equal(res.status, 400, url);
      assert.equal((res.json() as { error: { code: string } }).error.code, 'request.invalid');
    }
    await fanout.stop();
  });
});

void describe('fanout parts', () => {
  void test('topics: a chunk is published to exactly the subscriptions that match it', () => {
    const filters = [undefined, 'a'].flatMap((agentId) =>
      [undefined, 'c'].flatMap((commandId) =>
        [undefined, 'stdout', 'stderr'].map((stream) => ({ agentId, commandId, stream: stream as 'stdout' | 'stderr' | undefined })),
      ),
    );
    const topics = new Set(outputPublishTopics('a', 'c', 'stdout'));
    for (const f of filters) assert.equal(topics.has(outputSubscriptionTopic(f)), f.stream !== 'stderr', JSON.stringify(f));
    const all = new Set(outputPublishTopicsAllStreams('a', 'c'));
    for (const f of filters) assert.ok(all.has(outputSubscriptionTopic(f)), 'a gap reaches every filter');
    const scoped = new Set(commandScopedTopics('a', 'c'));
    for (const f of filters) assert.equal(scoped.has(outputSubscriptionTopic(f)), f.commandId === 'c', JSON.stringify(f));
  });

  void test('the command index is bounded and forgets only what it still maps', () => {
    const idx = new CommandIndex(2);
    idx.learn('a', 'c1');
    idx.learn('a', 'c2');
    idx.learn('b', 'c3');
    assert.equal(idx.agentOf('c1'), undefined, 'oldest forgotten');
    idx.learn('b', 'c2');
    idx.forget('a', 'c2');
    assert.equal(idx.agentOf('c2'), 'b', 'moved to another agent: kept');
    idx.forget('b', 'c2');
    assert.equal(idx.size, 1);
  });

  void test('a chat projection keeps events by bytes; a join from before them is interrupted', () => {
    const p = new ChatProjection({ sessionId: 's', commandId: 'c', maxBytes: 300 });
    for (let i = 0; i < 10; i++) p.push(enc.encode(`not json ${i}\n`));
    assert.equal(p.seq, 10);
    assert.ok(p.firstKeptSeq > 1);
    const late = p.join(0);
    assert.equal(late.terminated, true);
    assert.match(new TextDecoder().decode(late.bytes), /STREAM_INTERRUPTED/);
    const recent = p.join(9);
    assert.equal(recent.events, 1);
    assert.equal(p.end().at(-1)?.terminal, true, 'no result line: NO_RESULT, terminal');
  });
});
