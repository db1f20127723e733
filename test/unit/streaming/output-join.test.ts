/**
 * Joining agent-output and chat streams (src/streaming/output-join.ts) against a scripted agent
 * actor: which call is made, how pages, finished, expired and unknown commands, failures and
 * unfiltered resumes end up on the stream, and the chat rules (STREAM_INTERRUPTED, terminal).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { ChatAnswer, ReplayAnswer } from '../../../actors/protocol/output-calls.js';
import { chatTopic } from '../../../actors/protocol/publish-frames.js';
import { SvcError } from '../../../src/core/errors.js';
import { ReplayBufferPool } from '../../../actors/replay/replay-buffers.js';
import { MemorySseSink } from '../../../src/http/inject.js';
import type { SseSink } from '../../../src/http/types.js';
import { CommandIndex } from '../../../src/streaming/command-index.js';
import { FanoutMetrics } from '../../../src/streaming/fanout-metrics.js';
import { OutputJoins } from '../../../src/streaming/output-join.js';
import { outputSubscriptionTopic } from '../../../src/streaming/output-topics.js';
import { parseAgentOutputQuery, parseChatQuery } from '../../../src/streaming/query.js';
import { SseTopics } from '../../../src/streaming/sse-topics.js';
import { parseSse } from '../actors/replay/sse-parse.js';

const enc = new TextEncoder();
const frame = (id: string): Uint8Array => enc.encode(`id: ${id}\nevent: agent_output.replay\ndata: {}\n\n`);

function answer(over: Partial<ReplayAnswer>): ReplayAnswer {
  return { state: 'running', bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: false, clock: 0, ...over };
}

function rig(respond: (method: string, args: Record<string, unknown>) => unknown) {
  const calls: Array<{ id: string; method: string; args: Record<string, unknown> }> = [];
  const outputTopics = new SseTopics();
  const chatTopics = new SseTopics();
  const index = new CommandIndex();
  const metrics = new FanoutMetrics(new Registry(), {
    sseSubscribers: () => 0,
    wsConnections: () => 0,
    replay: () => Promise.resolve(null),
  });
  const joins = new OutputJoins({
    actors: {
      call: <T>(id: string, method: string, args?: unknown): Promise<T> => {
        calls.push({ id, method, args: args as Record<string, unknown> });
        try {
          return Promise.resolve(respond(method, args as Record<string, unknown>) as T);
        } catch (err) {
          return Promise.reject(err instanceof Error ? err : new Error(String(err)));
        }
      },
    },
    index,
    outputTopics,
    chatTopics,
    metrics,
    logger: pino({ level: 'silent' }),
    subscriberQueueBytes: 1 << 20,
  });
  const q = (qs: string, headers: Record<string, string> = {}) => parseAgentOutputQuery(new URLSearchParams(qs), headers);
  return { calls, joins, index, outputTopics, chatTopics, q };
}

const events = (sink: MemorySseSink) => parseSse(sink.frames.join(''));

void describe('OutputJoins: agent_output', () => {
  void test('a finished command: its replay, then stream_end, closed; held live frames dropped', async () => {
    const r = rig(() =>
      answer({
        state: 'finished',
        bytes: frame('10-1'),
        events: 1,
        chunks: 1,
        last: '10-1',
        clock: 10,
        end: enc.encode('event: agent_output.error\ndata: {"code":"stream_end"}\n\n'),
      }),
    );
    const sink = new MemorySseSink();
    await r.joins.joinOutput(sink, r.q('agent_id=a&command_id=c&replay=true'));
    assert.deepEqual(
      r.calls.map((c) => [c.id, c.method, c.args['mode']]),
      [['agent:a', 'output.replay', 'tail']],
    );
    assert.deepEqual(
      events(sink).map((e) => e.id ?? e.event),
      ['10-1', 'agent_output.error'],
    );
    assert.ok(sink.closed);
  });

  void test('no replay asked: a finished command still delivers the frames that came after subscribing, then ends once', async () => {
    const end = enc.encode('event: agent_output.error\ndata: {"code":"stream_end"}\n\n');
    const r = rig(() => answer({ state: 'finished', clock: 20, end }));
    const sink = new MemorySseSink();
    const topic = outputSubscriptionTopic({ agentId: 'a', commandId: 'c' });
    const join = r.joins.joinOutput(sink, r.q('agent_id=a&command_id=c'));
    r.outputTopics.publish(topic, frame('19-9'), '19-9');
    r.outputTopics.publishEnd(topic, end);
    await join;
    assert.deepEqual(
      events(sink).map((e) => e.id ?? e.event),
      ['19-9', 'agent_output.error'],
    );
    assert.ok(sink.closed);
  });

  void test('pages: a resume is fetched page by page after the last id; live frames above the clock follow', async () => {
    const pages = [
      answer({ bytes: frame('5-6'), events: 1, chunks: 1, last: '5-6', more: true, clock: 8 }),
      answer({ bytes: frame('6-7'), events: 1, chunks: 1, last: '6-7', clock: 9 }),
    ];
    const r = rig(() => pages.shift());
    const sink = new MemorySseSink();
    const topic = outputSubscriptionTopic({ agentId: 'a', commandId: 'c' });
    const join = r.joins.joinOutput(sink, r.q('agent_id=a&command_id=c&limit=1', { 'last-event-id': '4-5' }));
    r.outputTopics.publish(topic, frame('9-8'), '9-8'); // emitted before the last call: covered
    r.outputTopics.publish(topic, frame('10-9'), '10-9'); // after: new
    await join;
    assert.deepEqual(
      r.calls.map((c) => [c.args['mode'], c.args['afterSeq'], c.args['limit']]),
      [
        ['after', 5, 1],
        ['after', 6, 1],
      ],
    );
    assert.deepEqual(
      events(sink).map((e) => e.id),
      ['5-6', '6-7', '10-9'],
    );
  });

  void test('a page in a buffer the shard lent is given back once written', async () => {
    const pool = new ReplayBufferPool({ slots: 1 });
    const lent = (id: string, last: string): ReplayAnswer => {
      const f = frame(id);
      const b = pool.take(f.byteLength, true);
      b.bytes.set(f);
      return answer({ bytes: b.bytes, ...(b.lease !== undefined && { lease: b.lease }), events: 1, chunks: 1, last, clock: 10 });
    };
    // A copying sink: the lent buffer is written as is, then free for the next replay.
    const r = rig(() => lent('10-1', '10-1'));
    const sink = new MemorySseSink();
    await r.joins.joinOutput(sink, r.q('agent_id=a&command_id=c&replay=true'));
    assert.deepEqual(
      events(sink).map((e) => e.id),
      ['10-1'],
    );
    assert.ok(pool.take(10, true).lease !== undefined, 'the join released the buffer');
    assert.equal(pool.fresh, 0);
  });

  void test('a sink that does not copy keeps its own copy of a lent page, unchanged when the shard reuses the buffer', async () => {
    const pool = new ReplayBufferPool({ slots: 1 });
    const f = frame('10-1');
    const r = rig(() => {
      const b = pool.take(f.byteLength, true);
      b.bytes.set(f);
      return answer({ bytes: b.bytes, ...(b.lease !== undefined && { lease: b.lease }), events: 1, chunks: 1, last: '10-1', clock: 10 });
    });
    const kept: Uint8Array[] = [];
    const sink = new MemorySseSink();
    const byReference: SseSink = {
      write: (frame) => {
        if (typeof frame !== 'string') kept.push(frame);
        return sink.write(frame);
      },
      onWritable: (cb) => sink.onWritable(cb),
      onClose: (cb) => sink.onClose(cb),
      close: () => sink.close(),
      get closed() {
        return sink.closed;
      },
      bufferedBytes: () => sink.bufferedBytes(),
    };
    await r.joins.joinOutput(byReference, r.q('agent_id=a&command_id=c&replay=true'));
    const reused = pool.take(f.byteLength, true);
    assert.ok(reused.lease !== undefined, 'released after the copy');
    reused.bytes.fill(0x78);
    assert.equal(kept.length, 1);
    assert.deepEqual([...(kept[0] as Uint8Array)], [...f]);
  });

  void test('command_id alone finds the agent from the index; an unknown command stays live', async () => {
    const r = rig(() => answer({ state: 'unknown', clock: 3 }));
    r.index.learn('a', 'c');
    const sink = new MemorySseSink();
    await r.joins.joinOutput(sink, r.q('command_id=c'));
    assert.equal(r.calls[0]?.id, 'agent:a');
    r.outputTopics.publish(outputSubscriptionTopic({ commandId: 'c' }), frame('1-1'), '1-1');
    assert.deepEqual(
      events(sink).map((e) => e.id),
      ['1-1'],
    );
    assert.equal(sink.closed, false);
  });

  void test('an expired command ends with stream_end command_expired', async () => {
    const r = rig(() => answer({ state: 'expired' }));
    const sink = new MemorySseSink();
    await r.joins.joinOutput(sink, r.q('agent_id=a&command_id=gone&replay=true'));
    assert.equal(JSON.parse(events(sink)[0]!.data).reason, 'command_expired');
    assert.ok(sink.closed);
  });

  void test('no actor: live; a failing actor: replay_unavailable with the cursor, closed', async () => {
    const none = rig(() => {
      throw new SvcError('actor.not_found', 'no actor');
    });
    const s1 = new MemorySseSink();
    await none.joins.joinOutput(s1, none.q('agent_id=a&command_id=c&replay=true'));
    assert.equal(s1.closed, false);
    const broken = rig(() => {
      throw new SvcError('server.timeout', 'slow');
    });
    const s2 = new MemorySseSink();
    await broken.joins.joinOutput(s2, broken.q('agent_id=a&command_id=c', { 'last-event-id': '7-7' }));
    const e = JSON.parse(events(s2)[0]!.data) as { code: string; cursor: string };
    assert.deepEqual([e.code, e.cursor], ['replay_unavailable', '7-7']);
    assert.ok(s2.closed);
  });

  void test('agent-scoped resume merges by clock; unfiltered resume is announced as not exact', async () => {
    const r = rig(() => answer({ bytes: frame('11-2'), events: 1, chunks: 1, last: '11-2', clock: 12 }));
    const sink = new MemorySseSink();
    await r.joins.joinOutput(sink, r.q('agent_id=a', { 'last-event-id': '10-1' }));
    assert.deepEqual(
      r.calls.map((c) => [c.method, c.args['after']]),
      [['output.replayAgent', { clock: 10, seq: 1 }]],
    );
    const all = new MemorySseSink();
    await r.joins.joinOutput(all, r.q('', { 'last-event-id': '10-1' }));
    assert.equal(JSON.parse(events(all)[0]!.data).code, 'resume_not_exact');
    assert.equal(r.calls.length, 1, 'no call for an unfiltered stream');
  });
});

void describe('OutputJoins: chat', () => {
  const chatFrame = (id: string): Uint8Array => enc.encode(`id: ${id}\nevent: delta\ndata: {}\n\n`);

  void test('an unknown command: one STREAM_INTERRUPTED error continuing the cursor, closed', async () => {
    const r = rig(() => undefined);
    const sink = new MemorySseSink();
    await r.joins.joinChat(sink, parseChatQuery(new URLSearchParams('command_id=c&session_id=s'), { 'last-event-id': 's-4' }));
    const e = events(sink);
    assert.equal(e.length, 1);
    assert.equal(e[0]!.id, 's-5');
    assert.equal(JSON.parse(e[0]!.data).code, 'STREAM_INTERRUPTED');
    assert.ok(sink.closed);
    assert.equal(r.calls.length, 0);
  });

  void test('replay, then the live events above the answer; a terminated projection closes', async () => {
    const r = rig(
      (_m, args) =>
        ({
          state: 'running',
          bytes: chatFrame('s-1'),
          events: 1,
          lastSeq: 2,
          terminated: args['sessionId'] === 'done',
        }) satisfies ChatAnswer,
    );
    r.index.learn('a', 'c');
    const sink = new MemorySseSink();
    const join = r.joins.joinChat(sink, parseChatQuery(new URLSearchParams('command_id=c&session_id=s&replay=true'), {}));
    r.chatTopics.publish(chatTopic('c', 's'), chatFrame('s-2'), 's-2');
    r.chatTopics.publish(chatTopic('c', 's'), chatFrame('s-3'), 's-3');
    await join;
    assert.deepEqual(r.calls[0]?.args, { commandId: 'c', sessionId: 's', afterSeq: 0 });
    assert.deepEqual(
      events(sink).map((e) => e.id),
      ['s-1', 's-3'],
    );
    const done = new MemorySseSink();
    await r.joins.joinChat(done, parseChatQuery(new URLSearchParams('command_id=c&session_id=done'), {}));
    assert.equal(r.calls[1]?.args['afterSeq'], null, 'replay=false: live only');
    assert.ok(done.closed);
  });
});
