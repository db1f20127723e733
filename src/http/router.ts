/**
 * Path router for the HTTP listener: a segment trie with `:param` and trailing `*` segments.
 *
 * Policies (documented here because clients notice them):
 * - Matching is on percent-decoded segments; a segment with bad percent-encoding, or a `.`/`..`
 *   segment (encoded or not), is a 400 `request.invalid` before any route is looked up.
 * - One trailing slash is ignored (`/healthz/` is `/healthz`); empty segments (`//`) match nothing.
 * - Static segments beat `:param`, which beats `*`; when the best path match lacks the method,
 *   the next path match that has it wins; if none has it: 405 `route.method_not_allowed` + Allow.
 * - HEAD is served by the GET route when no HEAD route is registered (the body is not sent).
 * - A `responseSchema` is compiled once, at registration, with fast-json-stringify.
 */
import fastJson from 'fast-json-stringify';
import { SvcError } from '../core/errors.js';
import type { BodyMode, Handler } from './types.js';

/** What `router.add` takes. */
export interface RouteSpec {
  method: string;
  /** Pattern such as `/api/v1/agents/:id/sessions`; a final `*` segment captures the rest. */
  path: string;
  handler: Handler;
  /** Default: `none` for GET/HEAD, `json` otherwise. */
  body?: BodyMode;
  /** Body size limit for this route in bytes; default: the listener's (1 MiB). */
  maxBodyBytes?: number;
  /** Time allowed to receive the whole body; default: the listener's (30 s). */
  bodyTimeoutMs?: number;
  /** JSON schema of the handler's JSON results (not error envelopes), compiled once into a serializer. */
  responseSchema?: Record<string, unknown>;
}

/**
 * Wraps the handlers of the routes it applies to (the idempotency middleware of spec 4.11 is
 * one). Installed with `router.use` before the routes it covers are added: `use` throws when a
 * route it would cover is already registered, so no route escapes it by start order.
 */
export interface RouteMiddleware {
  /** Names it in errors. */
  readonly name: string;
  /** Whether it covers the route (`method` upper-case, `pattern` as registered). */
  applies(method: string, pattern: string): boolean;
  /** The handler to serve the route with, given the route as registered. */
  wrap(route: Route): Handler;
}

/** A registered route (what a match hands to the dispatcher). */
export interface Route {
  readonly method: string;
  readonly pattern: string;
  readonly handler: Handler;
  readonly body: BodyMode;
  readonly maxBodyBytes: number | undefined;
  readonly bodyTimeoutMs: number | undefined;
  /** Compiled serializer for the handler's JSON results, when a schema was given. */
  readonly serialize: ((value: unknown) => string) | undefined;
  readonly paramNames: readonly string[];
}

export type RouteMatch =
  | { readonly ok: true; readonly route: Route; readonly params: Record<string, string> }
  | { readonly ok: false; readonly error: SvcError; readonly allow?: readonly string[] };

class TrieNode {
  readonly statics = new Map<string, TrieNode>();
  param: TrieNode | null = null;
  /** Routes of a trailing `*` under this node, by method. */
  readonly wildcard = new Map<string, Route>();
  /** Routes ending at this node, by method. */
  readonly routes = new Map<string, Route>();
}

/** A path match before the method is considered: the route table and the captured values. */
interface PathHit {
  readonly routes: Map<string, Route>;
  readonly values: string[];
}

const METHOD_RE = /^[A-Z]+$/;
const PARAM_RE = /^:[A-Za-z_][A-Za-z0-9_]*$/;

export class Router {
  readonly #root = new TrieNode();
  readonly #list: Route[] = [];
  readonly #middleware: RouteMiddleware[] = [];

  /** Installs a middleware for the routes added from now on (see RouteMiddleware). */
  use(mw: RouteMiddleware): void {
    const covered = this.#list.find((r) => mw.applies(r.method, r.pattern));
    if (covered !== undefined) {
      throw new Error(`middleware ${mw.name} would miss ${covered.method} ${covered.pattern}, registered before it was installed`);
    }
    this.#middleware.push(mw);
  }

