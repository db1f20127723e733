import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { v1 } from '../../../proto/index.js';
import { CommandManager } from '../../../src/guest-agent/commands.js';
import type { ChunkEntry, ResultEntry } from '../../../src/guest-agent/output-buffer.js';
import { CommandSessionBackend, SessionManager } from '../../../src/guest-agent/sessions.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

function setup() {
  const entries: (ChunkEntry | ResultEntry)[] = [];
  const commands = new CommandManager({
    workDir: tmpdir(),
    childEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    killGraceMs: 500,
    log: pino({ level: 'silent' }),
    emit: (e) => entries.push(e),
  });
  const sessions = new SessionManager([new CommandSessionBackend(commands)]);
  const resultOf = (id: string): ResultEntry | undefined =>
    entries.find((e): e is ResultEntry => e.kind === 'result' && e.commandId === id);
  /** Waits until every command has a pid (it was spawned); the timeout lists them. */
  const started = (): Promise<true> =>
    waitFor('every command to be started', () => commands.list().every((c) => c.pid > 0), {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => JSON.stringify(commands.list().map((c) => [c.commandId, c.pid])),
    });
  return { commands, sessions, resultOf, started };
}

describe('sessions', () => {
  test('SessionReport lists running commands that carry a session id or name, with an epoch start time', async () => {
    const { commands, sessions, started } = setup();
    const before = Date.now();
    commands.start({ commandId: 'c1', command: 'sleep', args: ['1000'], sessionId: 's-1', sessionName: 'main' });
    commands.start({ commandId: 'c2', command: 'sleep', args: ['1000'], allocatePty: true, sessionName: 'shell' });
    commands.start({ commandId: 'c3', command: 'sleep', args: ['1000'] });
    await started();
    const all = await sessions.report({ reportAll: true });
    assert.deepEqual(all.map((s) => s.commandId).sort(), ['c1', 'c2']);
    const s1 = all.find((s) => s.commandId === 'c1');
    assert.equal(s1?.sessionType, v1.SessionType.HEADLESS);
    assert.equal(s1?.command, 'sleep 1000');
    assert.ok((s1?.startedAtMs ?? 0) >= before && (s1?.startedAtMs ?? 0) <= Date.now(), 'started_at_ms is a Unix-ms epoch');
    assert.ok((s1?.pid ?? 0) > 0);
    assert.equal(all.find((s) => s.commandId === 'c2')?.isPty, true);
    assert.deepEqual(
      (await sessions.report({ sessionIds: ['s-1'] })).map((s) => s.commandId),
      ['c1'],
    );
    await commands.stopAll(0);
  });

  test('SessionReconcile kills listed and (when asked) unrecognized sessions, keeps the rest', async () => {
    const { commands, sessions, resultOf, started } = setup();
    commands.start({ commandId: 'k1', command: 'sleep', args: ['1000'], sessionId: 'keep-me' });
    commands.start({ commandId: 'k2', command: 'sleep', args: ['1000'], sessionId: 'kill-me' });
    commands.start({ commandId: 'k3', command: 'sleep', args: ['1000'], sessionName: 'stranger' });
    await started();
    const r = await sessions.reconcile({
      keepSessionIds: ['keep-me'],
      killSessionIds: ['kill-me', 'long-gone'],
      killUnrecognized: true,
      gracePeriodSeconds: 1,
    });
    assert.deepEqual(r.kept, ['keep-me']);
    assert.deepEqual([...r.killed].sort(), ['k3', 'kill-me', 'long-gone']);
    assert.deepEqual(r.failed, []);
    assert.equal(resultOf('k2')?.exitCode, 143);
    assert.equal(resultOf('k3')?.exitCode, 143);
    assert.equal(resultOf('k1'), undefined, 'the kept session still runs');
    await commands.stopAll(0);
  });

  test('without kill_unrecognized, sessions the server does not mention are kept', async () => {
    const { commands, sessions, started } = setup();
    commands.start({ commandId: 'q1', command: 'sleep', args: ['1000'], sessionId: 'x' });
    await started();
    const r = await sessions.reconcile({ killUnrecognized: false });
    assert.deepEqual(r, { killed: [], kept: ['x'], failed: [] });
    await commands.stopAll(0);
  });
});
