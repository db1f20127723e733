/**
 * Provider capabilities in the dashboard (spec 4.13): a running VM's Checkpoint action appears only
 * when its provider advertises checkpoints — on the test driver by default, not when the server
 * withholds the capability (SVC_HYPERVISOR_WITHHELD_CAPABILITIES), and never on a stopped VM.
 * Two real servers in headless Chromium over the same libvirt test driver.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { startDashboardServer, vmName, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();

describe('dashboard: provider capabilities', { skip: skip ?? false, timeout: 240_000 }, () => {
  let open: DashboardServer;
  let narrow: DashboardServer;
  let b: BrowserSession;
  const running = vmName('caps-run');
  const stopped = vmName('caps-off');

  before(async () => {
    open = await startDashboardServer();
    narrow = await startDashboardServer({ SVC_HYPERVISOR_WITHHELD_CAPABILITIES: 'checkpoint' });
    for (const n of [running, stopped]) await open.server.hypervisor.define({ name: n, vcpus: 1, memoryMiB: 128 });
    await open.server.hypervisor.startDomain(running);
    b = await openBrowser();
  });
  after(async () => {
    await b?.close();
    await open?.stop();
    await narrow?.stop();
  });

  test('advertised: a running VM offers Checkpoint, a stopped one does not', async () => {
    const page = b.page;
    await page.goto(`${open.baseUrl}/`);
    const row = page.locator(`tr[data-vm="${running}"]`);
    await row.getByRole('button', { name: `Stop ${running}` }).waitFor();
    await row.getByRole('button', { name: `Checkpoint ${running}` }).waitFor();
    const off = page.locator(`tr[data-vm="${stopped}"]`);
    await off.getByRole('button', { name: `Start ${stopped}` }).waitFor();
    assert.equal(await off.getByRole('button', { name: `Checkpoint ${stopped}` }).count(), 0);
    await screenshot(page, 'fleet-capabilities-advertised');
  });

  test('withheld: the same running VM offers no Checkpoint', async () => {
    const page = b.page;
    await page.goto(`${narrow.baseUrl}/`);
    const row = page.locator(`tr[data-vm="${running}"]`);
    // The VM list and the capabilities are read in one poll before the table renders, so a row
    // showing its lifecycle actions was rendered with the capabilities.
    await row.getByRole('button', { name: `Stop ${running}` }).waitFor();
    assert.equal(await row.getByRole('button', { name: `Checkpoint ${running}` }).count(), 0);
    await screenshot(page, 'fleet-capabilities-withheld');
  });
});
