/**
 * The browser side of the `dashboard` scenario: a probe installed in the page before the app
 * starts (page.addInitScript), and the calls that read it.
 *
 * The probe records, on the page's own clocks:
 * - first render: when the agents table first holds every expected row (ms since navigation
 *   start), next to the app's own `sandboxd:fleet-agents-rendered` mark and first contentful paint;
 * - repaints: each time an agent row's DOM changes and the row then shows a newer metrics update
 *   than before (the update's sequence is in the low bits of memory_used_bytes), with Date.now();
 * - while measuring: animation-frame intervals, long tasks (PerformanceObserver 'longtask'),
 *   timer lateness (a 50 ms interval), and the `metrics` messages received and applied (read
 *   through the app's `window.__sandboxd` hooks).
 *
 * The page code is plain JavaScript in strings: this project compiles without the DOM library.
 */
import type { CDPSession, Page } from 'playwright-core';
import { kSeqBits } from './dashboard-stats.js';

const PROBE_SOURCE = `(opts) => {
  const S = {
    expected: opts.expected, rowsAtMs: null, measuring: false, off: null,
    frames: [], longTasks: [], lags: [], displays: {}, lastSeq: new Map(),
    metricsReceived: 0, metricsApplied: 0,
  };
  window.__bench = S;
  try {
    new PerformanceObserver((list) => {
      if (S.measuring) for (const e of list.getEntries()) S.longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
  } catch (err) { S.longTaskError = String(err); }
  let lastFrame = null;
  const onFrame = (t) => {
    if (S.measuring && lastFrame !== null) S.frames.push(t - lastFrame);
    lastFrame = t;
    requestAnimationFrame(onFrame);
  };
  requestAnimationFrame(onFrame);
  let dueAt = performance.now() + 50;
  setInterval(() => {
    const now = performance.now();
    if (S.measuring) S.lags.push(Math.max(0, now - dueAt));
    dueAt = now + 50;
  }, 50);
  const seqSpan = 2 ** opts.seqBits;
  const watchRows = (tbody) => {
    new MutationObserver((records) => {
      const now = Date.now();
      const ids = new Set();
      for (const r of records) {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        const tr = el === null ? null : el.closest('tr[data-agent]');
        if (tr !== null) ids.add(tr.getAttribute('data-agent'));
      }
      const agents = window.__sandboxd && window.__sandboxd.fleet.agents;
      if (!agents) return;
      for (const id of ids) {
        const row = agents.get(id);
        if (row === undefined || row.metrics === null) continue;
        const seq = row.metrics.memoryUsedBytes % seqSpan;
        if (seq <= (S.lastSeq.get(id) ?? -1)) continue;
        S.lastSeq.set(id, seq);
        (S.displays[id] ??= []).push([seq, now]);
      }
    }).observe(tbody, { subtree: true, childList: true, characterData: true });
  };
  const rowsSeen = new MutationObserver(() => {
    const rows = document.querySelectorAll('tr[data-agent]');
    if (rows.length < S.expected) return;
    S.rowsAtMs = performance.now();
    rowsSeen.disconnect();
    watchRows(rows[0].parentElement);
  });
  rowsSeen.observe(document, { childList: true, subtree: true });
}`;

const FIRST_RENDER = `(() => {
  const mark = performance.getEntriesByName('sandboxd:fleet-agents-rendered')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const nav = performance.getEntriesByType('navigation')[0];
  return {
    rowsMs: window.__bench.rowsAtMs,
    markMs: mark === undefined ? null : mark.startTime,
    fcpMs: fcp === undefined ? null : fcp.startTime,
    domContentLoadedMs: nav === undefined ? null : nav.domContentLoadedEventEnd,
  };
})()`;

const COUNTERS = `(() => {
  const app = window.__sandboxd;
  return {
    atMs: Date.now(), messageCount: app.live.messageCount, rowPatches: app.fleet.stats.agentRowPatches,
    liveFlushes: app.fleet.stats.liveFlushes, liveState: app.live.state.kind, agents: app.fleet.agents.size,
  };
})()`;

const BEGIN = `(() => {
  const S = window.__bench;
  const app = window.__sandboxd;
  S.off = app.live.messages.on(({ msg }) => {
    if (msg.type !== 'metrics') return;
    S.metricsReceived++;
    const row = app.fleet.agents.get(msg.agent_id);
    if (row !== undefined && row.metrics !== null && row.metrics.atMs === msg.timestamp) S.metricsApplied++;
  });
  S.frames = []; S.longTasks = []; S.lags = []; S.metricsReceived = 0; S.metricsApplied = 0;
  S.measuring = true;
  return ${COUNTERS};
})()`;

