/**
 * A subscriber that stops reading is cut off with agent_output.error slow_subscriber (carrying
 * its cursor) while ten others on the same command receive every byte; the cut-off one resumes
 * from that cursor and gets exactly the rest.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { bytesOf, chunksOf, sha256, SseClient, StalledSseClient } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';

const AGENT = 'agent-slow-1';
const LINES = 1_500_000;

function seqText(n: number): string {
  const parts: string[] = [];
  for (let i = 1; i <= n; i++) parts.push(`${i}\n`);
  return parts.join('');
}

// Both modes: in inline mode the actors' frames are views of a reused buffer, which the fanout must copy.
for (const mode of ['workers', 'inline'] as const)
  void describe(`slow SSE subscribers (actors ${mode})`, () => {
    let ts: StreamingServer;
    before(async () => {
      // A small queue bound so the stalled client overflows long before the kernel buffers are the limit.
      ts = await startStreamingServer({
        env: { SVC_ACTORS: mode },
        sseQueueBytes: 256 * 1024,
        replay: { ringBytes: 64 * 1024 * 1024, budgetBytes: 512 * 1024 * 1024 },
      });
      await ts.agent(AGENT);
    });
    after(async () => {
      await ts.stop();
    });

    void test('a stalled client is cut off with its cursor; ten others receive everything', async () => {
      const path = `/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-flood`;
      const open = ts.http.openStreams().sse;
      const stalled = new StalledSseClient(ts.http.port, path);
      // The ten readers run in this process, on the server's own event loop, so they read only when
      // the server yields to I/O. That is what makes them fast readers in the product's sense (a
      // subscriber is slow when more than the bound waits although it was given the chance to read):
      // the actor pump yields to the loop after at most 64 KiB of emitted frames (worker-shard.ts,
      // kDrainTurnBytes), far below the 256 KiB bound. In workers mode on a loaded machine it used
      // to drain megabytes per turn without yielding, and cut these readers off as slow as well.
      const readers = await Promise.all(Array.from({ length: 10 }, () => SseClient.open(`${ts.base}${path}`)));
      // Every subscriber, the stalled one too, is subscribed before the command starts.
      await waitFor('the eleven streams to be open on the server', () => ts.http.openStreams().sse >= open + 11, {
        deadlineMs: DEADLINE_MS.local,
        lastState: () => `${ts.http.openStreams().sse - open} open`,
      });
      const slowCuts = async (): Promise<number> =>
        Number(/svc_output_slow_subscribers_total\{transport="sse"\} (\d+)/.exec(await ts.metricsText())?.[1] ?? 0);
      const cutsBefore = await slowCuts();
      await ts.run(AGENT, 'c-flood', `seq 1 ${LINES}`);
      // Read the stalled client as soon as the server cut it off: uWS drops a socket that takes
      // nothing for 10 s with what it still buffers, the notice included (on a loaded machine the
      // readers took longer than that, and the stalled client then saw only the connection end).
      await waitFor('the stalled client to be cut off (svc_output_slow_subscribers_total)', async () => (await slowCuts()) > cutsBefore, {
        deadlineMs: DEADLINE_MS.process,
        lastState: async () =>
          `${(await slowCuts()) - cutsBefore} cut off; the readers have ${readers.map((r) => bytesOf(r.events).length).join(', ')} bytes`,
      });
      const drained = stalled.drain();
      await Promise.all(readers.map((r) => r.ended));
      const expected = sha256(seqText(LINES));
      for (const [i, r] of readers.entries()) {
        const end = r.events.at(-1);
        const got = `it got ${bytesOf(r.events).length} of ${seqText(LINES).length} bytes in ${r.events.length} events, the last ${end?.event ?? 'none'} ${end?.data.slice(0, 300) ?? ''}`;
        assert.ok(!r.events.some((e) => e.data.includes('slow_subscriber')), `reader ${i} was not cut off; ${got}`);
        assert.equal(sha256(bytesOf(r.events)), expected, `reader ${i} received every byte; ${got}`);
        assert.equal(end?.event, 'agent_output.error');
        assert.ok(end?.data.includes('"stream_end"'), `reader ${i} ends with stream_end`);
      }

      const { events, closed } = await drained;
      stalled.destroy();
      assert.ok(closed, 'the server closed the stalled stream');
      const last = events.at(-1);
      assert.equal(last?.event, 'agent_output.error');
      const err = JSON.parse(last?.data ?? '{}') as { code: string; cursor?: string; max_queued_bytes: number };
      assert.equal(err.code, 'slow_subscriber');
      assert.equal(err.max_queued_bytes, 256 * 1024);
      const got = chunksOf(events);
      assert.ok(got.length > 0 && err.cursor !== undefined, 'it had received some output and is told where it stopped');
      assert.equal(got.at(-1)?.id, err.cursor, 'the cursor is the last event it received');
      assert.ok(got.length < chunksOf(readers[0]!.events).length, 'it did not get everything');

      const resumed = await SseClient.open(`${ts.base}${path}`, { 'last-event-id': err.cursor });
      await resumed.ended;
      assert.equal(
        sha256(Buffer.concat([bytesOf(events), bytesOf(resumed.events)])),
        expected,
        'resuming from the cursor gives exactly the rest',
      );

      const metrics = await ts.metricsText();
      assert.match(metrics, /svc_output_slow_subscribers_total\{transport="sse"\} [1-9]/);
    });
  });
