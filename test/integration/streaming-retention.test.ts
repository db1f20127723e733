/**
 * Bounded buffers: a command whose output outgrows its replay ring replays an output_gap event
 * (reason evicted) naming the seqs it no longer has, then the rest; a resume from a cursor inside
 * the evicted output gets the gap too. After the retention period a finished command's output is
 * released: its stream ends with stream_end command_expired and its chat with STREAM_INTERRUPTED.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './agents-harness.js';
import { bytesOf, chunksOf, SseClient } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';

const AGENT = 'agent-retention-1';

void describe('replay bounds and retention', () => {
  let ts: StreamingServer;
  before(async () => {
    ts = await startStreamingServer({ replay: { ringBytes: 64 * 1024, retentionMs: 3000 } });
    await ts.agent(AGENT);
  });
  after(async () => {
    await ts.stop();
  });

  void test('output evicted from the ring is reported as a gap, never skipped', async () => {
    const live = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-big`);
    await ts.run(AGENT, 'c-big', 'for i in 1 2 3 4 5 6 7 8 9 10; do seq 1 2000; sleep 0.05; done');
    await live.ended;
    const liveChunks = chunksOf(live.events);
    assert.ok(liveChunks.length >= 5, `several chunks (${liveChunks.length})`);
    const replay = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-big&replay=true&limit=1000`);
    await replay.ended;
    const first = replay.events[0]!;
    assert.equal(first.event, 'agent_output.error');
    const gap = JSON.parse(first.data) as { code: string; reason: string; from_seq: number; to_seq: number; cursor: string };
    assert.equal(gap.code, 'output_gap');
    assert.equal(gap.reason, 'evicted');
    assert.equal(first.id, gap.cursor, 'the gap event has an id: a resume does not report it again');
    const kept = chunksOf(replay.events);
    assert.ok(kept.length > 0 && kept.length < liveChunks.length, `some chunks kept (${kept.length} of ${liveChunks.length})`);
    assert.equal(gap.to_seq + 1, Number(kept[0]!.id.split('-')[1]), 'the gap ends right before the first kept chunk');
    assert.ok(bytesOf(live.events).toString().endsWith(bytesOf(replay.events).toString()), 'the kept chunks are the newest output');

    const resumed = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-big`, { 'last-event-id': liveChunks[0]!.id });
    await resumed.ended;
    assert.equal(resumed.events[0]!.event, 'agent_output.error', 'a resume from inside the evicted output starts with the gap');
    assert.equal(JSON.parse(resumed.events[0]!.data).from_seq, 2);
    const metrics = await ts.metricsText();
    assert.match(metrics, /svc_output_gaps_reported_total\{where="replay"\} [1-9]/);
  });

  void test('after the retention period the output is released: stream_end command_expired, chat STREAM_INTERRUPTED', async () => {
    await ts.run(AGENT, 'c-expire', 'echo short-lived');
    await ts.result('c-expire');
    const soon = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-expire&replay=true`);
    await soon.ended;
    assert.equal(bytesOf(soon.events).toString(), 'short-lived\n');
    await waitFor(
      'the ring to be released',
      async () => {
        const s = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-expire&replay=true`);
        await s.ended;
        const end = s.events.at(-1);
        return end !== undefined && end.data.includes('"command_expired"') && chunksOf(s.events).length === 0;
      },
      20_000,
      250,
    );
    const chat = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=c-expire`);
    await chat.ended;
    assert.equal(chat.events.length, 1);
    assert.equal(chat.events[0]!.event, 'error');
    assert.equal(JSON.parse(chat.events[0]!.data).code, 'STREAM_INTERRUPTED');
  });
});
