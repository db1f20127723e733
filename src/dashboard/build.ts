/**
 * Bundles the dashboard (src/dashboard/web) into dist/dashboard with esbuild:
 *
 *   dist/dashboard/index.html              the one HTML page (served no-store at /)
 *   dist/dashboard/assets/app-<hash>.js    entry (ES module), its CSS, lazily loaded chunks
 *   dist/dashboard/assets/chunk-<hash>.js  (xterm.js loads only when a terminal opens)
 *   dist/dashboard/manifest.json           what was built: entry names and sizes
 *
 * Every asset name carries a content hash, so the server caches assets as immutable and only the
 * HTML is re-fetched. No CDN: xterm.js and its fit addon are bundled from node_modules.
 *
 * Run: `node dist/src/dashboard/build.js [--out DIR] [--no-minify]` (part of `npm run build`).
 * A rebuild keeps serving: assets are written first (new names never clash), index.html last by
 * rename, then assets no longer referenced are removed.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { errorMessage } from '../util/error-message.js';

/** The repository root: this file runs from <root>/<outDir>/src/dashboard/build.js. */
const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** Default output folder: <outDir>/dashboard, next to the compiled server (dist/dashboard). */
export const DEFAULT_DASHBOARD_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dashboard');

export interface DashboardBuildOptions {
  /** Output folder (index.html and assets/). Default {@link DEFAULT_DASHBOARD_DIR}. */
  outDir?: string;
  /** Minify JS and CSS. Default true. */
  minify?: boolean;
}

export interface DashboardBuildResult {
  readonly outDir: string;
  /** Asset file names (under assets/) of the entry script and stylesheet. */
  readonly entryJs: string;
  readonly entryCss: string;
  /** Every asset written, with its size in bytes. */
  readonly files: ReadonlyArray<{ readonly name: string; readonly bytes: number }>;
  /** Bytes of what the first render loads (HTML, entry JS and CSS, favicon). */
  readonly initialBytes: number;
  readonly durationMs: number;
}

const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2f6fde"/>' +
  '<path d="M9 11h14M9 16h10M9 21h6" stroke="#fff" stroke-width="2.6" stroke-linecap="round"/></svg>';

function hash8(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('base64url').slice(0, 8).toUpperCase().replace(/[-_]/g, 'X');
}

function indexHtml(js: string, css: string, favicon: string): string {
  // Relative asset URLs so the dashboard also works behind a reverse proxy under a path prefix.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>sandboxd</title>
<link rel="icon" type="image/svg+xml" href="assets/${favicon}">
<link rel="stylesheet" href="assets/${css}">
<script type="module" src="assets/${js}"></script>
</head>
<body>
<noscript>The sandboxd dashboard needs JavaScript. The API is at /api/v1/.</noscript>
<div id="app"></div>
</body>
</html>
`;
}

function entryOutputs(meta: Metafile, assetsDir: string): { js: string; css: string } {
  for (const [path, out] of Object.entries(meta.outputs)) {
    if (out.entryPoint !== undefined && path.endsWith('.js')) {
      const js = relative(assetsDir, join(REPO_ROOT, path));
      const css = out.cssBundle !== undefined ? relative(assetsDir, join(REPO_ROOT, out.cssBundle)) : '';
      if (css === '') throw new Error('dashboard build: the entry has no CSS bundle');
      return { js, css };
    }
  }
  throw new Error('dashboard build: no entry output in the metafile');
}

/** Builds the dashboard; rejects with esbuild's errors (file and line) when the sources do not compile. */
export async function buildDashboard(opts: DashboardBuildOptions = {}): Promise<DashboardBuildResult> {
  const started = Date.now();
  const outDir = opts.outDir ?? DEFAULT_DASHBOARD_DIR;
  const assetsDir = join(outDir, 'assets');
  const minify = opts.minify ?? true;
  const result = await build({
    absWorkingDir: REPO_ROOT,
    entryPoints: { app: join(REPO_ROOT, 'src/dashboard/web/main.ts') },
    tsconfig: join(REPO_ROOT, 'src/dashboard/web/tsconfig.json'),
    outdir: assetsDir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    assetNames: '[name]-[hash]',
    minify,
    sourcemap: 'linked',
    metafile: true,
    write: false,
    logLevel: 'silent',
    charset: 'utf8',
  });
  const { js, css } = entryOutputs(result.metafile, assetsDir);
  const favicon = `favicon-${hash8(FAVICON_SVG)}.svg`;

  await mkdir(assetsDir, { recursive: true });
  const files: Array<{ name: string; bytes: number }> = [];
  for (const f of result.outputFiles) {
    await writeFile(f.path, f.contents);
    files.push({ name: relative(assetsDir, f.path), bytes: f.contents.byteLength });
  }
  await writeFile(join(assetsDir, favicon), FAVICON_SVG);
  files.push({ name: favicon, bytes: Buffer.byteLength(FAVICON_SVG) });

  const html = indexHtml(js, css, favicon);
  const tmp = join(outDir, `.index-${process.pid}.html`);
  await writeFile(tmp, html);
  await rename(tmp, join(outDir, 'index.html'));

  const keep = new Set(files.map((f) => f.name));
  for (const name of await readdir(assetsDir)) {
    if (!keep.has(name)) await rm(join(assetsDir, name), { force: true, recursive: true });
  }
  const size = (name: string): number => files.find((f) => f.name === name)?.bytes ?? 0;
  const initialBytes = Buffer.byteLength(html) + size(js) + size(css) + size(favicon);
  const manifest = { built_at: new Date().toISOString(), entry_js: js, entry_css: css, favicon, initial_bytes: initialBytes, files };
  await writeFile(join(outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return { outDir, entryJs: js, entryCss: css, files, initialBytes, durationMs: Date.now() - started };
}

async function main(argv: readonly string[]): Promise<void> {
  const outIdx = argv.indexOf('--out');
  const outDir = outIdx >= 0 ? argv[outIdx + 1] : undefined;
  if (outIdx >= 0 && (outDir === undefined || outDir.startsWith('--'))) throw new Error('--out needs a folder');
  const r = await buildDashboard({ ...(outDir !== undefined ? { outDir } : {}), minify: !argv.includes('--no-minify') });
  const kib = (n: number): string => `${(n / 1024).toFixed(1)} KiB`;
  const total = r.files.filter((f) => !f.name.endsWith('.map')).reduce((s, f) => s + f.bytes, 0);
  process.stdout.write(
    `dashboard: ${relative(process.cwd(), r.outDir) || '.'} (first load ${kib(r.initialBytes)}, all assets ${kib(total)}) in ${r.durationMs} ms\n`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    const errors = (err as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } | null }> }).errors;
    if (Array.isArray(errors) && errors.length > 0) {
      for (const e of errors)
        process.stderr.write(`${e.location ? `${e.location.file}:${e.location.line}:${e.location.column}: ` : ''}${e.text}\n`);
    } else {
      process.stderr.write(`dashboard build failed: ${errorMessage(err)}\n`);
    }
    process.exitCode = 1;
  });
}
