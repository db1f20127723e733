import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseVirshEventLine } from '../../../../src/hypervisor/libvirt/events.js';
import { vmStateOf } from '../../../../src/hypervisor/libvirt/state-map.js';

test('virsh event lines are parsed; others are ignored', () => {
  assert.deepEqual(parseVirshEventLine("event 'lifecycle' for domain 'agent-a': Stopped Destroyed"), {
    kind: 'lifecycle',
    name: 'agent-a',
    event: 'stopped',
    detail: 'destroyed',
  });
  assert.deepEqual(parseVirshEventLine("2026-11-21 12:10:12.315+0000: event 'lifecycle' for domain 'ev1': Defined Added"), {
    kind: 'lifecycle',
    name: 'ev1',
    event: 'defined',
    detail: 'added',
  });
  assert.deepEqual(parseVirshEventLine("event 'reboot' for domain 'agent-a'"), { kind: 'reboot', name: 'agent-a' });
  assert.equal(parseVirshEventLine("event 'rtc-change' for domain 'agent-a': 12"), null);
  assert.equal(parseVirshEventLine('events received: 3'), null);
});

test('libvirt states map to the spec states', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, -1, 1.5].map(vmStateOf), [
    'unknown',
    'running',
    'running',
    'paused',
    'shutdown',
    'stopped',
    'crashed',
    'suspended',
    'unknown',
    'unknown',
    'unknown',
  ]);
});
