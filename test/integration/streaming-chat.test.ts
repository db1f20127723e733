/**
 * GET /api/v1/agent-output/chat over real commands that print the recorded-style stream-json
 * fixtures (test/fixtures/stream-json): the expected events with ids `{session}-{seq}`, live and
 * replayed, Last-Event-ID resume, STREAM_INTERRUPTED for unknown commands, 400 for bad queries.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot } from '../support/paths.js';
import { SseClient, type SseEvent } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';

const AGENT = 'agent-chat-1';
const dir = join(repoRoot, 'test', 'fixtures', 'stream-json');

interface Expected {
  session_id: string;
  command_id: string;
  events: Array<{ id: string; event: string; data: unknown }>;
}

function expectedOf(name: string): Expected {
  return JSON.parse(readFileSync(join(dir, `${name}.expected.json`), 'utf8')) as Expected;
}

function asEvents(events: readonly SseEvent[]): Array<{ id: string | undefined; event: string; data: unknown }> {
  return events.map((e) => ({ id: e.id, event: e.event, data: JSON.parse(e.data) as unknown }));
}

void describe('chat projection', () => {
  let ts: StreamingServer;
  before(async () => {
    ts = await startStreamingServer();
    await ts.agent(AGENT);
  });
  after(async () => {
    await ts.stop();
  });

  for (const name of ['fix-failing-test', 'api-error', 'noisy-no-result']) {
    void test(`${name}: live and replayed events are the fixture's`, async () => {
      const exp = expectedOf(name);
      const file = join(dir, `${name}.ndjson`);
      // Printed in two halves with a pause, so lines are split across chunks.
      await ts.run(AGENT, exp.command_id, `sleep 0.3; head -c 700 '${file}'; sleep 0.2; tail -c +701 '${file}'`);
      const live = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=${exp.command_id}&session_id=${exp.session_id}`);
      assert.equal(live.status, 200);
      await live.ended;
      assert.deepEqual(asEvents(live.events), exp.events);

      const replay = await SseClient.open(
        `${ts.base}/api/v1/agent-output/chat?command_id=${exp.command_id}&session_id=${exp.session_id}&replay=true`,
      );
      await replay.ended;
      assert.deepEqual(asEvents(replay.events), exp.events, 'replay=true: the same events');

      const cut = 2;
      const resumed = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=${exp.command_id}`, {
        'last-event-id': exp.events[cut - 1]!.id,
      });
      await resumed.ended;
      assert.deepEqual(asEvents(resumed.events), exp.events.slice(cut), 'Last-Event-ID: the events after it (session from the cursor)');
    });
  }

  void test('a second session of the same command has its own ids', async () => {
    const exp = expectedOf('api-error');
    const other = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=${exp.command_id}&session_id=review&replay=true`);
    await other.ended;
    assert.deepEqual(
      other.events.map((e) => e.id),
      exp.events.map((_, i) => `review-${i + 1}`),
    );
    const defaultSession = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=${exp.command_id}&replay=true`);
    await defaultSession.ended;
    assert.equal(defaultSession.events[0]?.id, `${exp.command_id}-1`, 'no session_id: the command id');
  });

  void test('an unknown command ends with STREAM_INTERRUPTED', async () => {
    const s = await SseClient.open(`${ts.base}/api/v1/agent-output/chat?command_id=never-ran&session_id=s1`, { 'last-event-id': 's1-4' });
    await s.ended;
    assert.equal(s.events.length, 1);
    assert.equal(s.events[0]!.event, 'error');
    assert.equal(s.events[0]!.id, 's1-5');
    const data = JSON.parse(s.events[0]!.data) as Record<string, unknown>;
    assert.equal(data['code'], 'STREAM_INTERRUPTED');
    assert.equal(data['session_id'], 's1');
  });

  void test('bad queries are 400 envelopes', async () => {
    for (const q of [
      '',
      '?session_id=x',
      '?command_id=',
      '?command_id=a&replay=maybe',
      '?command_id=a&session_id=s1&last_event_id=s2-3',
      '?command_id=a&last_event_id=nope',
    ]) {
      const res = await fetch(`${ts.base}/api/v1/agent-output/chat${q}`);
      assert.equal(res.status, 400, q);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'request.invalid', q);
    }
    const post = await fetch(`${ts.base}/api/v1/agent-output/chat?command_id=a`, { method: 'POST' });
    assert.equal(post.status, 405, 'read-only: no input through the chat route');
  });
});
