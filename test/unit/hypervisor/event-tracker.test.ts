import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EventTracker, type SeenDomain } from '../../../src/hypervisor/event-tracker.js';
import type { HypervisorEvent, VmState } from '../../../src/hypervisor/port.js';

const H = 'test:///default';
const d = (name: string, state: VmState, id: number | null = state === 'stopped' ? null : 1, uuid = `u-${name}`): SeenDomain => ({
  name,
  uuid,
  state,
  id,
});

function setup(): { t: EventTracker; events: HypervisorEvent[]; advance: (ms: number) => void } {
  const events: HypervisorEvent[] = [];
  let now = 1_000_000;
  const t = new EventTracker(
    (e) => events.push(e),
    () => now,
  );
  return { t, events, advance: (ms) => void (now += ms) };
}
const names = (events: HypervisorEvent[]): string[] => events.map((e) => `${e.type}:${e.vmName}:${e.reason}:${e.source}`);

describe('EventTracker', () => {
  test('the first full look is a silent baseline; later looks report differences once', () => {
    const { t, events } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'running'), d('b', 'stopped')], 'poller');
    assert.deepEqual(events, []);
    assert.ok(t.hasBaseline(H));
    t.observeHost(H, t.beginLook(), [d('a', 'stopped'), d('b', 'stopped'), d('c', 'stopped')], 'poller');
    t.observeHost(H, t.beginLook(), [d('a', 'stopped'), d('b', 'stopped'), d('c', 'stopped')], 'poller');
    assert.deepEqual(names(events), ['vm.stopped:a:unknown:poller', 'vm.defined:c:added:poller']);
  });

  test('our own change is reported with its reason, and a poll that started before it is ignored', () => {
    const { t, events } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'stopped')], 'poller');
    const stalePoll = t.beginLook();
    t.pin(H, 'a');
    t.observeHost(H, t.beginLook(), [d('a', 'running')], 'poller'); // pinned: skipped
    t.observeOwn(H, 'a', d('a', 'running'), t.beginLook(), { startReason: 'booted' });
    t.unpin(H, 'a');
    t.observeHost(H, stalePoll, [d('a', 'stopped')], 'poller'); // began before our start finished
    t.observeHost(H, t.beginLook(), [d('a', 'running')], 'poller');
    assert.deepEqual(names(events), ['vm.started:a:booted:sandboxd']);
  });

  test('a look that started before a domain was removed does not bring it back (no start that never happened)', () => {
    const { t, events } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'running')], 'poller');
    const stalePoll = t.beginLook(); // reads `a` running, answers late
    t.pin(H, 'a');
    t.observeOwn(H, 'a', null, t.beginLook()); // our undefine
    t.unpin(H, 'a');
    t.observeHost(H, stalePoll, [d('a', 'running')], 'poller');
    t.observeOne(H, 'a', d('a', 'running'), stalePoll, 'virsh-event');
    t.observeHost(H, t.beginLook(), [], 'poller');
    assert.deepEqual(names(events), ['vm.stopped:a:unknown:sandboxd', 'vm.undefined:a:removed:sandboxd']);
    // A domain of that name defined later is news again.
    t.observeHost(H, t.beginLook(), [d('a', 'stopped', null, 'u-a2')], 'poller');
    assert.deepEqual(names(events).slice(2), ['vm.defined:a:added:poller']);
  });

  test('an ACPI request is announced once; the later stop is attributed to it', () => {
    const { t, events } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'running')], 'poller');
    t.pin(H, 'a');
    t.observeOwn(H, 'a', d('a', 'running'), t.beginLook(), { shutdownRequested: true }); // the guest has not reacted yet
    t.unpin(H, 'a');
    t.observeHost(H, t.beginLook(), [d('a', 'shutdown')], 'poller');
    t.observeHost(H, t.beginLook(), [d('a', 'stopped')], 'poller');
    assert.deepEqual(names(events), ['vm.shutdown:a:requested:sandboxd', 'vm.stopped:a:shutdown:poller']);
  });

  test('uptime counts from the start we saw, and is reported when the VM stops', () => {
    const { t, events, advance } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'running'), d('b', 'stopped')], 'poller');
    assert.equal(t.uptimeSeconds(H, 'a'), null, 'running before we looked: unknown');
    t.observeHost(H, t.beginLook(), [d('a', 'running'), d('b', 'running')], 'poller');
    advance(42_500);
    assert.equal(t.uptimeSeconds(H, 'b'), 42);
    t.observeHost(H, t.beginLook(), [d('a', 'running'), d('b', 'stopped')], 'poller');
    assert.equal(events.at(-1)?.uptimeSeconds, 42);
    assert.equal(t.uptimeSeconds(H, 'b'), null);
  });

  test('same name with a new uuid is an undefine plus a define', () => {
    const { t, events } = setup();
    t.observeHost(H, t.beginLook(), [d('a', 'stopped')], 'poller');
    t.observeHost(H, t.beginLook(), [d('a', 'stopped', null, 'other')], 'poller');
    assert.deepEqual(names(events), ['vm.undefined:a:removed:poller', 'vm.defined:a:added:poller']);
  });

  test('hosts are independent', () => {
    const { t, events } = setup();
    t.observeHost('h1', t.beginLook(), [d('a', 'stopped')], 'poller');
    t.observeHost('h2', t.beginLook(), [], 'poller');
    t.observeHost('h2', t.beginLook(), [], 'poller');
    t.observeHost('h1', t.beginLook(), [d('a', 'stopped')], 'poller');
    assert.deepEqual(events, []);
  });
});
