/**
 * The desktop listener (SVC_DESKTOP_ADDR; spec 4.15 and part 5 "Desktop routes"): HTTPS serving
 * only the seven desktop routes, each request passing, in this order:
 *
 * 1. a verified client certificate (TLS asks for one; a connection without a verified one still
 *    gets an HTTP answer, 403 access_denied, so the client learns why);
 * 2. the pre-checks, none of which consults the token authority: no query string (400), a known
 *    route (404/405), exactly one Authorization header (none: 403; two or more: 400) holding
 *    `Bearer <token>` (else 403), no body on a no-body route (400), a body of at most 8192 bytes
 *    (400) arriving within 1 s (408, connection closed);
 * 3. the delegation token, verified through the authority (403 access_denied; 503 route_unavailable
 *    when the authority fails);
 * 4. the route.
 *
 * Every response carries Cache-Control: no-store; every error is application/problem+json
 * (RFC 9457: type, title, status, detail, code). Nothing of the Authorization header or a grant is
 * logged. node:https, like the admin listener: the verified peer certificate is needed per
 * connection and no hot path runs here.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { ERROR_TABLE, SvcError, type ErrorCode } from '../core/errors.js';
import type { DesktopProblem } from '../wire/desktop.js';
import type { DesktopService } from './desktop-service.js';
import { matchDesktopRoute } from './routes.js';
import { verifyDelegationToken, type DesktopAuthority } from './token-authority.js';

/** Spec part 8. */
export const DESKTOP_MAX_BODY_BYTES = 8192;
export const DESKTOP_BODY_TIMEOUT_MS = 1000;
const kMaxTokenChars = 8192;

export interface DesktopListenerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly tls: { readonly certPem: string; readonly keyPem: string; readonly caPem: string };
  /** Whether a verified client certificate may use the listener (e.g. operator certificates only); a reason when not. */
  readonly acceptPeer: (cert: DetailedPeerCertificate) => string | null;
  readonly authority: DesktopAuthority;
  readonly algorithms: readonly string[];
  readonly audience: string;
  readonly issuer: string | null;
  readonly service: DesktopService;
  readonly logger: Logger;
  readonly now: () => number;
  /** Each answer sent: the route pattern ('(unmatched)' before one matched), status, problem code. */
  readonly onAnswer?: (route: string, status: number, code: string | null) => void;
}

/** What each response answered, for onAnswer. */
const answers = new WeakMap<ServerResponse, { route: string; code: string | null }>();

export interface DesktopListener {
  readonly port: number;
  close(): Promise<void>;
}

const TITLES: Partial<Record<ErrorCode, string>> = {
  invalid_resource_request: 'Invalid desktop request',
  invalid_enrollment: 'Invalid desktop enrollment',
  access_denied: 'Access denied',
  resource_conflict: 'Desktop resource conflict',
  enrollment_conflict: 'Desktop enrollment conflict',
  route_unavailable: 'Desktop route unavailable',
  'desktop.route_not_found': 'No such desktop route',
  'desktop.method_not_allowed': 'Method not allowed',
  'desktop.body_timeout': 'Request body too slow',
};

/** The problem+json body of an error (server.internal for anything that is not an SvcError). */
export function problemOf(err: unknown): DesktopProblem {
  const e = err instanceof SvcError ? err : new SvcError('server.internal', 'internal error');
  return {
    type: `urn:sandboxd:problem:${e.code}`,
    title: TITLES[e.code] ?? 'Server error',
    status: ERROR_TABLE[e.code].http,
    detail: e.message,
    code: e.code,
  };
}

/** Start the listener. Rejects when the address cannot be bound. */
export function startDesktopListener(opts: DesktopListenerOptions): Promise<DesktopListener> {
  const sockets = new Set<Socket>();
  const server: Server = createServer({
    cert: opts.tls.certPem,
    key: opts.tls.keyPem,
    ca: opts.tls.caPem,
    requestCert: true,
    // Verified below per request, so a client without a certificate gets a problem body, not a bare alert.
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
  });
  server.headersTimeout = 5000;
  server.requestTimeout = 10_000;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', (err: NodeJS.ErrnoException) => opts.logger.debug({ code: err.code }, 'desktop listener: TLS client error'));
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    answers.set(res, { route: '(unmatched)', code: null });
    res.once('finish', () => {
      const a = answers.get(res);
      opts.onAnswer?.(a?.route ?? '(unmatched)', res.statusCode, a?.code ?? null);
    });
    handle(opts, req, res).catch((err: unknown) => {
      opts.logger.error({ err }, 'desktop request failed');
      send(res, 500, problemOf(err), true);
    });
  });
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void =>
      reject(new Error(`cannot listen for HTTPS (desktop) on ${opts.host}:${opts.port}: ${err.message}`));
    server.once('error', onError);
    server.listen(opts.port, opts.host, () => {
      server.off('error', onError);
      server.on('error', (err) => opts.logger.error({ err }, 'desktop listener error'));
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : opts.port;
      opts.logger.info({ host: opts.host, port }, 'desktop listener started (HTTPS, mutual TLS, delegation tokens)');
      let closed: Promise<void> | undefined;
      resolve({
        port,
        close: () =>
          (closed ??= new Promise<void>((done) => {
            server.close(() => done());
            server.closeIdleConnections();
            for (const s of sockets) s.destroy();
          })),
      });
    });
  });
}

