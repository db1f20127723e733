/**
 * sbx task against the real server: a task runs in a VM of its own (test driver, local agent),
 * its command given by the manifest. submit (file and stdin), --follow, --wait, list, get, logs,
 * artifacts (list and download), cancel, and the exit codes of a failed task, a bad manifest and
 * cancelling a finished task.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS } from '../support/wait.js';
import { runSbx, sbxJson, startCliServer, waitFor, type CliServer } from './cli-harness.js';

let srv: CliServer;
let dir = '';
let repo = '';

before(async () => {
  srv = await startCliServer();
  dir = await mkdtemp(join(tmpdir(), 'sbx-tasks-'));
  repo = join(dir, 'repo');
  execFileSync('git', ['init', '-q', repo]);
  await writeFile(join(repo, 'README'), 'a repository for the sbx task tests\n');
  execFileSync('git', ['-C', repo, 'add', 'README']);
  execFileSync('git', ['-C', repo, '-c', 'user.email=t@example.com', '-c', 'user.name=t', 'commit', '-q', '-m', 'init']);
});
after(async () => {
  await srv?.stop();
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

function manifest(name: string, script: string): string {
  return [
    `name: ${name}`,
    'repository:',
    `  url: ${repo}`,
    'prompt: world',
    'agent:',
    `  command: [sh, -c, ${JSON.stringify(script)}]`,
    'lifecycle:',
    '  timeout: 5m',
    '',
  ].join('\n');
}

interface Task {
  id: string;
  name: string;
  state: string;
  exit_code: number | null;
  error: string | null;
}

describe('sbx task', () => {
  test('submit --follow streams the output; list, get, logs and artifacts show the finished task', async () => {
    const file = join(dir, 'ok.yaml');
    await writeFile(
      file,
      manifest('cli-ok', 'echo "hello {prompt}"; mkdir -p "$SANDBOX_OUTBOX/reports"; echo done > "$SANDBOX_OUTBOX/reports/summary.txt"'),
    );
    const run = await runSbx(srv, ['task', 'submit', '-f', file, '--follow']);
    assert.equal(run.code, 0, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
    assert.match(run.stdout, /^hello world$/m);
    assert.match(run.stderr, /task task-[0-9a-f-]+ submitted/);
    assert.match(run.stderr, /\[completed\] exit code 0/);
    const id = /task (task-[0-9a-f-]+) submitted/.exec(run.stderr)?.[1] as string;

    const list = await sbxJson<{ tasks: Task[]; total_count: number }>(srv, ['task', 'list', '--state', 'completed']);
    assert.ok(list.tasks.some((x) => x.id === id && x.name === 'cli-ok'));
    const table = await runSbx(srv, ['task', 'list']);
    assert.match(table.stdout, new RegExp(`^${id}\\s+cli-ok\\s+completed`, 'm'));

    const got = await sbxJson<Task>(srv, ['task', 'get', id]);
    assert.deepEqual([got.state, got.exit_code, got.error], ['completed', 0, null]);

    // logs --json: one object per line, the whole log of a finished task, ending with completed.
    const logs = await runSbx(srv, ['task', 'logs', id, '--json']);
    assert.equal(logs.code, 0, logs.stderr);
    const events = logs.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; text?: string; exitCode?: number });
    assert.ok(events.some((e) => e.type === 'stdout' && e.text?.includes('hello world') === true));
    assert.deepEqual(events.at(-1), { ...events.at(-1), type: 'completed', exitCode: 0 });
    const plainLogs = await runSbx(srv, ['task', 'logs', id]);
    assert.match(plainLogs.stdout, /^hello world$/m);

    const arts = await sbxJson<{ artifacts: { name: string; size_bytes: number; checksum: string }[] }>(srv, ['task', 'artifacts', id]);
    const summary = arts.artifacts.find((a) => a.name === 'reports/summary.txt');
    assert.ok(summary !== undefined, JSON.stringify(arts));
    assert.equal(summary.size_bytes, 5);
    const out = join(dir, 'summary.txt');
    const dl = await sbxJson<{ file: string; size_bytes: number }>(srv, [
      'task',
      'artifacts',
      id,
      '--download',
      'reports/summary.txt',
      '-o',
      out,
    ]);
    assert.equal(dl.size_bytes, 5);
    assert.equal(await readFile(out, 'utf8'), 'done\n');
    const missing = await runSbx(srv, ['task', 'artifacts', id, '--download', 'nope.txt', '-o', join(dir, 'nope')]);
    assert.equal(missing.code, 3, missing.stderr);

    // A finished task cannot be cancelled: a conflict.
    const late = await runSbx(srv, ['task', 'cancel', id]);
    assert.equal(late.code, 4, late.stderr);
    assert.match(late.stderr, /^sbx: task\.not_cancellable: /);
  });

  test('submit from stdin, then cancel while it runs; --wait on a failing task exits 6', async () => {
    const sub = await sbxJson<{ task_id: string; accepted: boolean }>(srv, ['task', 'submit', '-f', '-'], {
      stdin: manifest('cli-sleep', 'echo started; sleep 120'),
    });
    assert.equal(sub.accepted, true);
    let last = '';
    await waitFor(
      'the task to run',
      async () => {
        const x = await sbxJson<Task>(srv, ['task', 'get', sub.task_id]);
        last = `${x.state}: ${JSON.stringify(x).slice(0, 400)}`;
        return x.state === 'running' ? true : undefined;
      },
      DEADLINE_MS.endToEnd,
      () => Promise.resolve(last),
    );
    const cancelled = await sbxJson<{ success: boolean }>(srv, ['task', 'cancel', sub.task_id, '--reason', 'sbx test']);
    assert.equal(cancelled.success, true);
    const final = await waitFor(
      'the task to be cancelled',
      async () => {
        const x = await sbxJson<Task>(srv, ['task', 'get', sub.task_id]);
        last = `${x.state}: ${JSON.stringify(x).slice(0, 400)}`;
        return x.state === 'cancelled' ? x : undefined;
      },
      DEADLINE_MS.agent,
      () => Promise.resolve(last),
    );
    assert.equal(final.state, 'cancelled');

    const failing = join(dir, 'fail.yaml');
    await writeFile(failing, manifest('cli-fail', 'echo about to fail >&2; exit 3'));
    const r = await runSbx(srv, ['task', 'submit', '-f', failing, '--wait', '--json']);
    assert.equal(r.code, 6, r.stderr);
    const task = JSON.parse(r.stdout) as Task;
    assert.equal(task.state, 'failed');
    assert.match(r.stderr, /^sbx: task\.failed: /m);
  });

  test('an invalid manifest exits 2 with task.invalid_manifest; an unknown task exits 3', async () => {
    const r = await runSbx(srv, ['task', 'submit', '-f', '-'], { stdin: 'name: x\nprompt: y\n' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^sbx: task\.invalid_manifest: repository/);
    const missing = await runSbx(srv, ['task', 'get', 'task-00000000-0000-0000-0000-000000000000']);
    assert.equal(missing.code, 3);
    assert.match(missing.stderr, /^sbx: task\.not_found: /);
  });
});
