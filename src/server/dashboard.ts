/**
 * The web dashboard on the HTTP listener (spec part 1: "serves a web dashboard"):
 *
 *   GET /                          index.html of the built dashboard; Cache-Control no-store and a
 *                                  Content-Security-Policy allowing only this server (and its WS
 *                                  listener); 503 server.unavailable when the dashboard is not built
 *   GET /assets/{name}             a built asset: content-hashed names, so Cache-Control immutable;
 *                                  ETag / If-None-Match; brotli or gzip when the client accepts it;
 *                                  404 route.not_found for any other name
 *   GET /api/v1/dashboard/config   {ws_url, activity}: where the page finds the WebSocket listener
 *                                  (null until it listens; a wildcard listen host is replaced by the
 *                                  host the browser used), and the tenant and host of the activity
 *                                  view ({tenant_id, host_id}; null when no activity store runs)
 *
 * Assets are served from memory only: the folder (src/dashboard/build.ts output) is read once,
 * and again when index.html changes (a rebuild), so a request path never reaches the file system
 * and a name with `/`, `..` or anything outside [A-Za-z0-9._-] cannot match anything.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlibConstants, gzip } from 'node:zlib';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';

/** Where `node dist/src/dashboard/build.js` writes: dist/dashboard next to the compiled server. */
export const DEFAULT_DASHBOARD_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dashboard');

export interface DashboardRoutesDeps {
  /** Folder holding index.html and assets/. Default {@link DEFAULT_DASHBOARD_DIR}. */
  readonly dir?: string;
  /** The WebSocket listener: its configured host and its bound port (0 while not listening). */
  wsAddress(): { readonly host: string; readonly port: number };
  /** SVC_TENANT_ID and SVC_HOST_ID when the activity store runs (the activity view's scope), else null. */
  activityScope?(): { readonly tenant_id: string; readonly host_id: string } | null;
}

interface Asset {
  readonly body: Uint8Array;
  readonly contentType: string;
  readonly etag: string;
  readonly br: Uint8Array | null;
  readonly gzip: Uint8Array | null;
}

interface Loaded {
  readonly indexMtimeMs: number;
  readonly indexSize: number;
  readonly index: Uint8Array;
  readonly assets: ReadonlyMap<string, Asset>;
}

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};
const COMPRESSIBLE = new Set(['.js', '.css', '.map', '.json', '.svg', '.txt', '.html']);
const ASSET_NAME_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;
const IMMUTABLE = 'public, max-age=31536000, immutable';
const brotli = promisify(brotliCompress);
const gz = promisify(gzip);

function extOf(name: string): string {
  const i = name.lastIndexOf('.');
  return i < 0 ? '' : name.slice(i).toLowerCase();
}

async function loadAsset(path: string, name: string): Promise<Asset> {
  const body = new Uint8Array(await readFile(path));
  const ext = extOf(name);
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  let br: Uint8Array | null = null;
  let gzipped: Uint8Array | null = null;
  if (COMPRESSIBLE.has(ext) && body.byteLength >= 1024) {
    // zlib runs on the libuv pool: the main thread does not block while a bundle compresses.
    [br, gzipped] = await Promise.all([
      brotli(body, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 9, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: body.byteLength } }).then(
        (b) => new Uint8Array(b),
      ),
      gz(body, { level: 9 }).then((b) => new Uint8Array(b)),
    ]);
  }
  return { body, contentType: TYPES[ext] ?? 'application/octet-stream', etag, br, gzip: gzipped };
}

/** The built dashboard in memory; reloaded when index.html changes on disk. */
class DashboardBundle {
  readonly #dir: string;
  #loaded: Loaded | null = null;
  #loading: Promise<Loaded | null> | null = null;

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** The current build, or null when none is on disk. Checks index.html's mtime each call. */
  async current(): Promise<Loaded | null> {
    let st: { mtimeMs: number; size: number };
    try {
      st = await stat(join(this.#dir, 'index.html'));
    } catch {
      return this.#loaded;
    }
    const l = this.#loaded;
    if (l !== null && l.indexMtimeMs === st.mtimeMs && l.indexSize === st.size) return l;
    this.#loading ??= this.#load().finally(() => {
      this.#loading = null;
    });
    return this.#loading;
  }

  /** An asset of the loaded build without touching the disk (null when unknown). */
  asset(name: string): Asset | null {
    return this.#loaded?.assets.get(name) ?? null;
  }