function send(res: ServerResponse, status: number, body: unknown, closeConnection: boolean): void {
  if (res.headersSent || res.destroyed) return;
  const answer = answers.get(res);
  if (answer !== undefined && status >= 400) answer.code = (body as { code?: string }).code ?? null;
  const text = JSON.stringify(body);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-type', status >= 400 ? 'application/problem+json' : 'application/json');
  res.setHeader('content-length', Buffer.byteLength(text));
  if (closeConnection) res.setHeader('connection', 'close');
  res.writeHead(status);
  res.end(text);
}

const fail = (res: ServerResponse, code: ErrorCode, detail: string, closeConnection = false): void =>
  send(res, ERROR_TABLE[code].http, problemOf(new SvcError(code, detail)), closeConnection);

async function handle(opts: DesktopListenerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const socket = req.socket as TLSSocket;
  // 1. the verified client certificate
  if (!socket.authorized) {
    req.resume();
    return fail(res, 'access_denied', 'a verified client certificate is needed', true);
  }
  const peerCert = socket.getPeerCertificate(true);
  const refused = opts.acceptPeer(peerCert);
  if (refused !== null) {
    req.resume();
    return fail(res, 'access_denied', refused, true);
  }
  // 2. pre-checks: nothing here consults the authority
  const url = req.url ?? '';
  if (url.includes('?')) return fail(res, 'invalid_resource_request', 'desktop routes take no query string', true);
  const match = matchDesktopRoute((req.method ?? '').toUpperCase(), url);
  if (match === null) return fail(res, 'desktop.route_not_found', 'no desktop route has this path', true);
  if (match === 'method') return fail(res, 'desktop.method_not_allowed', 'the path exists, not with this method', true);
  const { route, id } = match;
  const answer = answers.get(res);
  if (answer !== undefined) answer.route = route.pattern;
  const authorizations: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() === 'authorization') authorizations.push(req.rawHeaders[i + 1]!);
  }
  if (authorizations.length > 1) return fail(res, 'invalid_resource_request', 'exactly one Authorization header is accepted', true);
  const bearer = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/.exec(authorizations[0] ?? '');
  if (bearer === null || bearer[1]!.length > kMaxTokenChars) {
    return fail(res, 'access_denied', 'an Authorization: Bearer <delegation token> header is needed', true);
  }
  const declared = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (route.body === 'none' && (chunked || (declared !== undefined && declared !== '0'))) {
    return fail(res, 'invalid_resource_request', 'this route takes no body', true);
  }
  let body: unknown;
  if (route.body === 'json') {
    if (declared !== undefined && Number(declared) > DESKTOP_MAX_BODY_BYTES) {
      return fail(res, route.bodyError, `the body exceeds ${DESKTOP_MAX_BODY_BYTES} bytes`, true);
    }
    const read = await readBody(req);
    if (read === 'timeout') return fail(res, 'desktop.body_timeout', `the body did not arrive within ${DESKTOP_BODY_TIMEOUT_MS} ms`, true);
    if (read === 'too_large') return fail(res, route.bodyError, `the body exceeds ${DESKTOP_MAX_BODY_BYTES} bytes`, true);
    if (read === 'aborted') return;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') return fail(res, route.bodyError, 'the body must be Content-Type: application/json');
    try {
      body = JSON.parse(read.toString('utf8')) as unknown;
    } catch {
      return fail(res, route.bodyError, 'the body is not valid JSON');
    }
  }
  // 3. the delegation token, through the authority
  const verdict = await verifyDelegationToken(bearer[1]!, {
    authority: opts.authority,
    audience: opts.audience,
    issuer: opts.issuer,
    algorithms: opts.algorithms,
    nowMs: opts.now(),
    certSha256: createHash('sha256').update(peerCert.raw).digest(),
  });
  if (!verdict.ok) {
    if (verdict.reason === 'unavailable') return fail(res, 'route_unavailable', verdict.detail);
    opts.logger.info({ route: route.pattern, reason: verdict.detail }, 'desktop request refused: token');
    return fail(res, 'access_denied', verdict.detail);
  }
  // 4. the route
  try {
    const out = route.run(opts.service, verdict.caller, id, body);
    send(res, out.status, out.body, false);
  } catch (err) {
    if (!(err instanceof SvcError)) opts.logger.error({ err, route: route.pattern }, 'desktop route failed');
    send(res, err instanceof SvcError ? err.httpStatus : 500, problemOf(err), false);
  }
}

/** The body, at most DESKTOP_MAX_BODY_BYTES, within DESKTOP_BODY_TIMEOUT_MS of now. */
function readBody(req: IncomingMessage): Promise<Buffer | 'timeout' | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const settle = (v: Buffer | 'timeout' | 'too_large' | 'aborted'): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off('data', onData);
      resolve(v);
    };
    const timer = setTimeout(() => settle('timeout'), DESKTOP_BODY_TIMEOUT_MS);
    timer.unref();
    const onData = (chunk: Buffer): void => {
      bytes += chunk.byteLength;
      if (bytes > DESKTOP_MAX_BODY_BYTES) return settle('too_large');
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => settle(Buffer.concat(chunks)));
    req.once('error', () => settle('aborted'));
    req.once('close', () => settle(req.complete ? Buffer.concat(chunks) : 'aborted'));
  });
}
