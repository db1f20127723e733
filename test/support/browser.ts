/**
 * Headless Chromium for the dashboard tests: Debian's /usr/bin/chromium driven by playwright-core
 * (no downloaded browser), a fresh profile per launch, nothing phoning home. Screenshots go to
 * test-output/screenshots/ (gitignored) so a human can look at what the tests saw.
 *
 *   const reason = chromiumMissing();
 *   test('…', { skip: reason ?? false }, async () => {
 *     const b = await openBrowser();
 *     try { await b.page.goto(url); … await screenshot(b.page, 'fleet'); } finally { await b.close(); }
 *   });
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { repoRoot } from './paths.js';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/** Where screenshots are written. */
export const SCREENSHOT_DIR = join(repoRoot, 'test-output', 'screenshots');

const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--disable-dev-shm-usage',
];

/** Null when Chromium can run here; otherwise why the browser tests are skipped (printed loudly). */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  const reason = `SKIPPED: ${CHROMIUM_PATH} not found — install Debian's chromium package (npm test's set-up does) to run the dashboard browser tests`;
  process.stderr.write(`\n*** ${reason} ***\n\n`);
  return reason;
}

export interface BrowserSession {
  readonly context: BrowserContext;
  readonly page: Page;
  /** console.error lines and uncaught page errors seen so far (tests assert it stays empty). */
  readonly pageErrors: string[];
  close(): Promise<void>;
}

export interface OpenBrowserOptions {
  /** Default 1440×900. */
  viewport?: { width: number; height: number };
  /** Emulated prefers-color-scheme. Default light. */
  colorScheme?: 'light' | 'dark';
  /** Chromium switches added to the defaults. */
  extraArgs?: readonly string[];
}

/** Launches Chromium headless with a fresh user-data-dir and opens one page. */
export async function openBrowser(opts: OpenBrowserOptions = {}): Promise<BrowserSession> {
  const userDataDir = await mkdtemp(join(tmpdir(), 'sandboxd-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: [...ARGS, ...(opts.extraArgs ?? [])],
      viewport: opts.viewport ?? { width: 1440, height: 900 },
      colorScheme: opts.colorScheme ?? 'light',
      reducedMotion: 'reduce',
      timeout: 60_000,
    });
  } catch (err) {
    await rm(userDataDir, { recursive: true, force: true });
    throw err;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    // Chrome logs every 4xx/5xx fetch as "Failed to load resource"; the app shows those itself.
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) pageErrors.push(`console.error: ${msg.text()}`);
  });
  let closed: Promise<void> | undefined;
  return {
    context,
    page,
    pageErrors,
    close: () =>
      (closed ??= (async () => {
        await context.close().catch(() => undefined);
        await rm(userDataDir, { recursive: true, force: true });
      })()),
  };
}

/** Saves a full-page screenshot as test-output/screenshots/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string, opts: { fullPage?: boolean } = {}): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: opts.fullPage ?? false, animations: 'disabled' });
  return path;
}
