import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { HeartbeatSchedule } from '../../../../native-bench/scenarios/heartbeat-schedule.js';

/** Every beat as [agent, the time it was taken], polling the timetable every `stepMs` up to `untilMs`. */
function run(s: HeartbeatSchedule<string>, untilMs: number, stepMs: number): [string, number][] {
  const beats: [string, number][] = [];
  for (let now = 0; now <= untilMs; now += stepMs) s.takeDue(now, (agent) => beats.push([agent, now]));
  return beats;
}

describe('fleet bench: heartbeat timetable (heartbeat-schedule.ts)', () => {
  test('each agent beats once per interval at the phase of its registration, not in fleet-wide bursts', () => {
    const s = new HeartbeatSchedule<string>(1000);
    // registered at 0, 100, ..., 900 ms: ten agents spread over one interval
    for (let i = 0; i < 10; i++) s.add(`a${i}`, i * 100 + 1000);
    const beats = run(s, 3999, 10);
    // 3 full intervals: 30 beats, 3 per agent, each 1000 ms after the agent's previous one
    assert.equal(beats.length, 30);
    for (let i = 0; i < 10; i++) {
      assert.deepEqual(
        beats.filter(([a]) => a === `a${i}`).map(([, t]) => t),
        [1000, 2000, 3000].map((t) => t + i * 100),
      );
    }
    // never more than the agents actually due at one moment: here one per 100 ms
    const perPoll = new Map<number, number>();
    for (const [, t] of beats) perPoll.set(t, (perPoll.get(t) ?? 0) + 1);
    assert.equal(Math.max(...perPoll.values()), 1);
    assert.equal(s.size, 10);
  });

  test('a late wake-up sends what is due and keeps every agent on its own phase', () => {
    const s = new HeartbeatSchedule<string>(1000);
    s.add('a', 1000);
    s.add('b', 1300);
    const beats: [string, number][] = [];
    s.takeDue(1500, (agent) => beats.push([agent, 1500])); // woke 500 ms late: both due
    assert.deepEqual(beats, [
      ['a', 1500],
      ['b', 1500],
    ]);
    assert.equal(s.nextDueAt, 2000); // a's next beat is due 1000 ms after its last one was due
    s.takeDue(2000, (agent) => beats.push([agent, 2000]));
    s.takeDue(2300, (agent) => beats.push([agent, 2300]));
    assert.deepEqual(beats.slice(2), [
      ['a', 2000],
      ['b', 2300],
    ]);
  });

  test('an agent added with an earlier time than the last one waits behind it (order is kept)', () => {
    const s = new HeartbeatSchedule<string>(1000);
    s.add('a', 500);
    s.add('b', 400);
    const beats: string[] = [];
    s.takeDue(450, (agent) => beats.push(agent));
    assert.equal(beats.length, 0);
    s.takeDue(500, (agent) => beats.push(agent));
    assert.deepEqual(beats, ['a', 'b']);
  });

  test('thousands of agents over many intervals: each beats once per interval', () => {
    const s = new HeartbeatSchedule<number>(5000);
    const n = 3000;
    for (let i = 0; i < n; i++) s.add(i, 5000 + (i * 5000) / n);
    const count = new Map<number, number>();
    for (let now = 0; now < 5000 * 6; now += 1) s.takeDue(now, (i) => count.set(i, (count.get(i) ?? 0) + 1));
    // first due times spread over [5000, 10000), polled every ms below 30000: 5 beats each
    assert.equal(count.size, n);
    for (const c of count.values()) assert.equal(c, 5);
    assert.equal(s.size, n);
  });
});
