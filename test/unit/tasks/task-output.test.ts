import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readRecords } from '../../../src/tasks/task-log-stream.js';
import { TaskLog } from '../../../src/tasks/task-log.js';
import { describeFailure, TaskOutput } from '../../../src/tasks/task-output.js';
import type { TaskProgress } from '../../../src/tasks/task-state.js';

const outcome = (o: Partial<Parameters<typeof describeFailure>[0]>): Parameters<typeof describeFailure>[0] => ({
  exitCode: 1,
  error: '',
  timedOutBy: '',
  killed: false,
  resultReceived: true,
  ...o,
});

describe('describeFailure', () => {
  test('names the exit code, the signal, the timer, or why the command could not run', () => {
    assert.equal(describeFailure(outcome({ exitCode: 3 }), '30m', 'boom'), 'the coding agent exited with code 3: boom');
    assert.equal(describeFailure(outcome({ exitCode: 2 }), '30m', ''), 'the coding agent exited with code 2');
    assert.equal(describeFailure(outcome({ exitCode: 137 }), '30m', ''), 'the coding agent was killed by signal 9 (exit code 137)');
    assert.equal(
      describeFailure(outcome({ exitCode: -1, error: 'spawn claude ENOENT' }), '30m', ''),
      'the coding agent could not run: spawn claude ENOENT',
    );
    assert.equal(
      describeFailure(outcome({ exitCode: 143, timedOutBy: 'timeout_seconds' }), '2h', ''),
      'lifecycle.timeout (2h) expired (enforced by the agent); the process group was killed',
    );
    assert.match(
      describeFailure(outcome({ exitCode: -1, resultReceived: false, error: 'no result' }), '1m', ''),
      /result was lost: no result/,
    );
  });
});

describe('TaskOutput', () => {
  test('decodes characters split across chunks, logs stream-json events, counts progress, keeps the stderr tail', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'task-output-'));
    try {
      const log = new TaskLog({ path: join(dir, 'log.ndjson') });
      let progress: TaskProgress | undefined;
      const out = new TaskOutput(log, (p) => (progress = p));
      const line = Buffer.from('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x","name":"Edit"}]}}\nhé');
      const cut = line.length - 1; // inside the two-byte é
      out.output('stdout', line.subarray(0, cut));
      out.output('stdout', line.subarray(cut));
      out.output('stderr', Buffer.from('warming up\nfatal: it broke\n\n'));
      out.gap({ agent_id: 'a', command_id: 'c', first_seq: 4, last_seq: 6, lost_bytes: 100, reason: 'buffer full' });
      out.end();
      log.finish('completed', '0');
      await log.flushed();
      const recs = [];
      for await (const r of readRecords(log.path, log.writtenBytes)) recs.push(r);
      const stdout = recs
        .filter((r) => r.event === 'stdout')
        .map((r) => r.data)
        .join('');
      assert.equal(stdout, `${line.toString('utf8')}`);
      const events = recs.filter((r) => r.event === 'event').map((r) => JSON.parse(r.data) as { kind: string });
      assert.deepEqual(
        events.map((e) => e.kind),
        ['stream_json', 'gap'],
      );
      assert.equal(progress?.tool_calls, 1);
      assert.equal(progress?.current_tool, 'Edit');
      assert.equal(progress?.output_bytes, line.length + 'warming up\nfatal: it broke\n\n'.length);
      assert.equal(out.lastStderrLine(), 'fatal: it broke');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
