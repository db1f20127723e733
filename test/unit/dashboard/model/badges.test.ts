import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  agentBadge,
  deleteNeedsForce,
  isTaskFinished,
  operationBadge,
  TASK_STATES,
  taskBadge,
  vmActions,
  vmBadge,
} from '../../../../src/dashboard/model/badges.js';

describe('dashboard badges', () => {
  test('every spec state has a tone and a readable label', () => {
    for (const s of ['Starting', 'Ready', 'Busy', 'Error', 'ShuttingDown', 'Stale', 'Disconnected'])
      assert.notEqual(agentBadge(s).label, '');
    assert.equal(agentBadge('ShuttingDown').label, 'Shutting down');
    assert.equal(agentBadge('Ready').tone, 'ok');
    assert.equal(agentBadge('Error').tone, 'bad');
    assert.equal(agentBadge('Stale').tone, 'warn');
    assert.equal(vmBadge('running').tone, 'ok');
    assert.equal(vmBadge('crashed').tone, 'bad');
    assert.equal(vmBadge('shutdown').label, 'shut down');
    assert.equal(operationBadge('failed').tone, 'bad');
    assert.equal(taskBadge('failed_preserved').label, 'failed (preserved)');
    assert.deepEqual(TASK_STATES, [
      'pending',
      'staging',
      'provisioning',
      'ready',
      'running',
      'completing',
      'completed',
      'failed',
      'failed_preserved',
      'cancelled',
    ]);
  });

  test('a state the dashboard does not know shows as itself, neutral', () => {
    assert.deepEqual(vmBadge('migrating'), { tone: 'idle', label: 'migrating' });
    assert.deepEqual(agentBadge(''), { tone: 'idle', label: 'unknown' });
    assert.deepEqual(taskBadge('constructor'), { tone: 'idle', label: 'constructor' });
  });

  test('VM actions follow the VM state', () => {
    assert.deepEqual(vmActions('running'), ['stop', 'restart', 'delete']);
    assert.deepEqual(vmActions('shutdown'), ['start', 'delete']);
    assert.deepEqual(vmActions('crashed'), ['start', 'delete']);
    assert.deepEqual(vmActions('paused'), ['start', 'stop', 'delete']);
    assert.equal(deleteNeedsForce('running'), true);
    assert.equal(deleteNeedsForce('stopped'), false);
  });

  test('finished tasks', () => {
    assert.equal(isTaskFinished('completed'), true);
    assert.equal(isTaskFinished('cancelled'), true);
    assert.equal(isTaskFinished('running'), false);
  });
});
