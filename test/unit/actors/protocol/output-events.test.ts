/**
 * The agent-output events built from a message (actors/protocol/output-events.ts): the
 * agent_output.error SSE events and the WS metrics and agent_status messages.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  encodeAgentStatusWs,
  encodeGapSse,
  encodeMetricsWs,
  encodeSlowSubscriberSse,
  encodeStreamEndSse,
} from '../../../../actors/protocol/output-events.js';
import { parseOne } from '../replay/sse-parse.js';

const dec = new TextDecoder();
const json = (b: Uint8Array): Record<string, unknown> => JSON.parse(dec.decode(b)) as Record<string, unknown>;

void describe('agent_output.error frames', () => {
  void test("output_gap names the command and seqs and carries the gap's cursor as id", () => {
    const f = parseOne(
      encodeGapSse({ agentId: 'a', commandId: 'c', fromSeq: 5, toSeq: 9, reason: 'agent_dropped', lostBytes: 1234, clock: 77 }),
    );
    assert.equal(f.event, 'agent_output.error');
    assert.equal(f.id, '77-9');
    assert.deepEqual(f.json, {
      schema: 'svc.agent_output.v1',
      event_type: 'agent_output.error',
      code: 'output_gap',
      message: 'output seq 5-9 of command c was dropped by the agent',
      agent_id: 'a',
      command_id: 'c',
      from_seq: 5,
      to_seq: 9,
      reason: 'agent_dropped',
      lost_bytes: 1234,
      cursor: '77-9',
    });
    const evicted = parseOne(encodeGapSse({ agentId: 'a', commandId: 'c', fromSeq: 1, toSeq: 2, reason: 'evicted', clock: 3 }));
    assert.equal(evicted.json.lost_bytes, undefined);
    assert.match(evicted.json.message as string, /no longer buffered/);
  });

  void test('slow_subscriber carries the cursor to resume from and no id', () => {
    const f = parseOne(encodeSlowSubscriberSse('10-4', 1 << 20));
    assert.equal(f.id, undefined);
    assert.equal(f.json.code, 'slow_subscriber');
    assert.equal(f.json.cursor, '10-4');
    assert.equal(f.json.max_queued_bytes, 1 << 20);
    assert.equal(parseOne(encodeSlowSubscriberSse(undefined, 5)).json.cursor, undefined);
  });

  void test('stream_end says why the stream ended', () => {
    const f = parseOne(encodeStreamEndSse({ reason: 'command_finished', agentId: 'a', commandId: 'c', exitCode: 3 }));
    assert.equal(f.id, undefined);
    assert.deepEqual(
      { code: f.json.code, reason: f.json.reason, exit_code: f.json.exit_code, message: f.json.message },
      { code: 'stream_end', reason: 'command_finished', exit_code: 3, message: 'command c finished with exit code 3' },
    );
    assert.equal(parseOne(encodeStreamEndSse({ reason: 'server_stopping' })).json.message, 'the server is stopping');
  });
});

void describe('WebSocket messages (spec 4.18)', () => {
  void test('metrics and agent_status', () => {
    assert.deepEqual(
      json(
        encodeMetricsWs({
          agentId: 'a',
          cpuPercent: 12.5,
          memoryUsedBytes: 1,
          memoryTotalBytes: 2,
          diskUsedBytes: 3,
          diskTotalBytes: 4,
          loadAvg: [0.5, 0.25, 0.125],
          timestampMs: 99,
        }),
      ),
      {
        type: 'metrics',
        agent_id: 'a',
        cpu_percent: 12.5,
        memory_used_bytes: 1,
        memory_total_bytes: 2,
        disk_used_bytes: 3,
        disk_total_bytes: 4,
        load_avg: [0.5, 0.25, 0.125],
        timestamp: 99,
      },
    );
    assert.deepEqual(json(encodeAgentStatusWs({ agentId: 'a', status: 'Ready', timestampMs: 5 })), {
      type: 'agent_status',
      agent_id: 'a',
      status: 'Ready',
      timestamp: 5,
    });
  });
});
