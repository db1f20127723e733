import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { VM_STATES, type VmState } from '../../../src/hypervisor/port.js';
import { transitionEvents, type Observation } from '../../../src/hypervisor/state-events.js';

const o = (state: VmState, id: number | null = state === 'stopped' ? null : 1): Observation => ({ state, id });
const types = (before: Observation | null, after: Observation | null, ctx = {}): string[] =>
  transitionEvents(before, after, ctx).map((e) => `${e.type}:${e.reason}`);

describe('transitionEvents', () => {
  test('the documented table', () => {
    assert.deepEqual(types(null, o('stopped')), ['vm.defined:added']);
    assert.deepEqual(types(null, o('running')), ['vm.defined:added', 'vm.started:booted']);
    assert.deepEqual(types(o('running'), null), ['vm.stopped:unknown', 'vm.undefined:removed']);
    assert.deepEqual(types(o('stopped'), null), ['vm.undefined:removed']);
    assert.deepEqual(types(o('stopped'), o('running')), ['vm.started:booted']);
    assert.deepEqual(types(o('crashed'), o('running')), ['vm.started:booted']);
    assert.deepEqual(types(o('stopped'), o('paused')), ['vm.started:booted', 'vm.suspended:paused']);
    assert.deepEqual(types(o('paused'), o('running')), ['vm.resumed:unpaused']);
    assert.deepEqual(types(o('suspended'), o('running')), ['vm.resumed:wakeup']);
    assert.deepEqual(types(o('running'), o('paused')), ['vm.suspended:paused']);
    assert.deepEqual(types(o('running'), o('suspended')), ['vm.pmsuspended:memory']);
    assert.deepEqual(types(o('running'), o('shutdown')), ['vm.shutdown:guest']);
    assert.deepEqual(types(o('running'), o('shutdown'), { shutdownAnnounced: true }), []);
    assert.deepEqual(types(o('running'), o('stopped')), ['vm.stopped:unknown']);
    assert.deepEqual(types(o('running'), o('stopped'), { stopReason: 'destroyed' }), ['vm.stopped:destroyed']);
    assert.deepEqual(types(o('running'), o('crashed')), ['vm.crashed:crashed']);
    assert.deepEqual(types(o('crashed'), o('stopped')), []);
    assert.deepEqual(types(o('running', 3), o('running', 4)), ['vm.rebooted:restarted']);
    assert.deepEqual(types(o('running', 3), o('running', 3)), []);
    assert.deepEqual(types(o('unknown'), o('running')), []);
  });

  test('no event for no change; every change from a known state to another known state is reported', () => {
    const known: readonly VmState[] = VM_STATES.filter((s) => s !== 'unknown');
    fc.assert(
      fc.property(fc.constantFrom(...VM_STATES), fc.constantFrom(...VM_STATES), (a, b) => {
        const ev = types(o(a), o(b));
        if (a === b) assert.deepEqual(ev, []);
        if (
          a !== b &&
          known.includes(a) &&
          known.includes(b) &&
          !(a === 'crashed' && b === 'stopped') &&
          !(a === 'shutdown' && b === 'running')
        ) {
          assert.ok(ev.length > 0, `${a} → ${b} gave no event`);
        }
      }),
    );
  });
});
