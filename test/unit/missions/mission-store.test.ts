/**
 * The missions store across a restart (src/missions/mission-store.ts): executors come back with
 * their token hashes (the token still authenticates), a mission left running is marked failed
 * with reason server_restarted, and the service emits its mission.failed when it starts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EventStore } from '../../../src/events/event-store.js';
import { hashToken, matchToken, newExecutorToken } from '../../../src/missions/executor-token.js';
import { MissionService } from '../../../src/missions/mission-service.js';
import { MissionStore } from '../../../src/missions/mission-store.js';

test('a restart keeps executors and fails the missions that were running', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-missions-'));
  try {
    const token = newExecutorToken();
    const first = new MissionStore(dir);
    first.putExecutor({
      id: 'exe-1',
      agentId: 'agent-a',
      name: 'a',
      capabilities: ['shell'],
      command: ['sh', '-c', 'true'],
      tokenHash: hashToken(token),
      createdAtMs: 1,
      createdBy: 'local',
      lastDispatchAtMs: null,
    });
    const base = {
      sessionId: 's',
      executorId: 'exe-1',
      agentId: 'agent-a',
      objective: 'o',
      completion: '',
      longRunning: false,
      metadata: { k: 1 },
      commandId: 'mission-x',
      createdAtMs: 2,
      startedAtMs: null,
      finishedAtMs: null,
      exitCode: null,
      reason: null,
      error: null,
    };
    first.putMission({ ...base, id: 'm-running', status: 'assigned' });
    assert.ok(first.moveMission('m-running', ['assigned'], 'running', 'started', { startedAtMs: 3 }));
    first.putMission({ ...base, id: 'm-done', status: 'assigned' });
    first.moveMission('m-done', ['assigned'], 'running', 'started');
    first.moveMission('m-done', ['running'], 'completed', 'exited', { exitCode: 0 });
    assert.equal(first.moveMission('m-done', ['running'], 'failed', 'late'), undefined, 'a finished mission does not move');
    first.close();

    const second = new MissionStore(dir);
    assert.equal(matchToken(token, second.executors()), 'exe-1');
    assert.deepEqual(second.executor('exe-1')?.command, ['sh', '-c', 'true']);
    assert.equal(second.mission('m-done')?.status, 'completed');
    const failed = second.mission('m-running');
    assert.equal(failed?.status, 'failed');
    assert.equal(failed?.reason, 'server_restarted');
    assert.deepEqual(failed?.metadata, { k: 1 });
    const events = new EventStore();
    new MissionService({
      store: second,
      events,
      agent: () => undefined,
      commands: { start: () => Promise.reject(new Error('unused')) },
      missionCommand: ['true'],
      timeoutSeconds: 1,
      startWindowMs: 100,
    });
    const page = events.query({ eventType: 'mission.*', limit: 10 });
    assert.deepEqual(
      page.events.map((e) => [e.event_type, e.details['mission_id'], e.details['reason']]),
      [['mission.failed', 'm-running', 'server_restarted']],
    );
    second.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
