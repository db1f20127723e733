/**
 * GET /api/v1/agent-output/stream against real sandbox-agent processes: live output in order
 * with ids, replay=true giving the same bytes as the live stream (sha256), the 1000-chunk replay
 * limit, Last-Event-ID resuming exactly after an event, UTF-8 characters split across chunks,
 * finished and expired commands ending the stream, and the metrics.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseOutputCursor } from '../../actors/protocol/output-cursor.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { bytesOf, chunksOf, sha256, SseClient } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';

const AGENT = 'agent-out-1';

/** `seq 1 n` as the shell prints it. */
function seqText(n: number): string {
  let s = '';
  for (let i = 1; i <= n; i++) s += `${i}\n`;
  return s;
}

void describe('agent output SSE', () => {
  let ts: StreamingServer;
  before(async () => {
    ts = await startStreamingServer();
    await ts.agent(AGENT);
  });
  after(async () => {
    await ts.stop();
  });

  void test('live output arrives in order with ids; a replay afterwards is the same bytes', async () => {
    const live = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-live`);
    assert.equal(live.status, 200);
    // Two bursts with a pause, so the output comes as several chunks.
    await ts.run(AGENT, 'c-live', 'seq 1 20000; sleep 0.2; seq 20001 40000 >&2; sleep 0.2; seq 40001 60000');
    await live.until('stream_end', (evs) => evs.some((e) => e.event === 'agent_output.error' && e.data.includes('"stream_end"')));
    await live.ended;
    const chunks = chunksOf(live.events);
    assert.ok(chunks.length >= 3, `several chunks (${chunks.length})`);
    const cursors = chunks.map((c) => parseOutputCursor(c.id));
    assert.ok(
      cursors.every((c) => c !== null),
      'every chunk has an id <clock>-<seq>',
    );
    const seqs = cursors.map((c) => c?.seq ?? -1);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'in seq order',
    );
    assert.equal(new Set(seqs).size, seqs.length, 'each seq once');
    for (const c of chunks) {
      assert.equal(c['schema'], 'svc.agent_output.v1');
      assert.equal(c['agent_id'], AGENT);
      assert.equal(c['command_id'], 'c-live');
      assert.equal(Buffer.from(String(c['data_base64']), 'base64').toString('utf8'), c['text'], 'ASCII output: text is the bytes');
    }
    const all = seqText(60000);
    const stdout = seqText(20000) + all.slice(seqText(40000).length);
    assert.equal(bytesOf(live.events, 'stdout').toString(), stdout);
    assert.equal(bytesOf(live.events, 'stderr').toString(), all.slice(seqText(20000).length, seqText(40000).length));
    const end = JSON.parse(live.named('agent_output.error').at(-1)!.data) as Record<string, unknown>;
    assert.equal(end['code'], 'stream_end');
    assert.equal(end['exit_code'], 0);

    const replay = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-live&replay=true&limit=1000`);
    await replay.ended;
    const replayed = replay.named('agent_output.replay');
    assert.equal(replayed.length, chunks.length, 'the whole command was replayed');
    assert.deepEqual(
      replayed.map((e) => e.id),
      chunks.map((c) => c.id),
      'the same event ids',
    );
    assert.equal(sha256(bytesOf(replay.events)), sha256(bytesOf(live.events)), 'replay bytes = live bytes (sha256)');
    const texts = (evs: typeof replay.events): string[] => evs.map((e) => (JSON.parse(e.data) as { text: string }).text);
    assert.deepEqual(texts(replayed), texts(live.named('agent_output')), 'the same text');
    assert.equal(replay.events.at(-1)?.event, 'agent_output.error', 'a finished command ends the replay with stream_end');
  });

  void test('stream filter and command_id without agent_id', async () => {
    await ts.run(AGENT, 'c-filter', 'echo out; echo err >&2; echo out2');
    await ts.result('c-filter');
    const only = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-filter&stream=stderr&replay=true`);
    await only.ended;
    assert.equal(bytesOf(only.events).toString(), 'err\n');
    assert.ok(chunksOf(only.events).every((c) => c['stream'] === 'stderr'));
  });

  void test('replay is limited to `limit` chunks (default 100, at most 1000), the newest ones', async () => {
    // More than 1000 chunks: a pause after each line keeps the agent from merging most of them,
    // but a busy machine merges more, so the command writes until the live stream has seen 1100
    // chunks (a fixed 1100 lines gave 970 chunks under load).
    const dir = await mkdtemp(join(tmpdir(), 'sbx-many-'));
    const stop = join(dir, 'stop');
    const live = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-many`);
    try {
      await ts.run(AGENT, 'c-many', `i=0; while [ ! -e '${stop}' ]; do i=$((i+1)); echo "line $i"; sleep 0.002; done`);
      await live.until('1100 chunks of c-many', (evs) => chunksOf(evs).length >= 1100, DEADLINE_MS.endToEnd);
      await writeFile(stop, '');
      await ts.result('c-many', DEADLINE_MS.endToEnd);
      await live.ended;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const liveChunks = chunksOf(live.events);
    const all = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-many&replay=true&limit=1000`);
    await all.ended;
    const chunks = chunksOf(all.events);
    assert.equal(chunks.length, 1000, `exactly 1000 chunks of the ${liveChunks.length}`);
    assert.deepEqual(
      chunks.map((c) => c.id),
      liveChunks.slice(-1000).map((c) => c.id),
      'the newest ones',
    );
    const byDefault = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?command_id=c-many&replay=true`);
    await byDefault.ended;
    assert.equal(chunksOf(byDefault.events).length, 100, 'default limit 100');
    const few = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-many&replay=true&limit=2`);
    await few.ended;
    assert.deepEqual(
      chunksOf(few.events).map((c) => c.id),
      chunks.slice(-2).map((c) => c.id),
      'the newest chunks',
    );
    const over = await fetch(`${ts.base}/api/v1/agent-output/stream?command_id=c-many&replay=true&limit=1001`);
    assert.equal(over.status, 400);
    assert.equal(((await over.json()) as { error: { code: string } }).error.code, 'request.invalid');
  });

  void test('Last-Event-ID resumes exactly after the event', async () => {
    await ts.run(AGENT, 'c-resume', 'for i in 1 2 3 4 5 6 7 8; do seq 1 3000; sleep 0.05; done');
    await ts.result('c-resume');
    const full = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-resume&replay=true&limit=1000`);
    await full.ended;
    const chunks = chunksOf(full.events);
    assert.ok(chunks.length >= 4, `several chunks (${chunks.length})`);
    const cut = Math.floor(chunks.length / 2);
    const resumed = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-resume`, {
      'last-event-id': chunks[cut - 1]!.id,
    });
    await resumed.ended;
    assert.deepEqual(
      chunksOf(resumed.events).map((c) => c.id),
      chunks.slice(cut).map((c) => c.id),
      'exactly the events after the cursor',
    );
    assert.equal(
      sha256(Buffer.concat([bytesOf(full.events.filter((e) => chunks.slice(0, cut).some((c) => c.id === e.id))), bytesOf(resumed.events)])),
      sha256(bytesOf(full.events)),
    );
    // The same through the query parameter, in pages of 1.
    const paged = await SseClient.open(
      `${ts.base}/api/v1/agent-output/stream?command_id=c-resume&limit=1&last_event_id=${encodeURIComponent(chunks[0]!.id)}`,
    );
    await paged.ended;
    assert.deepEqual(
      chunksOf(paged.events).map((c) => c.id),
      chunks.slice(1).map((c) => c.id),
      'paged catch-up',
    );
  });

  void test('a UTF-8 character split across chunks is whole in the chunk where it ends', async () => {
    await ts.run(AGENT, 'c-utf8', "printf 'price: \\342\\202'; sleep 0.3; printf '\\254 \\360\\237\\230'; sleep 0.3; printf '\\200 ok\\n'");
    await ts.result('c-utf8');
    const s = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-utf8&replay=true`);
    await s.ended;
    const chunks = chunksOf(s.events);
    assert.ok(chunks.length >= 3, `three chunks (${chunks.length})`);
    assert.equal(bytesOf(s.events).toString('utf8'), 'price: € 😀 ok\n');
    assert.equal(chunks.map((c) => c['text']).join(''), 'price: € 😀 ok\n', 'no U+FFFD, nothing doubled');
    assert.equal(chunks[0]!['text'], 'price: ');
    assert.ok(!chunks.some((c) => String(c['text']).includes('\ufffd')));
  });

  void test('subscribing before the command starts, and to a command that never ran', async () => {
    const open = ts.http.openStreams().sse;
    const early = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=c-later`);
    // Subscribed before the command starts (the join subscribes before it answers the head).
    await waitFor('the stream to be open on the server', () => ts.http.openStreams().sse > open, { deadlineMs: DEADLINE_MS.local });
    await ts.run(AGENT, 'c-later', 'echo hello later');
    await early.ended;
    assert.equal(bytesOf(early.events).toString(), 'hello later\n');
    const agentWide = await SseClient.open(`${ts.base}/api/v1/agent-output/stream?agent_id=${AGENT}`);
    await ts.run(AGENT, 'c-agentwide', 'echo one');
    await agentWide.until('output', (evs) => bytesOf(evs).toString().includes('one\n'));
    assert.ok(!agentWide.events.some((e) => e.data.includes('stream_end')), 'agent-scoped streams do not end with a command');
    agentWide.close();
  });

  void test('bad query parameters are 400 envelopes naming the parameter', async () => {
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ['replay=true', {}, /command_id/],
      ['command_id=c&limit=0', {}, /limit/],
      ['command_id=c&limit=1001', {}, /limit/],
      ['command_id=c&limit=ten', {}, /limit/],
      ['stream=video', {}, /stream/],
      ['replay=yes&command_id=c', {}, /replay/],
      ['agent_id=', {}, /agent_id/],
      ['agent_id=a&agent_id=b', {}, /agent_id/],
      ['command_id=%07bell', {}, /command_id/],
      ['command_id=c', { 'last-event-id': 'not-a-cursor' }, /Last-Event-ID/],
      ['command_id=c&last_event_id=12', {}, /Last-Event-ID/],
    ];
    for (const [q, headers, message] of cases) {
      const res = await fetch(`${ts.base}/api/v1/agent-output/stream?${q}`, { headers });
      assert.equal(res.status, 400, q);
      const body = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'request.invalid', q);
      assert.match(body.error.message, message, q);
    }
  });

  void test('metrics of the fanout are exported', async () => {
    const text = await ts.metricsText();
    for (const name of [
      'svc_output_sse_subscribers',
      'svc_output_ws_connections',
      'svc_output_slow_subscribers_total',
      'svc_output_gaps_reported_total',
      'svc_output_replay_ring_bytes',
      'svc_output_replay_rings',
      'svc_output_frames_published_total',
      'svc_output_replays_total',
    ]) {
      assert.ok(text.includes(`# TYPE ${name} `), `${name} is exported`);
    }
    const ringBytes = Number(/^svc_output_replay_ring_bytes (\d+)/m.exec(text)?.[1]);
    assert.ok(ringBytes > 0, 'the replay rings hold the output of the commands above');
    // Counted in plain numbers and added when scraped: the chunks above are in it, and a second scrape adds nothing twice.
    const framesOf = (t: string): number => Number(/^svc_output_frames_published_total\{transport="sse"\} (\d+)/m.exec(t)?.[1]);
    const frames = framesOf(text);
    assert.ok(frames > 0, 'the chunks of the commands above were published');
    assert.equal(framesOf(await ts.metricsText()), frames, 'no new chunk, no new count');
  });
});
