/**
 * Scenario `dashboard`: the web dashboard's fleet view with 200 agents streaming metrics, in
 * headless Chromium (Debian's /usr/bin/chromium) against the whole server (startServer on
 * 127.0.0.1, port 0, a temporary state dir, libvirt's test:///default).
 *
 * 200 simulated agents (a child process; each its own mTLS gRPC connection) beat like the real
 * agent: a Heartbeat then a Metrics message every second (SVC_AGENT_HEARTBEAT_SECONDS=1, the
 * shortest interval the server can ask for and 30 × its default), beats spread evenly, so the
 * server relays 200 metrics updates/s to the page's WebSocket. Once all are registered the page
 * opens the fleet view (first visit, then a reload with a warm cache); then, for --seconds, the
 * agents' updates are matched with the row repaints that showed them (dashboard-page.ts,
 * dashboard-stats.ts).
 *
 * value   = updates/s that reached the screen within DEADLINE_MS (one metrics interval) of the
 *           agent sending them (an update counts as shown when its row showed it or a newer one
 *           of the same agent);
 * ceiling = updates/s the agents sent, so ratio = the fraction of updates on screen in time.
 * extras  = time to first render (navigation start → all 200 rows in the DOM), sent → on-screen
 *           latency p50/p99, messages received and applied per second against those sent, row
 *           patches and frames that flushed live updates per second, frame intervals, long
 *           tasks, timer lateness, renderer main-thread busy %, the server's CPU.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { DEFAULT_DASHBOARD_DIR } from '../../src/server/dashboard.js';
import { loadConfig } from '../../src/config/load.js';
import { buildDashboard } from '../../src/dashboard/build.js';
import { ensureCa, issueAgentCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { CHROMIUM_PATH, openBrowser, type BrowserSession } from '../../test/support/browser.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { AgentFleetProcess, type FleetStopped } from './dashboard-agents.js';
import { DashboardPage, type FirstRender, type PageWindow, type RendererMetrics } from './dashboard-page.js';
import { matchUpdates, percentile, round, sorted } from './dashboard-stats.js';

const AGENTS = 200;
/** Every agent sends a Heartbeat and a Metrics message this often, ms. */
const INTERVAL_MS = 1000;
/** An update on screen later than this after it was sent is late: one metrics interval, ms. */
const DEADLINE_MS = INTERVAL_MS;
/** After the window, repaints are still collected this long (late updates of the window), ms. */
const GRACE_MS = 2 * DEADLINE_MS;
/** After the warm reload, before measuring (the first poll and the WebSocket settle), ms. */
const SETTLE_MS = 1000;
const RENDER_TIMEOUT_MS = 30_000;
const INSTANCE_ID = 'i-bench-dashboard';

async function ensureDashboardBuilt(): Promise<void> {
  if (!existsSync(join(DEFAULT_DASHBOARD_DIR, 'index.html'))) await buildDashboard();
}

interface Measured {
  registered: number;
  connectMs: number;
  cold: FirstRender;
  warm: FirstRender;
  fromMs: number;
  toMs: number;
  page: PageWindow;
  pageStart: { messageCount: number; rowPatches: number; liveFlushes: number; atMs: number };
  renderer: { start: RendererMetrics; end: RendererMetrics };
  serverCpuMs: number;
  fleet: FleetStopped;
  displays: Map<string, Array<[number, number]>>;
  pageErrors: string[];
}

