/**
 * Ordering across agent reconnects: while a command prints, the network between the agent and
 * the server is cut twice (a TCP relay drops every connection and refuses new ones for a while).
 * The agent reconnects and resends what the server had not acknowledged; SSE subscribers see
 * every byte once, in seq order, without a gap, and a replay afterwards is the same.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseOutputCursor } from '../../actors/protocol/output-cursor.js';
import { waitFor } from './agents-harness.js';
import { bytesOf, chunksOf, sha256, SseClient } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';
import { Relay } from '../support/tcp-relay.js';

const AGENT = 'agent-reconnect-1';
const LINES = 80;

void describe('agent output across agent reconnects', () => {
  let ts: StreamingServer;
  let relay: Relay;
  before(async () => {
    ts = await startStreamingServer();
    relay = new Relay({ host: '127.0.0.1', port: Number(ts.grpcTarget.split(':')[1]) });
    await relay.listen();
    await ts.agent(AGENT, { server: `127.0.0.1:${relay.port}` });
  });
  after(async () => {
    await relay.close();
    await ts.stop();
  });

  void test('every byte once, in order, while the agent reconnects twice', async () => {
    const commandScoped = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-rc`);
    const agentScoped = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}`);
    await ts.run(AGENT, 'c-rc', `i=0; while [ $i -lt ${LINES} ]; do i=$((i+1)); echo line-$i; sleep 0.05; done`);
    for (const line of ['line-15\n', 'line-45\n']) {
      await commandScoped.until(line, (evs) => bytesOf(evs).toString().includes(line));
      relay.cut();
      await waitFor('the agent to be seen disconnected', () => ts.agents.registry.get(AGENT)?.status === 'Disconnected', 30_000);
      // The outage itself: 600 ms in which the agent keeps the command's output.
      await sleep(600);
      relay.restore();
      await waitFor('the agent back', () => ts.agents.registry.get(AGENT)?.status === 'Ready', 30_000);
    }
    assert.equal(await ts.result('c-rc'), 0);
    await commandScoped.ended;
    const expected = Array.from({ length: LINES }, (_, i) => `line-${i + 1}\n`).join('');
    for (const [name, client] of [
      ['command', commandScoped],
      ['agent', agentScoped],
    ] as const) {
      await client.until(`${name}: all output`, (evs) => bytesOf(evs).toString() === expected, 30_000);
      const chunks = chunksOf(client.events);
      const cursors = chunks.map((c) => parseOutputCursor(c.id)!);
      const seqs = cursors.map((c) => c.seq);
      assert.deepEqual(
        seqs,
        Array.from({ length: seqs.length }, (_, i) => i + 1),
        `${name}: seqs 1..n, each once, in order`,
      );
      const clocks = cursors.map((c) => c.clock);
      assert.deepEqual(
        clocks,
        [...clocks].sort((a, b) => a - b),
        `${name}: clocks increase`,
      );
      assert.ok(!client.events.some((e) => e.data.includes('output_gap')), `${name}: no gap`);
    }
    agentScoped.close();
    const replay = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-rc&replay=true&limit=1000`);
    await replay.ended;
    assert.equal(sha256(bytesOf(replay.events)), sha256(expected), 'the replay is the same bytes');
  });
});
