/**
 * The terminal view in two headless browsers against the real server (tmux session on a local
 * agent): it opens as a read-only observer; "Take control" gets the lease and keystrokes reach the
 * shell; a second viewer sees the same output, and its own "Take control" is refused while the
 * first holds the lease (downgraded, said on screen), then granted once the first releases it;
 * the controller's window size reaches the PTY (stty size).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { DEADLINE_MS, waitFor, waitWithin } from '../support/wait.js';
import { createReadyVm, shows, startDashboardServer, textOn, vmName, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();

/** The text on the xterm screen (DOM renderer rows). */
function screenText(page: Page): Promise<string> {
  return page.locator('.xterm-rows').innerText();
}

/** What a terminal page shows, for a timeout message: role, status line, the screen. */
async function terminalState(page: Page): Promise<string> {
  return `role ${await textOn(page, '.page-terminal .page-title .badge')}, status ${await textOn(page, '.term-status')}, screen ${await textOn(page, '.xterm-rows', 1200)}`;
}

async function waitForScreen(page: Page, re: RegExp, deadlineMs: number = DEADLINE_MS.process): Promise<string> {
  return await waitFor(
    `the screen to match ${String(re)}`,
    async () => {
      const text = await screenText(page);
      return re.test(text) ? text : undefined;
    },
    { deadlineMs, intervalMs: 200, lastState: () => terminalState(page) },
  );
}

/**
 * Types `input` into the focused terminal (again every 2 s) until the screen matches `re`: for a
 * shell that is still starting (no prompt is assumed) and for answers that follow something
 * asynchronous (a resize reaching the pane).
 */
async function typeUntil(page: Page, input: string, re: RegExp, what: string): Promise<void> {
  let typedMs = 0;
  await waitFor(
    what,
    async () => {
      if (re.test(await screenText(page))) return true;
      if (Date.now() - typedMs >= 2000) {
        typedMs = Date.now();
        await page.keyboard.type(input);
      }
      return false;
    },
    { deadlineMs: DEADLINE_MS.process, intervalMs: 200, lastState: () => terminalState(page) },
  );
}

/** Waits until `locator` is on a terminal page; the timeout shows its role, status and screen. */
const onTerminal = (page: Page, what: string, locator: Locator, deadlineMs: number = DEADLINE_MS.process): Promise<void> =>
  shows(page, what, locator, { deadlineMs, lastState: () => terminalState(page) });

const roleBadge = (page: Page) => page.locator('.page-terminal .page-title .badge');

