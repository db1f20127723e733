/**
 * OutputFlow: which commands the agent reads, under its marks, the server's pauses and the
 * connection state.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HIGH_WATER_BYTES, LOW_WATER_BYTES, OutputFlow } from '../../../src/guest-agent/output-flow.js';

const MiB = 1024 * 1024;

function bed(capacityBytes = 64 * MiB): {
  flow: OutputFlow;
  unsent: Map<string, number>;
  reading: Map<string, boolean>;
  calls: string[];
} {
  const unsent = new Map<string, number>();
  const reading = new Map<string, boolean>();
  const calls: string[] = [];
  const flow = new OutputFlow({
    capacityBytes,
    unsentOf: (id) => unsent.get(id) ?? 0,
    unsentTotal: () => [...unsent.values()].reduce((a, b) => a + b, 0),
    setReading: (id, on) => {
      reading.set(id, on);
      calls.push(`${id}:${on ? 'read' : 'pause'}`);
    },
  });
  return { flow, unsent, reading, calls };
}

void describe('OutputFlow', () => {
  void test('a command pauses at the high-water mark and resumes at the low one, with hysteresis', () => {
    const { flow, unsent, calls } = bed();
    flow.setConnected(true);
    unsent.set('a', HIGH_WATER_BYTES - 1);
    flow.check('a');
    assert.deepEqual(calls, []);
    unsent.set('a', HIGH_WATER_BYTES);
    flow.check('a');
    assert.deepEqual(calls, ['a:pause']);
    unsent.set('a', LOW_WATER_BYTES + 1);
    flow.afterSend();
    assert.deepEqual(calls, ['a:pause'], 'still above the low-water mark');
    unsent.set('a', LOW_WATER_BYTES);
    flow.afterSend();
    assert.deepEqual(calls, ['a:pause', 'a:read']);
    assert.equal(flow.pausedCount, 0);
  });

  void test('many commands each under their mark pause once the total passes a quarter of the buffer', () => {
    const { flow, unsent, reading } = bed(16 * MiB);
    flow.setConnected(true);
    for (let i = 0; i < 4; i++) {
      unsent.set(`c${i}`, HIGH_WATER_BYTES - 1);
      flow.check(`c${i}`);
    }
    // 4 × (2 MiB - 1) ≥ 4 MiB = 16 MiB / 4: the writers pause.
    assert.equal(reading.get('c3'), false);
    for (let i = 0; i < 4; i++) unsent.set(`c${i}`, 0);
    flow.afterSend();
    assert.equal(flow.pausedCount, 0);
  });

  void test('a server pause holds one command until the server resumes it; other commands are untouched', () => {
    const { flow, unsent, reading } = bed();
    flow.setConnected(true);
    flow.serverFlow('slow', true);
    assert.equal(reading.get('slow'), false);
    unsent.set('fast', MiB);
    flow.check('fast');
    assert.equal(reading.get('fast'), undefined, 'never paused');
    flow.afterSend();
    assert.equal(reading.get('slow'), false, 'no unsent output, still paused by the server');
    flow.serverFlow('slow', false);
    assert.equal(reading.get('slow'), true);
  });

  void test('disconnected: nothing pauses, paused commands resume, and server pauses end with the stream', () => {
    const { flow, unsent, reading } = bed();
    flow.setConnected(true);
    unsent.set('a', HIGH_WATER_BYTES * 4);
    flow.check('a');
    flow.serverFlow('b', true);
    assert.equal(flow.pausedCount, 2);
    flow.setConnected(false);
    assert.equal(flow.pausedCount, 0);
    assert.equal(reading.get('a'), true);
    assert.equal(reading.get('b'), true);
    flow.check('a');
    assert.equal(reading.get('a'), true, 'output waits in the buffer while disconnected');
    flow.setConnected(true);
    unsent.set('b', 0);
    flow.check('b');
    assert.equal(reading.get('b'), true, 'the old stream’s pause is gone');
  });
});
