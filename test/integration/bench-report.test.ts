/**
 * The bench's HTML report (`npm run bench -- --html FILE`, native-bench/report/) opened in
 * Debian's headless Chromium: a page from a real short run and pages from recorded runs
 * (test/fixtures/bench/*.ndjson, result lines saved from real runs on the 2-core development VM).
 * Each page must render every scenario of its input, show the earlier run with --compare, log no
 * console error and fetch nothing (it is handed around and opened offline). No speed is asserted.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromiumMissing, openBrowser, screenshot, type BrowserSession } from '../support/browser.js';
import { distRoot, repoRoot } from '../support/paths.js';
import { runProgram, type ProgramRun } from '../support/run-program.js';

const RUN_JS = join(distRoot, 'native-bench', 'run.js');
const FIXTURES = join(repoRoot, 'test', 'fixtures', 'bench');
/** The run the issue started from (ring … vm-ops, no histograms). */
const OLD_RUN = join(FIXTURES, 'run-before.ndjson');
/** A later run with a machine record and HDR percentiles (pty). */
const NEW_RUN = join(FIXTURES, 'run-after.ndjson');

function bench(args: readonly string[]): Promise<ProgramRun> {
  return runProgram(process.execPath, [RUN_JS, ...args]);
}

function scenariosOf(ndjson: string): string[] {
  return ndjson
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { scenario?: string })
    .flatMap((l) => (typeof l.scenario === 'string' ? [l.scenario] : []));
}

interface Opened {
  /** data-scenario of each scenario section, in page order. */
  sections: string[];
  /** Requests for anything but the page itself. */
  requests: string[];
}

/** Opens `file` in the browser and collects what every test checks. */
async function open(b: BrowserSession, file: string): Promise<Opened> {
  const requests: string[] = [];
  const page = pathToFileURL(file).href;
  const onRequest = (r: { url(): string }): void => {
    if (r.url() !== page) requests.push(r.url());
  };
  b.page.on('request', onRequest);
  try {
    await b.page.goto(page);
    await b.page.locator('#summary table').waitFor();
    const sections: string[] = [];
    for (const s of await b.page.locator('section.scenario').all()) sections.push((await s.getAttribute('data-scenario')) ?? '');
    return { sections, requests };
  } finally {
    b.page.off('request', onRequest);
  }
}

