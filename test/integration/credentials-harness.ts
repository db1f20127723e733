/**
 * A server with the credentials component on a real loopback HTTP listener (its log in a file, at
 * trace level, so a test can scan every line), and an upstream echo server that counts the
 * connections and requests it receives.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { Component } from '../../src/component/component.js';
import { credentialsComponent } from '../../src/credentials/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { serverRoutesComponent } from '../../src/server/server-routes.js';
import { loopbackConfig } from '../support/test-config.js';

export interface Harness {
  readonly dir: string;
  readonly logFile: string;
  readonly server: ServerHandle;
  readonly base: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }>;
  stop(): Promise<void>;
}

export async function startHarness(
  env: Record<string, string> = {},
  extra: readonly Component[] = [],
  opts: { dir?: string; keepDir?: boolean } = {},
): Promise<Harness> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'sbx-creds-'));
  const logFile = join(dir, `server-${Date.now()}.log`);
  const logger = pino({ level: 'trace' }, pino.destination({ dest: logFile, sync: true }));
  const server = await startServer(loopbackConfig(dir, env), logger, {
    components: [eventsComponent(), ...extra, credentialsComponent(), serverRoutesComponent, httpComponent],
  });
  const base = `http://127.0.0.1:${server.ports.http}`;
  return {
    dir,
    logFile,
    server,
    base,
    async call(method, path, body) {
      const res = await fetch(base + path, {
        method,
        ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      const text = await res.text();
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        // not JSON (metrics)
      }
      return { status: res.status, json, text };
    },
    async stop() {
      await server.stop();
      if (opts.keepDir !== true) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What the echo server saw. */
export interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * An upstream on 127.0.0.1 that answers every request with what it received: the request's
 * authorization header echoed in a response header and in the body, plain and base64.
 */
export class EchoUpstream {
  connections = 0;
  requests = 0;
  readonly seen: Seen[] = [];
  readonly #server: Server;
  port = 0;

  constructor() {
    this.#server = createServer((req, res) => {
      this.requests++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        // Special paths: a body larger than any test limit, a redirect, and an answer that never comes.
        if (req.url === '/v1/big') return void res.end('x'.repeat(64 * 1024));
        if (req.url === '/v1/redirect') {
          res.writeHead(302, { location: `http://127.0.0.1:${this.port}/v1/echo` });
          return void res.end();
        }
        if (req.url === '/v1/silent') return;
        // Compressed whatever the client asked for: the proxy must decode before it redacts.
        if (req.url === '/v1/gzip' || req.url === '/v1/zstd') {
          const auth = req.headers.authorization ?? '';
          res.writeHead(200, { 'content-encoding': req.url === '/v1/gzip' ? 'gzip' : 'zstd', 'content-type': 'text/plain' });
          return void res.end(gzipSync(`echo: ${auth}`));
        }
        const auth = req.headers.authorization ?? '';
        const token = auth.replace(/^Bearer /, '');
        res.setHeader('x-echo-authorization', auth);
        res.setHeader('x-echo-token-b64', Buffer.from(token).toString('base64'));
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({ method: req.method, url: req.url, authorization: auth, token_b64: Buffer.from(token).toString('base64'), body }),
        );
      });
    });
    this.#server.on('connection', () => this.connections++);
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const a = this.#server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
