/**
 * The tasks views in headless Chromium against the real server: a manifest submitted from the
 * form runs (its command from the manifest, in a VM of its own), the detail page streams its log
 * live, lists its artifact with a working download link; the list filters by state; a bad
 * manifest shows the server's error; a running task is cancelled from its page.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { DEADLINE_MS, waitWithin } from '../support/wait.js';
import { shows, startDashboardServer, textOn, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();

describe('dashboard: tasks', { skip: skip ?? false, timeout: 300_000 }, () => {
  let srv: DashboardServer;
  let b: BrowserSession;
  let dir = '';
  let repo = '';

  /** What a task page shows and what the server knows of its task, for a timeout message. */
  const taskState = async (page: Page): Promise<string> => {
    const id = /#\/tasks\/(task-[^/?]+)/.exec(page.url())?.[1];
    let task = 'no task id in the URL';
    if (id !== undefined) {
      const res = await fetch(`${srv.baseUrl}/api/v1/tasks/${id}`);
      const t = (await res.json()) as Record<string, unknown>;
      task = JSON.stringify({
        status: res.status,
        state: t['state'],
        state_message: t['state_message'],
        error: t['error'],
        vm: t['vm_name'],
      });
    }
    return `page ${page.url()}; task ${task}; log status ${await textOn(page, '.log-status')}; log ${await textOn(page, 'pre.log')}; ${srv.logTail()}`;
  };
  /** Waits for the submit to open the new task's page (the timeout shows the form, with any error). */
  const submitted = (page: Page): Promise<void> =>
    waitWithin("the submitted task's page", (ms) => page.waitForURL(/#\/tasks\/task-/, { timeout: ms }), {
      deadlineMs: DEADLINE_MS.process,
      lastState: async () => `page ${page.url()} shows ${await textOn(page, 'main')}`,
    });

  const manifest = (name: string, script: string): string =>
    [
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

  before(async () => {
    srv = await startDashboardServer();
    dir = await mkdtemp(join(tmpdir(), 'dash-tasks-'));
    repo = join(dir, 'repo');
    execFileSync('git', ['init', '-q', repo]);
    await writeFile(join(repo, 'README'), 'a repository for the dashboard task tests\n');
    execFileSync('git', ['-C', repo, 'add', 'README']);
    execFileSync('git', ['-C', repo, '-c', 'user.email=t@example.com', '-c', 'user.name=t', 'commit', '-q', '-m', 'init']);
    b = await openBrowser();
  });
  after(async () => {
    await b?.close();
    await srv?.stop();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  test('submit, live log, artifacts, list filter', async () => {
    const page = b.page;
    await page.goto(`${srv.baseUrl}/#/tasks`);
    await shows(page, 'the empty task list', page.getByText(/No tasks yet/));
    await page
      .getByLabel('Manifest (YAML)')
      .fill(
        manifest(
          'dash-ok',
          'echo "hello {prompt}"; echo "to stderr" >&2; mkdir -p "$SANDBOX_OUTBOX"; echo report > "$SANDBOX_OUTBOX/summary.txt"',
        ),
      );
    await page.getByRole('button', { name: 'Submit task' }).click();
    await submitted(page);
    const log = page.getByLabel('Task log');
    await shows(page, '"hello world" in the task log', log.getByText('hello world'), {
      deadlineMs: DEADLINE_MS.endToEnd,
      lastState: () => taskState(page),
    });
    await shows(page, '"to stderr" in the task log', log.getByText('to stderr'), {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => taskState(page),
    });
    await shows(page, 'the completed badge', page.locator('.page-title .badge', { hasText: 'completed' }), {
      deadlineMs: DEADLINE_MS.endToEnd,
      lastState: () => taskState(page),
    });
    const link = page.getByRole('link', { name: 'summary.txt' });
    await shows(page, 'the summary.txt artifact link', link, { deadlineMs: DEADLINE_MS.process, lastState: () => taskState(page) });
    const href = await link.getAttribute('href');
    assert.ok(href !== null);
    const res = await fetch(new URL(href, `${srv.baseUrl}/`));
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'report\n');
    await screenshot(page, 'task');

    await page.getByRole('link', { name: 'Tasks', exact: true }).first().click();
    await shows(page, 'a completed task in the list', page.locator('tr[data-task] .badge', { hasText: 'completed' }).first());
    await page.getByLabel('Show tasks in state').selectOption('failed');
    await shows(page, 'the empty failed filter', page.getByText('No task in this state'));
    await page.getByLabel('Show tasks in state').selectOption('completed');
    await shows(page, "the completed filter's rows", page.locator('tr[data-task]').first());
    await screenshot(page, 'tasks');
    assert.deepEqual(b.pageErrors, []);
  });

  test("a bad manifest shows the server's error; a running task is cancelled from its page", async () => {
    const page = b.page;
    await page.goto(`${srv.baseUrl}/#/tasks`);
    await page.getByLabel('Manifest (YAML)').fill('name: x\nprompt: 3\n');
    await page.getByRole('button', { name: 'Submit task' }).click();
    await shows(
      page,
      "the server's task.invalid_manifest error on the form",
      page.locator('.form-error', { hasText: 'task.invalid_manifest' }),
    );
    await screenshot(page, 'task-submit-error');

    await page.getByLabel('Manifest (YAML)').fill(manifest('dash-long', 'echo started; sleep 300'));
    await page.getByRole('button', { name: 'Submit task' }).click();
    await submitted(page);
    await shows(page, '"started" in the task log', page.getByLabel('Task log').getByText('started'), {
      deadlineMs: DEADLINE_MS.endToEnd,
      lastState: () => taskState(page),
    });
    await page.getByRole('button', { name: 'Cancel task' }).click();
    await shows(page, 'the cancelled badge', page.locator('.page-title .badge', { hasText: 'cancelled' }), {
      deadlineMs: DEADLINE_MS.agent,
      lastState: () => taskState(page),
    });
    assert.equal(await page.getByRole('button', { name: 'Cancel task' }).isVisible(), false);
  });
});
