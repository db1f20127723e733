/**
 * The activity view in headless Chromium against the real server (every component, the SQLite
 * activity store): commands run on a real agent appear in ingest order with the coverage of the
 * `sandboxd` collector; filtering by one command's id (typed into the form) shows exactly its
 * command.started and command.finished rows; "Check for newer events" appends what arrived since,
 * without repeating a row; a bad id is a form error, not a request; and no console errors.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AgentCommandClient } from '../../src/agent-link/command-client.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { killAll, spawnAgent, type AgentProcess } from './agents-harness.js';
import { shows, startDashboardServer, textOn, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();
const AGENT = 'agent-dash-activity';

/** What the row checks read of a table row (the test build has no DOM types). */
interface RowEl {
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
}

describe('dashboard: activity', { skip: skip ?? false, timeout: 300_000 }, () => {
  let srv: DashboardServer;
  let b: BrowserSession;
  const procs: AgentProcess[] = [];

  /** Runs `sh -c script` on the agent; resolves with its command id. */
  const run = async (script: string): Promise<string> => {
    const client = new AgentCommandClient(srv.server.service('actors'), srv.server.agents);
    try {
      const r = await client.start(AGENT, { command: 'sh', args: ['-c', script] }, {});
      await r.result;
      return r.commandId;
    } finally {
      client.stop();
    }
  };
  /** Waits until the store holds both events of `commandId` (the collector flushes every 250 ms). */
  const stored = (commandId: string): Promise<unknown> =>
    waitFor(
      `the activity of ${commandId} stored`,
      async () => {
        const cfg = (await (await fetch(`${srv.baseUrl}/api/v1/dashboard/config`)).json()) as { activity: { tenant_id: string } };
        const res = await fetch(`${srv.baseUrl}/api/v2/activity/events?command_id=${commandId}`, {
          headers: { 'x-svc-tenant-id': cfg.activity.tenant_id, 'x-svc-host-id': '*', 'x-svc-instance-id': '*', 'x-svc-agent-id': '*' },
        });
        return ((await res.json()) as { events: unknown[] }).events.length >= 2 ? true : undefined;
      },
      { deadlineMs: DEADLINE_MS.process, intervalMs: 100 },
    );

  before(async () => {
    srv = await startDashboardServer();
    const ca = await ensureCa({ secretsDir: srv.server.config.secretsDir, trustDomain: srv.server.config.trustDomain });
    const certs = join(srv.stateDir, 'agent-certs');
    await writeAgentBundle(certs, ca, { instanceId: 'i-dash-activity' });
    procs.push(
      spawnAgent({
        server: `127.0.0.1:${srv.server.ports.grpc}`,
        certs,
        agentId: AGENT,
        instanceId: 'i-dash-activity',
        workDir: srv.stateDir,
      }),
    );
    await waitFor(`agent ${AGENT} Ready`, () => srv.server.agents.registry.get(AGENT)?.status === 'Ready', {
      deadlineMs: DEADLINE_MS.agent,
      intervalMs: 100,
      lastState: () => `agent log ${procs[0]?.log().slice(-1500) ?? ''}`,
    });
    b = await openBrowser();
  });
  after(async () => {
    await b?.close();
    await killAll(procs);
    await srv?.stop();
  });

  test('the timeline, coverage, a filter by command id, and loading newer events', async () => {
    const first = await run('exit 0');
    const second = await run('exit 3');
    await stored(second);
    const page = b.page;
    await page.goto(`${srv.baseUrl}/#/activity`);
    const rows = page.locator('table.table-activity tbody tr[data-event-id]');
    await shows(page, 'the events of both commands', page.locator(`tr[data-command-id="${second}"][data-event-name="command.finished"]`));
    await shows(
      page,
      'the coverage of collector sandboxd',
      page.locator(`table.table-coverage tr[data-collector="sandboxd"][data-agent="${AGENT}"]`),
    );
    const coverageText = await page.locator(`table.table-coverage tr[data-agent="${AGENT}"]`).innerText();
    assert.match(coverageText, /sandboxd/);
    assert.match(coverageText, /none/, 'no gaps');
    // Ingest order, oldest first: the first command's rows come before the second's.
    const order = await rows.evaluateAll((trs: RowEl[]) => trs.map((tr) => tr.getAttribute('data-command-id')));
    assert.ok(order.indexOf(first) < order.indexOf(second), JSON.stringify(order));
    await screenshot(page, 'activity-timeline', { fullPage: true });

    // Filter by the second command's id, typed into the form.
    await page.getByLabel('Command', { exact: true }).fill(second);
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(new RegExp(`#/activity\\?command_id=${second}`));
    // The unfiltered table holds the second command's rows too: wait for the filtered answer to
    // replace it (no row of another command left), not just for a row of the second.
    await waitFor(
      'the filtered rows',
      async () =>
        (await rows.count()) >= 2 &&
        (await rows.evaluateAll((trs: RowEl[], id: string) => trs.every((tr) => tr.getAttribute('data-command-id') === id), second)),
      { deadlineMs: DEADLINE_MS.process, intervalMs: 100, lastState: async () => `rows: ${await textOn(page, 'table.table-activity')}` },
    );
    const filtered = await rows.evaluateAll((trs: RowEl[]) =>
      trs.map((tr) => [tr.getAttribute('data-event-name'), tr.getAttribute('data-command-id'), tr.textContent ?? '']),
    );
    assert.deepEqual(
      filtered.map(([name, id]) => [name, id]),
      [
        ['command.started', second],
        ['command.finished', second],
      ],
      `rows: ${await textOn(page, 'table.table-activity')}`,
    );
    assert.match(filtered[1]?.[2] ?? '', /failure · exit 3/);
    assert.match(filtered[0]?.[2] ?? '', /argv0=sh/);
    await screenshot(page, 'activity-filtered');

    // Back to everything; a command run now appears after "Check for newer events", once.
    await page.goto(`${srv.baseUrl}/#/activity`);
    await shows(page, 'the timeline again', page.locator(`tr[data-command-id="${second}"][data-event-name="command.finished"]`));
    const before = await rows.count();
    const third = await run('exit 0');
    await stored(third);
    await page.getByRole('button', { name: 'Check for newer events' }).click();
    await shows(page, 'the newer command', page.locator(`tr[data-command-id="${third}"][data-event-name="command.finished"]`));
    const ids = await rows.evaluateAll((trs: RowEl[]) => trs.map((tr) => tr.getAttribute('data-event-id')));
    assert.equal(new Set(ids).size, ids.length, 'no row twice');
    assert.ok(ids.length >= before + 2);

    // A bad id is a form error; nothing is sent.
    await page.getByLabel('Command', { exact: true }).fill('has a space');
    await page.getByRole('button', { name: 'Apply' }).click();
    await shows(page, 'the form error', page.getByText('no spaces'));
    assert.doesNotMatch(page.url(), /has/);
    assert.deepEqual(b.pageErrors, []);
  });
});