const END = `(() => {
  const S = window.__bench;
  S.measuring = false;
  if (S.off !== null) S.off();
  return { counters: ${COUNTERS}, frames: S.frames, longTasks: S.longTasks, lags: S.lags, metricsReceived: S.metricsReceived, metricsApplied: S.metricsApplied, longTaskError: S.longTaskError ?? null };
})()`;

/**
 * What waitForFunction predicates read in the page. They are functions, not strings: the
 * dashboard's CSP has no 'unsafe-eval', which string predicates need.
 */
interface Probed {
  __bench?: { rowsAtMs: number | null };
  __sandboxd?: { live: { state: { kind: string } } };
}

/** Times of the first render, ms since navigation start (null: the page did not record it). */
export interface FirstRender {
  /** Every expected agent row is in the DOM. */
  readonly rowsMs: number;
  /** The app's own mark `sandboxd:fleet-agents-rendered`. */
  readonly markMs: number | null;
  readonly fcpMs: number | null;
  readonly domContentLoadedMs: number | null;
}

/** The app's counters (window.__sandboxd) at one moment. */
export interface PageCounters {
  readonly atMs: number;
  readonly messageCount: number;
  readonly rowPatches: number;
  readonly liveFlushes: number;
  /** LiveSocket state kind: 'open' while the WebSocket is up. */
  readonly liveState: string;
  readonly agents: number;
}

export interface PageWindow {
  readonly counters: PageCounters;
  /** Animation-frame intervals, ms. */
  readonly frames: number[];
  /** Long task durations, ms. */
  readonly longTasks: number[];
  /** Lateness of a 50 ms timer, ms. */
  readonly lags: number[];
  readonly metricsReceived: number;
  readonly metricsApplied: number;
  readonly longTaskError: string | null;
}

/**
 * The renderer's cumulative figures from the DevTools protocol (Performance.getMetrics): seconds
 * for the *Duration and *Time entries (TaskDuration: main-thread task wall time; ThreadTime:
 * main-thread CPU; ProcessTime: renderer process CPU), bytes for JSHeapUsedSize.
 */
export type RendererMetrics = Readonly<Record<string, number>>;

export class DashboardPage {
  readonly page: Page;
  readonly #cdp: CDPSession;

  private constructor(page: Page, cdp: CDPSession) {
    this.page = page;
    this.#cdp = cdp;
  }

  /** Installs the probe (for every later navigation) and the DevTools performance domain. */
  static async attach(page: Page, expectedRows: number): Promise<DashboardPage> {
    await page.addInitScript(`(${PROBE_SOURCE})(${JSON.stringify({ expected: expectedRows, seqBits: kSeqBits })})`);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    return new DashboardPage(page, cdp);
  }

  /** Opens (or reloads) the fleet view and waits until every expected agent row is in the DOM. */
  async firstRender(url: string, how: 'goto' | 'reload', timeoutMs: number): Promise<FirstRender> {
    if (how === 'goto') await this.page.goto(url, { waitUntil: 'commit', timeout: timeoutMs });
    else await this.page.reload({ waitUntil: 'commit', timeout: timeoutMs });
    await this.page.waitForFunction(() => ((globalThis as Probed).__bench?.rowsAtMs ?? null) !== null, undefined, {
      timeout: timeoutMs,
      polling: 50,
    });
    return this.page.evaluate<FirstRender>(FIRST_RENDER);
  }

  /** Waits until the app's WebSocket is open. */
  async waitLive(timeoutMs: number): Promise<void> {
    await this.page.waitForFunction(() => (globalThis as Probed).__sandboxd?.live.state.kind === 'open', undefined, {
      timeout: timeoutMs,
      polling: 50,
    });
  }

  /** Starts the measuring window; returns the counters at its start. */
  async begin(): Promise<PageCounters> {
    return this.page.evaluate<PageCounters>(BEGIN);
  }

  /** Ends the measuring window. */
  async end(): Promise<PageWindow> {
    return this.page.evaluate<PageWindow>(END);
  }

  /** Every repaint recorded since the first render: per agent, [sequence shown, Unix ms]. */
  async displays(): Promise<Map<string, Array<[number, number]>>> {
    const d = await this.page.evaluate<Record<string, Array<[number, number]>>>('window.__bench.displays');
    return new Map(Object.entries(d));
  }

  async rendererMetrics(): Promise<RendererMetrics> {
    const { metrics } = await this.#cdp.send('Performance.getMetrics');
    return Object.fromEntries(metrics.map((m) => [m.name, m.value]));
  }
}
