/**
 * The whole server in-process for the dashboard browser tests: startServer() on port 0 with a
 * temporary state dir (libvirt's test:///default, local agents), the dashboard built if it is
 * not yet, and a headless Chromium pointed at it.
 *
 * The server logs at info into a bounded buffer (`logTail()`), which timeouts quote; with
 * DASHBOARD_TEST_LOG=1 every line also goes to stdout.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { Locator, Page } from 'playwright-core';
import { DEFAULT_DASHBOARD_DIR } from '../../src/server/dashboard.js';
import { ApiClient } from '../../src/client/api-client.js';
import { loadConfig } from '../../src/config/load.js';
import { buildDashboard } from '../../src/dashboard/build.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { vmPaths } from '../../src/vms/vm-paths.js';
import { DEADLINE_MS, tail, waitFor, waitWithin } from '../support/wait.js';

/** Log lines kept for timeout messages. */
const LOG_TAIL_LINES = 200;

export interface DashboardServer {
  readonly server: ServerHandle;
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  readonly stateDir: string;
  /** The server's last `lines` log lines (info and above), for a timeout message. */
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

let built: Promise<unknown> | null = null;

/** Builds the dashboard into its default folder once per process when it is missing. */
export function ensureDashboardBuilt(): Promise<unknown> {
  built ??= existsSync(join(DEFAULT_DASHBOARD_DIR, 'index.html')) ? Promise.resolve() : buildDashboard();
  return built;
}

/** A unique VM name for this run (test:///default is shared by every test in the process). */
export function vmName(label: string): string {
  return `agent-dash-${label}-${Math.random().toString(36).slice(2, 7)}`;
}

export async function startDashboardServer(env: Record<string, string> = {}): Promise<DashboardServer> {
  await ensureDashboardBuilt();
  const stateDir = await mkdtemp(join(tmpdir(), 'sandboxd-dash-'));
  const config = loadConfig({
    SVC_STATE_DIR: stateDir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ADMIN_ADDR: '127.0.0.1:0',
    SVC_ACTOR_SHARDS: '1',
    ...env,
  });
  const logLines: string[] = [];
  const echo = process.env['DASHBOARD_TEST_LOG'] === '1';
  const keep = (line: string): void => {
    logLines.push(line.trimEnd());
    if (logLines.length > LOG_TAIL_LINES) logLines.shift();
    if (echo) process.stdout.write(line);
  };
  let server: ServerHandle;
  try {
    server = await startServer(config, pino({ level: 'info' }, { write: (line: string) => keep(line) }));
  } catch (err) {
    await rm(stateDir, { recursive: true, force: true });
    throw err;
  }
  const baseUrl = `http://127.0.0.1:${server.ports.http}`;
  return {
    server,
    baseUrl,
    stateDir,
    logTail: (lines = 30) => `server log (last ${lines} lines):\n${logLines.slice(-lines).join('\n')}`,
    stop: async () => {
      await server.stop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/**
 * Creates a VM through the API and waits until its operation completed and its agent is Ready;
 * the timeout shows the agent as listed, the tail of the VM's agent.log and the server's log.
 */
export async function createReadyVm(srv: DashboardServer, name: string, deadlineMs: number = DEADLINE_MS.agent): Promise<void> {
  const api = new ApiClient({ baseUrl: srv.baseUrl });
  const accepted = await api.createVm({ name, vcpus: 1, memory_mb: 512, disk_gb: 1 });
  const op = await api.waitForOperation(accepted.operation.id, { timeoutMs: deadlineMs });
  assert.equal(op.status, 'completed', `create ${name}: ${op.error ?? ''}`);
  const agentOf = async (): Promise<{ id: string; status: string } | undefined> =>
    (await api.listAgents()).agents.find((a) => a.id === name);
  const agentLog = (): string => {
    try {
      return tail(readFileSync(vmPaths(srv.stateDir, name).agentLog, 'utf8'), 1500);
    } catch (err) {
      return `(unreadable: ${err instanceof Error ? err.message : String(err)})`;
    }
  };
  await waitFor(`the agent of VM ${name} to be Ready`, async () => (await agentOf())?.status === 'Ready', {
    deadlineMs,
    intervalMs: 250,
    lastState: async () => `agent ${JSON.stringify((await agentOf()) ?? 'not listed')}; its agent.log ${agentLog()}; ${srv.logTail()}`,
  });
}

/** The text of `selector` on `page` (its last `chars` characters), or why it cannot be read: for timeout messages. */
export async function textOn(page: Page, selector: string, chars = 800): Promise<string> {
  try {
    const texts = await page.locator(selector).allInnerTexts();
    const text = texts.join('\n');
    return JSON.stringify(text.length > chars ? `…${text.slice(-chars)}` : text);
  } catch (err) {
    return `(unreadable: ${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
  }
}

/**
 * Waits until `locator` is on `page` (Playwright watches the page); the timeout names `what` and
 * shows `lastState` — by default the page's address and the text of its main area.
 */
export async function shows(
  page: Page,
  what: string,
  locator: Locator,
  opts: { deadlineMs?: number; lastState?: () => Promise<string> } = {},
): Promise<void> {
  await waitWithin(what, (ms) => locator.waitFor({ timeout: ms }), {
    deadlineMs: opts.deadlineMs ?? DEADLINE_MS.process,
    lastState: opts.lastState ?? (async () => `page ${page.url()} shows ${await textOn(page, 'main')}`),
  });
}