async function measure(seconds: number, signal: AbortSignal): Promise<Measured> {
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(`${CHROMIUM_PATH} not found: install Debian's chromium package (node src/setup/ensure.mjs --tests does)`);
  await ensureDashboardBuilt();
  const stateDir = await mkdtemp(join(tmpdir(), 'sandboxd-bench-dashboard-'));
  let server: ServerHandle | undefined;
  let browser: BrowserSession | undefined;
  let agents: AgentFleetProcess | undefined;
  // The harness's hard limit: end what may hang (page waits, the agent process) so we unwind.
  const onAbort = (): void => {
    void browser?.close();
    void agents?.kill();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const config = loadConfig({
      SVC_STATE_DIR: stateDir,
      SVC_HTTP_ADDR: '127.0.0.1:0',
      SVC_WS_ADDR: '127.0.0.1:0',
      SVC_GRPC_ADDR: '127.0.0.1:0',
      SVC_ADMIN_ADDR: '127.0.0.1:0',
      SVC_HYPERVISOR_URI: 'test:///default',
      SVC_AGENT_HEARTBEAT_SECONDS: String(Math.max(1, Math.round(INTERVAL_MS / 1000))),
    });
    server = await startServer(config, pino({ level: 'silent' }));
    const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    const issued = await issueAgentCert(ca, { instanceId: INSTANCE_ID });
    agents = AgentFleetProcess.fork();
    // The browser starts while the agents register; both settle before anything can throw, so
    // the finally below closes whatever did start.
    const [opened, fleetStart] = await Promise.allSettled([
      openBrowser().then((b) => (browser = b)),
      agents.start({
        target: `127.0.0.1:${server.ports.grpc}`,
        tls: { ca: ca.caCertPem, cert: issued.certPem, key: issued.keyPem },
        instanceId: INSTANCE_ID,
        prefix: 'agent-dash-',
        count: AGENTS,
        concurrency: 20,
        intervalMs: INTERVAL_MS,
        connectTimeoutMs: 30_000,
      }),
    ]);
    if (opened.status === 'rejected') throw opened.reason;
    if (fleetStart.status === 'rejected') throw fleetStart.reason;
    const session = opened.value;
    const started = fleetStart.value;
    if (started.registered === 0) throw new Error(`no agent registered (${started.failed} failed)`);
    signal.throwIfAborted();
    const page = await DashboardPage.attach(session.page, started.registered);
    const url = `http://127.0.0.1:${server.ports.http}/`;
    const cold = await page.firstRender(url, 'goto', RENDER_TIMEOUT_MS);
    const warm = await page.firstRender(url, 'reload', RENDER_TIMEOUT_MS);
    await page.waitLive(RENDER_TIMEOUT_MS);
    await sleep(SETTLE_MS, undefined, { signal });

    const rendererStart = await page.rendererMetrics();
    const cpu0 = process.cpuUsage();
    const fromMs = Date.now();
    const pageStart = await page.begin();
    await sleep(seconds * 1000, undefined, { signal });
    const toMs = Date.now();
    const pageWindow = await page.end();
    const serverCpu = process.cpuUsage(cpu0);
    const rendererEnd = await page.rendererMetrics();
    await sleep(GRACE_MS, undefined, { signal });
    const displays = await page.displays();
    const fleet = await agents.stop();
    return {
      registered: started.registered,
      connectMs: started.connectMs,
      cold,
      warm,
      fromMs,
      toMs,
      page: pageWindow,
      pageStart,
      renderer: { start: rendererStart, end: rendererEnd },
      serverCpuMs: (serverCpu.user + serverCpu.system) / 1000,
      fleet,
      displays,
      pageErrors: [...session.pageErrors],
    };
  } finally {
    signal.removeEventListener('abort', onAbort);
    await browser?.close();
    await agents?.kill();
    await server?.stop().catch(() => undefined);
    await rm(stateDir, { recursive: true, force: true });
  }
}