describe('dashboard: terminal', { skip: skip ?? false, timeout: 300_000 }, () => {
  let srv: DashboardServer;
  let a: BrowserSession;
  let b: BrowserSession;
  const name = vmName('term');

  before(async () => {
    srv = await startDashboardServer();
    await createReadyVm(srv, name);
    a = await openBrowser({ viewport: { width: 1280, height: 800 } });
    b = await openBrowser({ viewport: { width: 1280, height: 800 } });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await srv?.stop();
  });

  test('observer first, take control, a second viewer is refused, then gets the lease', async () => {
    const pa = a.page;
    await pa.goto(`${srv.baseUrl}/#/agents/${encodeURIComponent(name)}`);
    await pa.getByRole('button', { name: 'New terminal' }).click();
    await waitWithin("the new terminal's page", (ms) => pa.waitForURL(/#\/agents\/.*\/sessions\//, { timeout: ms }), {
      deadlineMs: DEADLINE_MS.process,
      lastState: async () => `page ${pa.url()} shows ${await textOn(pa, 'main')}`,
    });
    const terminalUrl = pa.url();
    await onTerminal(pa, 'the observer badge', roleBadge(pa).filter({ hasText: 'observer' }));
    await onTerminal(pa, 'the read-only notice', pa.getByText('Watching (read-only)'));
    // An observer's keys go nowhere: a negative check, so a fixed pause in which they must not show.
    await pa.locator('.term-screen').click();
    await pa.keyboard.type('echo observer-typed\n');
    await pa.waitForTimeout(500);
    assert.doesNotMatch(await screenText(pa), /observer-typed/);
    await screenshot(pa, 'terminal-observer');

    await pa.getByRole('button', { name: 'Take control' }).click();
    await onTerminal(pa, 'the controller badge', roleBadge(pa).filter({ hasText: 'controller' }));
    await pa.locator('.term-screen').click();
    await typeUntil(pa, 'echo "shell-$((40+2))"\n', /shell-42/, "the session's shell to run a command");
    await pa.keyboard.type('echo "dash-$((6*7))-ok"\n');
    await waitForScreen(pa, /dash-42-ok/);
    await screenshot(pa, 'terminal-controller');

    // A second viewer: observer, sees the same screen, and is refused the lease.
    const pb = b.page;
    await pb.goto(terminalUrl);
    await onTerminal(pb, "the second viewer's observer badge", roleBadge(pb).filter({ hasText: 'observer' }));
    await waitForScreen(pb, /dash-42-ok/);
    await pb.getByRole('button', { name: 'Take control' }).click();
    await onTerminal(pb, 'the refusal notice', pb.getByText(/control refused: another client holds the controller lease/));
    assert.equal(await roleBadge(pb).innerText(), 'observer');
    await onTerminal(pa, 'the membership line', pa.getByText(/1 controller, 1 observer/));
    await screenshot(pb, 'terminal-refused');

    // The first releases; the second asks again and gets it.
    await pa.getByRole('button', { name: 'Release control' }).click();
    await onTerminal(pa, 'the first viewer back as observer', roleBadge(pa).filter({ hasText: 'observer' }));
    await pb.getByRole('button', { name: /take control/i }).click();
    await onTerminal(pb, "the second viewer's controller badge", roleBadge(pb).filter({ hasText: 'controller' }));
    await pb.locator('.term-screen').click();
    await pb.keyboard.type('echo "from-b-$((2+3))"\n');
    await waitForScreen(pa, /from-b-5/);

    // The controller's window size reaches the PTY.
    // Both attributes in one read: two reads can straddle the re-fit and pair the old rows with the new cols.
    const termSize = (): Promise<string> =>
      pb
        .locator('.term-screen')
        .evaluate((el: { getAttribute(name: string): string | null }) => `${el.getAttribute('data-rows')} ${el.getAttribute('data-cols')}`);
    const before = await termSize();
    await pb.setViewportSize({ width: 900, height: 600 });
    const size = await waitFor(
      'the terminal to fit the smaller window',
      async () => {
        const now = await termSize();
        return now !== before ? now : undefined;
      },
      { deadlineMs: DEADLINE_MS.local, intervalMs: 100, lastState: async () => `data-rows/cols still ${await termSize()}` },
    );
    // The new size travels browser → server → agent → tmux client → pane: ask until the pane has it.
    await typeUntil(pb, 'stty size\n', new RegExp(`^${size}\\s*$`, 'm'), `stty size to show ${size}`);

    // The agent page lists the session with who controls it; Kill asks first, and the open terminal ends.
    await pa.goto(`${srv.baseUrl}/#/agents/${encodeURIComponent(name)}`);
    const row = pa.locator('tr[data-session]');
    await shows(pa, 'the session row on the agent page', row.first());
    await screenshot(pa, 'agent-sessions');
    await row.first().getByRole('button', { name: 'Kill' }).click();
    await pa.getByRole('dialog').getByRole('button', { name: 'Kill session' }).click();
    await shows(pa, 'the agent page without sessions', pa.getByText('No terminal sessions'));
    await onTerminal(pb, 'the open terminal to end', pb.locator('.term-status', { hasText: /^Ended/ }));
    assert.deepEqual([...a.pageErrors, ...b.pageErrors], []);
  });
});
