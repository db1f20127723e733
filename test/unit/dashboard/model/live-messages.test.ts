import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseLiveMessage } from '../../../../src/dashboard/model/live-messages.js';

describe('dashboard live messages', () => {
  test('the spec 4.18 messages parse', () => {
    const m = parseLiveMessage(
      JSON.stringify({
        type: 'metrics',
        agent_id: 'a',
        cpu_percent: 1.5,
        memory_used_bytes: 1,
        memory_total_bytes: 2,
        disk_used_bytes: 3,
        disk_total_bytes: 4,
        load_avg: [0.1, 0.2, 0.3],
        timestamp: 99,
      }),
    );
    assert.equal(m?.type, 'metrics');
    assert.deepEqual(parseLiveMessage('{"type":"agent_status","agent_id":"a","status":"Ready","timestamp":5}'), {
      type: 'agent_status',
      agent_id: 'a',
      status: 'Ready',
      timestamp: 5,
    });
    assert.equal(
      parseLiveMessage('{"type":"output","agent_id":"a","stream_id":"c","stream_type":"stdout","data":"aGk=","timestamp":1}')?.type,
      'output',
    );
    assert.deepEqual(parseLiveMessage('{"type":"server_hello","conn_id":1}'), { type: 'server_hello' });
  });

  test('malformed or unknown messages are null, never a throw', () => {
    for (const t of [
      '',
      'nope',
      '[]',
      'null',
      '{"type":"metrics","agent_id":1}',
      '{"type":"metrics","agent_id":"a","cpu_percent":"hi"}',
      '{"type":"whatever"}',
      '{"type":"agent_status","agent_id":"a"}',
    ]) {
      assert.equal(parseLiveMessage(t), null, t);
    }
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (text) => {
        const m = parseLiveMessage(text);
        assert.ok(m === null || typeof m.type === 'string');
      }),
    );
  });
});
