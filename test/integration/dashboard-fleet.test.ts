/**
 * The dashboard in headless Chromium against the real server: create a VM from the form (client
 * validation, then the server's own error for a duplicate name), watch its operation finish and
 * its agent connect (Ready), open the agent, tail its events, stop and delete it with the
 * confirmation dialog. Screenshots of each view go to test-output/screenshots/.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { startDashboardServer, vmName, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();

async function createVmFromForm(page: Page, name: string): Promise<void> {
  await page.getByRole('button', { name: 'Create VM' }).first().click();
  const dialog = page.getByRole('dialog', { name: 'Create a VM' });
  await dialog.waitFor();
  await dialog.getByLabel('Name').fill(name);
  await dialog.getByLabel('vCPUs').fill('2');
  await dialog.getByLabel('Memory (MiB)').fill('1024');
  await dialog.getByLabel('Disk (GiB)').fill('10');
  await dialog.getByRole('button', { name: 'Create VM' }).click();
}

describe('dashboard: fleet', { skip: skip ?? false, timeout: 240_000 }, () => {
  let srv: DashboardServer;
  let b: BrowserSession;
  const name = vmName('fleet');

  before(async () => {
    srv = await startDashboardServer();
    b = await openBrowser();
  });
  after(async () => {
    await b?.close();
    await srv?.stop();
  });

  test('an empty fleet says how to start', async () => {
    await b.page.goto(`${srv.baseUrl}/`);
    await b.page.getByText('No VMs yet — create one').waitFor();
    await b.page.locator('.conn-pill[data-state="live"]').waitFor();
    await screenshot(b.page, 'fleet-empty');
  });

  test('keyboard only: a skip link, the create dialog opens with Enter, Escape closes it and focus returns', async () => {
    const page = b.page;
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Skip to content');
    const create = page.getByRole('button', { name: 'Create VM' }).first();
    await create.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Create a VM' });
    await dialog.waitFor();
    // Tab stays inside the modal dialog.
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate('!!document.activeElement?.closest("dialog")'), true, `tab ${i} left the dialog`);
    }
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Create VM');
  });

  test('the create form checks its fields before sending', async () => {
    const page = b.page;
    await page.getByRole('button', { name: 'Create VM' }).first().click();
    const dialog = page.getByRole('dialog', { name: 'Create a VM' });
    await dialog.waitFor();
    // Focus starts in the form, on the (pre-filled) name.
    assert.equal(await page.evaluate('document.activeElement?.name'), 'name');
    await dialog.getByLabel('Name').fill('Bad Name');
    await dialog.getByLabel('vCPUs').fill('0');
    await dialog.getByRole('button', { name: 'Create VM' }).click();
    await dialog.getByText('Name must start with agent-').waitFor();
    await dialog.getByText('vCPUs must be a whole number from 1 to 64').waitFor();
    assert.equal(await dialog.getByLabel('Name').getAttribute('aria-invalid'), 'true');
    await screenshot(page, 'create-vm-invalid');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  test('creating a VM shows its operation, then the VM running and its agent Ready', async () => {
    const page = b.page;
    await createVmFromForm(page, name);
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // The operation is visible while it runs and after it ends; a failure shows its error there.
    const op = page.locator('.op', { hasText: `Create ${name}` });
    await op.waitFor();
    await op.locator('.badge', { hasText: /completed|failed/ }).waitFor({ timeout: 120_000 });
    if ((await op.locator('.badge').innerText()) === 'failed') assert.fail(`the create operation failed: ${await op.innerText()}`);
    const row = page.locator(`tr[data-vm="${name}"]`);
    await row.locator('.badge', { hasText: 'running' }).waitFor({ timeout: 90_000 });
    await row.locator('td').nth(2).locator('.badge', { hasText: 'Ready' }).waitFor({ timeout: 90_000 });
    await page.locator(`tr[data-agent="${name}"] .badge`, { hasText: 'Ready' }).waitFor({ timeout: 30_000 });
    await screenshot(page, 'fleet');
    const dark = await openBrowser({ colorScheme: 'dark' });
    try {
      await dark.page.goto(`${srv.baseUrl}/`);
      await dark.page.locator(`tr[data-agent="${name}"] .badge`, { hasText: 'Ready' }).waitFor();
      await screenshot(dark.page, 'fleet-dark');
      assert.deepEqual(dark.pageErrors, []);
    } finally {
      await dark.close();
    }
  });

  test("a duplicate name gets the server's error in the form", async () => {
    const page = b.page;
    await createVmFromForm(page, name);
    const dialog = page.getByRole('dialog', { name: 'Create a VM' });
    await dialog.getByRole('alert').filter({ hasText: 'VM_ALREADY_EXISTS' }).first().waitFor();
    await screenshot(page, 'create-vm-server-error');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
  });

  test('the agent page shows its system and metrics', async () => {
    const page = b.page;
    await page.locator(`tr[data-agent="${name}"] a`, { hasText: name }).click();
    await page.waitForURL(/#\/agents\//);
    await page.getByRole('heading', { level: 1, name }).waitFor();
    await page.getByText('Operating system').waitFor();
    await page.getByRole('img', { name: /CPU of .* over the last minutes/ }).waitFor();
    await page.getByText(/No terminal sessions|Sessions are not available/).waitFor();
    await screenshot(page, 'agent');
  });

  test('the events view tails what happened to the VM and filters by type', async () => {
    const page = b.page;
    await page.getByRole('link', { name: 'Events' }).first().click();
    await page.waitForURL(/#\/events/);
    await page.locator('.stream-status', { hasText: 'Live' }).waitFor();
    await page.locator(`tr[data-type="agent.connected"]`, { hasText: name }).first().waitFor({ timeout: 30_000 });
    await screenshot(page, 'events');
    await page.goto(`${srv.baseUrl}/#/events`);
    await page.getByLabel('Type or prefix').fill('vm.');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/type=vm/);
    // The filtered view replaces the unfiltered one (which may linger a moment on a loaded
    // machine, with its rows and its own "Live"): wait for the new one before reading rows.
    await page.getByText('Filtered by type vm.').waitFor();
    await page.locator('.stream-status', { hasText: 'Live' }).waitFor();
    await page.locator('tr[data-type^="vm."]').first().waitFor();
    const types = await Promise.all(
      (await page.locator('tr[data-type]').all()).map(async (r) => (await r.getAttribute('data-type')) ?? ''),
    );
    assert.ok(types.length > 0 && types.every((t) => t.startsWith('vm.')), `only vm.* events: ${types.join(', ')}`);
  });

  test('deleting a VM from its row asks first, with force pre-ticked for a running VM', async () => {
    const page = b.page;
    await page.goto(`${srv.baseUrl}/#/`);
    const row = page.locator(`tr[data-vm="${name}"]`);
    await row.getByRole('button', { name: `Delete ${name}` }).click();
    const dialog = page.getByRole('dialog', { name: `Delete ${name}?` });
    await dialog.waitFor();
    // Cancel has the focus (the safe choice); the running VM needs force, pre-ticked.
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Cancel');
    assert.equal(await dialog.getByLabel(/Force/).isChecked(), true);
    await screenshot(page, 'delete-vm-confirm');
    await dialog.getByLabel(/Also delete its disk/).check();
    await dialog.getByRole('button', { name: 'Delete VM' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Deleted ${name}` })
      .waitFor();
    await row.waitFor({ state: 'detached', timeout: 30_000 });
    assert.deepEqual(b.pageErrors, []);
  });
});