describe('bench HTML report in Chromium', { skip: chromiumMissing() ?? false, timeout: 180_000 }, () => {
  let b: BrowserSession;
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bench-report-'));
    b = await openBrowser({ viewport: { width: 1280, height: 900 } });
  });
  after(async () => {
    await b?.close();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  test('a real run of ring writes a page with its scenario, the machine, the commit and the earlier run overlaid', async () => {
    const file = join(dir, 'ring.html');
    const r = await bench(['ring', '--seconds', '1', '--html', file, '--compare', OLD_RUN]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(scenariosOf(r.stdout), ['ring'], 'stdout still carries only the result line');
    assert.match(r.stderr, /\[bench\] report: .*ring\.html \(1 scenarios\)/);
    const o = await open(b, file);
    assert.deepEqual(o.sections, ['ring']);
    const machine = await b.page.locator('#machine').innerText();
    assert.match(machine, new RegExp(`Node\\.js\\s+${process.version.replace(/\./g, '\\.')}`));
    assert.match(machine, /× \d+ cores/);
    assert.match(machine, /accelerator\s+(kvm|tcg)/);
    assert.match(machine, /commit\s+[0-9a-f]{12}/);
    const ring = b.page.locator('section.scenario[data-scenario="ring"]');
    assert.match(await ring.innerText(), /value\s+[\d,.]+ MB\/s[\s\S]*ceiling\s+[\d,.]+ MB\/s/);
    // the earlier run: hatched bars for value, ceiling and ratio, and a change in the summary
    assert.equal(await ring.locator('.bar-row.before').count(), 3);
    assert.match(await b.page.locator('#summary tr[data-scenario="ring"]').innerText(), /(better|worse|same)/);
    // scenarios of the earlier run that did not run now are listed as such
    assert.equal(await b.page.locator('#summary tr.gone').count(), scenariosOf(await readFile(OLD_RUN, 'utf8')).length - 1);
    await screenshot(b.page, 'bench-report-ring', { fullPage: true });
    assert.deepEqual(o.requests, [], 'the page fetched something');
    assert.deepEqual(b.pageErrors, []);
  });

  test('--from renders every scenario of a recorded run, its percentile plots and the compared run', async () => {
    const file = join(dir, 'from.html');
    const r = await bench(['--html', file, '--from', NEW_RUN, '--compare', OLD_RUN]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '', 'nothing was run');
    const names = scenariosOf(await readFile(NEW_RUN, 'utf8'));
    const o = await open(b, file);
    assert.deepEqual(o.sections, names);
    for (const name of names) {
      const href = await b.page.locator(`#summary tr[data-scenario="${name}"] a`).getAttribute('href');
      assert.equal(
        await b.page.locator(`section.scenario${href ?? ''}`).getAttribute('data-scenario'),
        name,
        'the summary links to its section',
      );
    }
    // the machine the run recorded, not the one rendering it
    assert.doesNotMatch(await b.page.locator('#machine').innerText(), /rendered this page/);
    // every line carrying percentiles has a plot with a line per series; compared series are dashed
    const withPlots = (await readFile(NEW_RUN, 'utf8')).split('\n').filter((l) => l.includes('"percentiles"'));
    assert.ok(withPlots.length > 0, 'the fixture has percentile series');
    for (const line of withPlots) {
      const name = (JSON.parse(line) as { scenario: string }).scenario;
      const svg = b.page.locator(`section.scenario[data-scenario="${name}"] svg.plot`);
      assert.ok((await svg.count()) >= 1, `${name} has a plot`);
      assert.ok((await svg.first().locator('g.series polyline').count()) >= 1, `${name} plot has lines`);
      assert.match((await svg.first().getAttribute('aria-label')) ?? '', /by percentile/);
    }
    // scenarios in both runs get their "before" bars
    const both = names.filter((n) => n !== 'pty' && n !== 'terminal');
    for (const name of both)
      assert.ok((await b.page.locator(`section.scenario[data-scenario="${name}"] .bar-row.before`).count()) >= 1, name);
    // workers vs inline, where the lines report it
    assert.ok((await b.page.locator('section.wvi').count()) >= 1);
    await screenshot(b.page, 'bench-report-from', { fullPage: true });
    assert.deepEqual(o.requests, []);
    assert.deepEqual(b.pageErrors, []);
  });

  test('text from result lines is shown as text, never as markup, and the page carries the lines', async () => {
    const lines = (await readFile(OLD_RUN, 'utf8')).split('\n').filter((l) => l.trim() !== '');
    const evil = JSON.parse(lines[0]!) as Record<string, unknown>;
    evil['scenario'] = 'x"><img src=x onerror="document.title=1">';
    evil['notes'] = '</script><script>document.title="owned"</script>';
    evil['problems'] = ['<b>bold</b> & "quoted"'];
    evil['histograms'] = {
      '<i>h</i>': {
        unit: '<u>ms</u>',
        percentiles: [
          [50, 1],
          [99, 2],
          [100, 3],
        ],
      },
    };
    const input = join(dir, 'evil.ndjson');
    await writeFile(input, `${JSON.stringify(evil)}\n${lines[1]!}\n`);
    const file = join(dir, 'evil.html');
    const r = await bench(['--html', file, '--from', input]);
    assert.equal(r.code, 0, r.stderr);
    const o = await open(b, file);
    assert.deepEqual(o.sections, [evil['scenario'], scenariosOf(lines[1]!)[0]]);
    assert.equal(await b.page.locator('img, b, i, u').count(), 0);
    assert.equal(await b.page.locator('script:not([type="application/json"])').count(), 0);
    assert.doesNotMatch(await b.page.title(), /owned|^1$/);
    const text = await b.page.locator('body').innerText();
    assert.ok(text.includes('</script><script>document.title="owned"</script>'));
    assert.ok(text.includes('<b>bold</b> & "quoted"'));
    const embedded = JSON.parse((await b.page.locator('#bench-results').textContent()) ?? '') as { lines: unknown[] };
    assert.deepEqual(embedded.lines[0], evil);
    assert.deepEqual(o.requests, []);
    assert.deepEqual(b.pageErrors, []);
  });
});

describe('bench report options', { timeout: 60_000 }, () => {
  test('--from and --compare need --html; an unreadable or empty run is a usage error', async () => {
    const alone = await bench(['--compare', OLD_RUN]);
    assert.equal(alone.code, 2);
    assert.match(alone.stderr, /--compare needs --html FILE/);
    const missing = await bench(['--html', join(tmpdir(), 'never.html'), '--from', join(tmpdir(), 'no-such-run.ndjson')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no-such-run\.ndjson/);
    const dir = await mkdtemp(join(tmpdir(), 'bench-report-'));
    try {
      await writeFile(join(dir, 'empty.ndjson'), 'not json\n\n');
      const empty = await bench(['--html', join(dir, 'x.html'), '--from', join(dir, 'empty.ndjson')]);
      assert.equal(empty.code, 2);
      assert.match(empty.stderr, /holds no bench result line/);
      const unknown = await bench(['--html', join(dir, 'x.html'), '--from', OLD_RUN, 'nope']);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /no result line for "nope"/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('--machine prints where the bench runs as one machine record', async () => {
    const r = await bench(['--machine']);
    assert.equal(r.code, 0, r.stderr);
    const rec = JSON.parse(r.stdout) as { machine: { node: string; cores: number; accelerator: string; commit: string | null } };
    assert.equal(rec.machine.node, process.version);
    assert.ok(rec.machine.cores >= 1);
    assert.match(rec.machine.accelerator, /^(kvm|tcg)$/);
    assert.match(rec.machine.commit ?? '', /^[0-9a-f]{40}$/);
  });
});
