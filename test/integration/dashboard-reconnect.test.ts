/**
 * The dashboard survives a server restart: while the server is down it says so (banner, Offline
 * pill) and keeps what it showed; when a server is back on the same address it reconnects by
 * itself (HTTP polls, the WebSocket at its new address, the events tail), says so, notices that
 * the new server numbers events from 1 again, and shows the new events.
 *
 * The page talks to a stable address: a small TCP forwarder in front of the server, switched to
 * the new server's port. (Restarting the server itself on the same port right away is refused
 * by uWS while the old connections sit in TIME_WAIT, which is a server matter, not the page's.)
 */
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { startDashboardServer, type DashboardServer } from './dashboard-harness.js';

const skip = chromiumMissing();

async function postEvent(baseUrl: string, vm: string, type = 'vm.started'): Promise<void> {
  const res = await fetch(`${baseUrl}/api/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ event_type: type, vm_name: vm, details: { source: 'dashboard-reconnect-test' } }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** A TCP forwarder on a fixed local port to whatever `target.port` is (refuses while it is 0). */
async function forwarder(target: { port: number }): Promise<{ server: Server; port: number; dropAll(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    if (target.port === 0) {
      client.destroy();
      return;
    }
    const up = connect(target.port, '127.0.0.1');
    sockets.add(up);
    up.on('close', () => sockets.delete(up));
    client.pipe(up).on('error', () => client.destroy());
    up.pipe(client).on('error', () => up.destroy());
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as { port: number }).port,
    dropAll: () => {
      for (const s of sockets) s.destroy();
    },
  };
}

describe('dashboard: server restart', { skip: skip ?? false, timeout: 240_000 }, () => {
  let first: DashboardServer | undefined;
  let second: DashboardServer | undefined;
  let b: BrowserSession | undefined;
  let fwd: Awaited<ReturnType<typeof forwarder>> | undefined;
  after(async () => {
    await b?.close();
    await first?.stop();
    await second?.stop();
    fwd?.dropAll();
    fwd?.server.close();
  });

  test('banner while down, automatic recovery, restart noticed in the events tail', async () => {
    first = await startDashboardServer();
    const target = { port: first.server.ports.http };
    fwd = await forwarder(target);
    const url = `http://127.0.0.1:${fwd.port}`;
    b = await openBrowser();
    const page = b.page;
    await page.goto(`${url}/#/events`);
    await page.locator('.conn-pill[data-state="live"]').waitFor();
    await page.locator('.stream-status', { hasText: 'Live' }).waitFor();
    // A cursor well above what a fresh server will have.
    for (let i = 0; i < 40; i++) await postEvent(first.baseUrl, 'agent-before');
    await page.locator('tr[data-type="vm.started"]', { hasText: 'agent-before' }).first().waitFor();

    target.port = 0;
    fwd.dropAll();
    await first.stop();
    first = undefined;
    await page.getByRole('alert').filter({ hasText: 'Cannot reach sandboxd' }).waitFor({ timeout: 30_000 });
    await page.locator('.conn-pill[data-state="offline"]').waitFor();
    // What was shown stays.
    assert.ok((await page.locator('tr[data-type="vm.started"]').count()) >= 40);
    await screenshot(page, 'reconnecting');

    second = await startDashboardServer();
    target.port = second.server.ports.http;
    await page.getByRole('status').filter({ hasText: 'Reconnected to sandboxd' }).waitFor({ timeout: 60_000 });
    await page.locator('.banner').waitFor({ state: 'hidden' });
    await page.locator('.conn-pill[data-state="live"]').waitFor({ timeout: 30_000 });
    await page.locator('tr.row-marker', { hasText: 'The server restarted' }).waitFor({ timeout: 30_000 });
    await postEvent(second.baseUrl, 'agent-after');
    await page.locator('tr[data-type="vm.started"]', { hasText: 'agent-after' }).waitFor({ timeout: 30_000 });
    await screenshot(page, 'reconnected');
    assert.deepEqual(b.pageErrors, []);
  });
});