function report(m: Measured): BenchResult {
  const windowS = (m.toMs - m.fromMs) / 1000;
  const pageS = (m.page.counters.atMs - m.pageStart.atMs) / 1000;
  const d = matchUpdates(m.fleet.sends, m.displays, { fromMs: m.fromMs, toMs: m.toMs }, DEADLINE_MS);
  if (d.sent === 0) throw new Error('the agents sent no metrics update during the window');
  const frames = sorted(m.page.frames);
  const lags = sorted(m.page.lags);
  const longTasks = sorted(m.page.longTasks);
  const rowPatches = m.page.counters.rowPatches - m.pageStart.rowPatches;
  const liveFlushes = m.page.counters.liveFlushes - m.pageStart.liveFlushes;
  /** Share of the window a cumulative renderer figure (seconds) grew by, %. */
  const rendererPct = (name: string): number => round((((m.renderer.end[name] ?? 0) - (m.renderer.start[name] ?? 0)) / windowS) * 100);
  const problems: string[] = [];
  if (m.registered < AGENTS) problems.push(`only ${m.registered} of ${AGENTS} agents registered`);
  if (m.fleet.ended > 0) problems.push(`${m.fleet.ended} agent streams were ended by the server while streaming`);
  if (m.page.counters.liveState !== 'open') problems.push(`the page's WebSocket was ${m.page.counters.liveState} at the end of the window`);
  if (m.page.counters.agents !== m.registered) problems.push(`the page listed ${m.page.counters.agents} agents, not ${m.registered}`);
  if (m.pageErrors.length > 0) problems.push(...m.pageErrors.slice(0, 5).map((e) => `page: ${e}`));
  return {
    value: round(d.timely / windowS, 2),
    ceiling: round(d.sent / windowS, 2),
    extra: {
      agents: m.registered,
      intervalMs: INTERVAL_MS,
      deadlineMs: DEADLINE_MS,
      firstRenderMs: round(m.cold.rowsMs),
      firstRenderMarkMs: m.cold.markMs === null ? null : round(m.cold.markMs),
      firstContentfulPaintMs: m.cold.fcpMs === null ? null : round(m.cold.fcpMs),
      reloadRenderMs: round(m.warm.rowsMs),
      registerAllMs: Math.round(m.connectMs),
      sent: d.sent,
      shownRatio: round(d.shown / d.sent, 3),
      shownExactlyRatio: round(d.shownExactly / d.sent, 3),
      latencyP50Ms: percentile(d.latenciesMs, 50),
      latencyP99Ms: percentile(d.latenciesMs, 99),
      latencyMaxMs: percentile(d.latenciesMs, 100),
      sentPerSecond: round(d.sent / windowS),
      pageMetricsPerSecond: round(m.page.metricsReceived / pageS),
      updateRatio: round(m.page.metricsApplied / pageS / (d.sent / windowS), 3),
      rowPatchesPerSecond: round(rowPatches / pageS),
      liveFlushesPerSecond: round(liveFlushes / pageS),
      fps: round(frames.length / pageS),
      frameP50Ms: round(percentile(frames, 50)),
      frameP99Ms: round(percentile(frames, 99)),
      framesOver50Ms: frames.filter((f) => f > 50).length,
      longTasks: longTasks.length,
      longTaskMaxMs: round(percentile(longTasks, 100)),
      timerLagP99Ms: round(percentile(lags, 99)),
      pageTaskPct: rendererPct('TaskDuration'),
      pageCpuPct: rendererPct('ThreadTime'),
      pageScriptPct: rendererPct('ScriptDuration'),
      pageStylePct: rendererPct('RecalcStyleDuration'),
      pageLayoutPct: rendererPct('LayoutDuration'),
      rendererCpuPct: rendererPct('ProcessTime'),
      pageHeapMiB: round((m.renderer.end['JSHeapUsedSize'] ?? 0) / 1024 / 1024),
      serverCpuPct: round((m.serverCpuMs / (windowS * 1000)) * 100),
      ...(m.page.longTaskError !== null && { longTaskError: m.page.longTaskError }),
      notes:
        'value/ceiling = metrics updates/s on screen within deadlineMs of the agent sending them / updates/s sent; ' +
        'firstRenderMs = navigation start to all agent rows in the DOM on a first visit (reloadRenderMs: warm cache); ' +
        'updateRatio = metrics messages/s the page applied / updates/s sent; rowPatchesPerSecond includes the 5 s agent poll (one patch per agent per poll); ' +
        'pageTaskPct/pageCpuPct = renderer main-thread task wall time/CPU time per window (Script, Style, Layout: parts of it), rendererCpuPct = renderer process CPU; serverCpuPct = the bench process (server main thread and actor workers) per core',
    },
    problems,
  };
}

export const dashboard: BenchScenario = {
  name: 'dashboard',
  description:
    'the fleet view in headless Chromium with 200 agents streaming metrics each second: updates on screen in time, first render, frame and long-task figures',
  unit: 'updates/s',
  target: { ratioAtLeast: 0.95 },
  async run({ seconds, signal }): Promise<BenchResult> {
    return report(await measure(seconds, signal));
  },
};
