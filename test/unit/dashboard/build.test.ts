/**
 * The bundler script: content-hashed assets, an index.html that references them (relative, no
 * CDN), xterm.js in a chunk of its own, and a second build with unchanged sources producing the
 * same names (so browsers keep their cached copies).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildDashboard, type DashboardBuildResult } from '../../../src/dashboard/build.js';

describe('dashboard build', { timeout: 120_000 }, () => {
  let out: string;
  let first: DashboardBuildResult;

  before(async () => {
    out = await mkdtemp(join(tmpdir(), 'dash-build-'));
    first = await buildDashboard({ outDir: out });
  });
  after(async () => {
    await rm(out, { recursive: true, force: true });
  });

  test('index.html loads hashed, local assets only', async () => {
    const html = await readFile(join(out, 'index.html'), 'utf8');
    assert.match(first.entryJs, /^app-[A-Z0-9]{8}\.js$/);
    assert.match(first.entryCss, /^app-[A-Z0-9]{8}\.css$/);
    assert.ok(html.includes(`src="assets/${first.entryJs}"`));
    assert.ok(html.includes(`href="assets/${first.entryCss}"`));
    assert.doesNotMatch(html, /https?:\/\//);
    const css = await readFile(join(out, 'assets', first.entryCss), 'utf8');
    assert.doesNotMatch(css, /@import|url\(\s*["']?https?:/);
    for (const f of await readdir(join(out, 'assets'))) assert.match(f, /^[a-z]+-[A-Z0-9]{8}\.(js|css|svg)(\.map)?$/, f);
  });

  test('xterm.js is not in the first load', async () => {
    const entry = await readFile(join(out, 'assets', first.entryJs), 'utf8');
    assert.doesNotMatch(entry, /xterm\.js@|class \w+ extends \w+\{constructor\(\w+=\{\}\)\{super\(\),this\._core/);
    const chunks = first.files.filter((f) => f.name.startsWith('chunk-') && f.name.endsWith('.js'));
    const biggest = Math.max(...chunks.map((c) => c.bytes));
    assert.ok(biggest > 200_000, 'the terminal chunk carries xterm.js');
    assert.ok(first.initialBytes < 200_000, `first load ${first.initialBytes} bytes`);
  });

  test('a rebuild of unchanged sources keeps every name and removes stale files', async () => {
    await writeFile(join(out, 'assets', 'app-STALE000.js'), 'old');
    const second = await buildDashboard({ outDir: out });
    assert.equal(second.entryJs, first.entryJs);
    assert.deepEqual(second.files.map((f) => f.name).sort(), first.files.map((f) => f.name).sort());
    assert.ok(!(await readdir(join(out, 'assets'))).includes('app-STALE000.js'));
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as { entry_js: string };
    assert.equal(manifest.entry_js, first.entryJs);
  });
});