  /** Register a route. Throws (a programming error) on a malformed pattern or a duplicate. */
  add(spec: RouteSpec): Route {
    const method = spec.method.toUpperCase();
    if (!METHOD_RE.test(method)) throw new Error(`bad method ${spec.method}`);
    if (!spec.path.startsWith('/')) throw new Error(`route path must start with /: ${spec.path}`);
    const segments = splitPath(spec.path);
    const paramNames: string[] = [];
    let node = this.#root;
    let table = node.routes;
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i] ?? '';
      if (seg === '*') {
        if (i !== segments.length - 1) throw new Error(`* must be the last segment: ${spec.path}`);
        paramNames.push('*');
        table = node.wildcard;
        break;
      }
      if (seg.startsWith(':')) {
        if (!PARAM_RE.test(seg)) throw new Error(`bad parameter ${seg} in ${spec.path}`);
        if (paramNames.includes(seg.slice(1))) throw new Error(`duplicate parameter ${seg} in ${spec.path}`);
        paramNames.push(seg.slice(1));
        node.param ??= new TrieNode();
        node = node.param;
      } else {
        if (seg === '' || seg.includes('%') || seg === '.' || seg === '..') throw new Error(`bad segment "${seg}" in ${spec.path}`);
        let next = node.statics.get(seg);
        if (next === undefined) node.statics.set(seg, (next = new TrieNode()));
        node = next;
      }
      table = node.routes;
    }
    if (table.has(method)) throw new Error(`duplicate route ${method} ${spec.path}`);
    let route: Route = {
      method,
      pattern: spec.path,
      handler: spec.handler,
      body: spec.body ?? (method === 'GET' || method === 'HEAD' ? 'none' : 'json'),
      maxBodyBytes: spec.maxBodyBytes,
      bodyTimeoutMs: spec.bodyTimeoutMs,
      serialize: spec.responseSchema === undefined ? undefined : (fastJson(spec.responseSchema) as (value: unknown) => string),
      paramNames,
    };
    for (const mw of this.#middleware) if (mw.applies(method, spec.path)) route = { ...route, handler: mw.wrap(route) };
    table.set(method, route);
    this.#list.push(route);
    return route;
  }

  /** Every registered route, in registration order. */
  list(): readonly Route[] {
    return this.#list;
  }

  /** Find the route for a method and a (still percent-encoded) path without a query string. */
  match(method: string, path: string): RouteMatch {
    const decoded = decodeSegments(path);
    if (decoded instanceof SvcError) return { ok: false, error: decoded };
    const upper = method.toUpperCase();
    let first: PathHit | undefined;
    for (const hit of walk(this.#root, decoded, 0, [])) {
      first ??= hit;
      const route = hit.routes.get(upper) ?? (upper === 'HEAD' ? hit.routes.get('GET') : undefined);
      if (route !== undefined) return { ok: true, route, params: bindParams(route, hit.values) };
    }
    if (first === undefined) {
      return { ok: false, error: new SvcError('route.not_found', `no route for ${truncate(path)}`) };
    }
    const allow = allowedMethods(first.routes);
    return {
      ok: false,
      error: new SvcError('route.method_not_allowed', `${upper} is not allowed on ${truncate(path)}; allowed: ${allow.join(', ')}`),
      allow,
    };
  }
}

/** Path hits in priority order (static, then param, then wildcard), lazily, so matching stops early. */
function* walk(node: TrieNode, segs: readonly string[], i: number, values: string[]): Generator<PathHit> {
  if (i === segs.length) {
    if (node.routes.size > 0) yield { routes: node.routes, values: [...values] };
  } else {
    const seg = segs[i] ?? '';
    const child = node.statics.get(seg);
    if (child !== undefined) yield* walk(child, segs, i + 1, values);
    if (node.param !== null && seg !== '') {
      values.push(seg);
      yield* walk(node.param, segs, i + 1, values);
      values.pop();
    }
  }
  // A trailing `*` needs at least one non-empty segment to capture.
  if (node.wildcard.size > 0 && i < segs.length && segs.slice(i).every((s) => s !== '')) {
    yield { routes: node.wildcard, values: [...values, segs.slice(i).join('/')] };
  }
}

function bindParams(route: Route, values: readonly string[]): Record<string, string> {
  const params: Record<string, string> = {};
  route.paramNames.forEach((name, k) => {
    params[name] = values[k] ?? '';
  });
  return params;
}

function allowedMethods(routes: Map<string, Route>): string[] {
  const allow = new Set(routes.keys());
  if (allow.has('GET')) allow.add('HEAD');
  return [...allow].sort();
}

/** Split a pattern or path into segments, dropping the leading slash and one trailing slash. */
function splitPath(path: string): string[] {
  let p = path.slice(1);
  if (p.endsWith('/')) p = p.slice(0, -1);
  return p === '' ? [] : p.split('/');
}

/** Percent-decode each segment; SvcError on bad encoding or dot segments. */
function decodeSegments(path: string): string[] | SvcError {
  if (!path.startsWith('/')) return new SvcError('request.invalid', 'the request path must start with /');
  const segs = splitPath(path);
  for (let i = 0; i < segs.length; i++) {
    let seg = segs[i] ?? '';
    if (seg.includes('%')) {
      try {
        seg = decodeURIComponent(seg);
      } catch {
        return new SvcError('request.invalid', `invalid percent-encoding in path segment ${i + 1}`);
      }
      segs[i] = seg;
    }
    if (seg === '.' || seg === '..') return new SvcError('request.invalid', 'the request path has a dot segment');
  }
  return segs;
}

function truncate(path: string): string {
  return path.length > 200 ? `${path.slice(0, 200)}…` : path;
}