  async #load(): Promise<Loaded | null> {
    const st = await stat(join(this.#dir, 'index.html'));
    const index = new Uint8Array(await readFile(join(this.#dir, 'index.html')));
    const assets = new Map<string, Asset>();
    const assetsDir = join(this.#dir, 'assets');
    const names = await readdir(assetsDir).catch(() => [] as string[]);
    for (const name of names) {
      if (!ASSET_NAME_RE.test(name)) continue;
      assets.set(name, await loadAsset(join(assetsDir, name), name));
    }
    this.#loaded = { indexMtimeMs: st.mtimeMs, indexSize: st.size, index, assets };
    return this.#loaded;
  }
}

/** `br`, `gzip` or null, from Accept-Encoding (q=0 refuses a coding). */
export function pickEncoding(acceptEncoding: string | undefined): 'br' | 'gzip' | null {
  if (acceptEncoding === undefined) return null;
  const ok = new Set<string>();
  for (const part of acceptEncoding.split(',')) {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (coding !== undefined && coding !== '' && (q === undefined || Number(q.slice(2)) > 0)) ok.add(coding);
  }
  return ok.has('br') ? 'br' : ok.has('gzip') ? 'gzip' : null;
}

const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '[::]']);

/** The host part of a Host header (`[::1]:8122` → `[::1]`, `example:8122` → `example`). */
function hostnameOf(hostHeader: string | undefined): string | null {
  if (hostHeader === undefined || hostHeader === '') return null;
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/.exec(hostHeader.trim());
  return m?.[1] ?? null;
}

/**
 * The WebSocket listener's URL as the browser should dial it, or null while it does not listen.
 * A wildcard listen host means "any interface": use the host the browser reached us by.
 */
export function dashboardWsUrl(ws: { host: string; port: number }, hostHeader: string | undefined): string | null {
  if (ws.port <= 0) return null;
  let host = ws.host;
  if (WILDCARD_HOSTS.has(host)) host = hostnameOf(hostHeader) ?? '127.0.0.1';
  else if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `ws://${host}:${ws.port}/`;
}

function contentSecurityPolicy(req: RequestView, wsUrl: string | null): string {
  const connect = ["'self'"];
  const self = hostnameOf(req.headers['host']) !== null ? req.headers['host'] : undefined;
  // pty-ws.v1 lives on this listener: name its ws: origin too ('self' covers it only in newer browsers).
  if (self !== undefined) connect.push(`ws://${self}`);
  // The WS listener's host on any port: a restarted server may listen elsewhere (port 0), and the
  // page asks /api/v1/dashboard/config again before reconnecting.
  if (wsUrl !== null) connect.push(wsUrl.replace(/:\d+\/$/, ':*'));
  return [
    "default-src 'self'",
    "script-src 'self'",
    // xterm.js sizes its rows with inline styles and a <style> element.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src ${connect.join(' ')}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

function notBuilt(): SvcError {
  return new SvcError('server.unavailable', 'the dashboard is not built: run npm run build (or node dist/src/dashboard/build.js)');
}

export function registerDashboardRoutes(router: Router, deps: DashboardRoutesDeps): void {
  const bundle = new DashboardBundle(deps.dir ?? DEFAULT_DASHBOARD_DIR);
  // Load (and compress) in the background now, so the first page view does not wait for it.
  bundle.current().catch(() => undefined);

  router.add({
    method: 'GET',
    path: '/',
    handler: async (req) => {
      const loaded = await bundle.current();
      if (loaded === null) throw notBuilt();
      const wsUrl = dashboardWsUrl(deps.wsAddress(), req.headers['host']);
      return {
        status: 200,
        contentType: 'text/html; charset=utf-8',
        body: loaded.index,
        headers: {
          'cache-control': 'no-store',
          'content-security-policy': contentSecurityPolicy(req, wsUrl),
          'x-content-type-options': 'nosniff',
          'x-frame-options': 'DENY',
          'referrer-policy': 'no-referrer',
        },
      };
    },
  });

  router.add({
    method: 'GET',
    path: '/assets/*',
    handler: async (req) => {
      const name = req.params['*'] ?? '';
      if (!ASSET_NAME_RE.test(name)) throw new SvcError('route.not_found', 'no such dashboard asset');
      let asset = bundle.asset(name);
      if (asset === null) {
        // Maybe a rebuild since the last load: look again (index.html's mtime decides).
        await bundle.current();
        asset = bundle.asset(name);
      }
      if (asset === null) throw new SvcError('route.not_found', `no dashboard asset ${JSON.stringify(name.slice(0, 80))}`);
      const headers: Record<string, string> = {
        'cache-control': IMMUTABLE,
        etag: asset.etag,
        vary: 'accept-encoding',
        'x-content-type-options': 'nosniff',
      };
      if (req.headers['if-none-match'] === asset.etag) return { status: 304, contentType: asset.contentType, body: '', headers };
      const enc = pickEncoding(req.headers['accept-encoding']);
      const encoded = enc === 'br' ? asset.br : enc === 'gzip' ? asset.gzip : null;
      if (encoded !== null && enc !== null) headers['content-encoding'] = enc;
      return { status: 200, contentType: asset.contentType, body: encoded ?? asset.body, headers };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v1/dashboard/config',
    responseSchema: {
      type: 'object',
      properties: {
        ws_url: { type: ['string', 'null'] },
        activity: {
          type: ['object', 'null'],
          properties: { tenant_id: { type: 'string' }, host_id: { type: 'string' } },
          required: ['tenant_id', 'host_id'],
        },
      },
      required: ['ws_url', 'activity'],
    },
    handler: (req) => ({
      status: 200,
      headers: { 'cache-control': 'no-store' },
      json: { ws_url: dashboardWsUrl(deps.wsAddress(), req.headers['host']), activity: deps.activityScope?.() ?? null },
    }),
  });
}
