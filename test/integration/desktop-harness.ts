/**
 * A sandboxd with only the desktop component, its listener on 127.0.0.1 with real TLS (the
 * server's CA, real operator and agent certificates), a real Ed25519 issuer key, and two test
 * hooks: a counting wrapper around the key authority (how often it was consulted; made to fail on
 * demand) and a clock the test moves. Requests go over real HTTPS, one connection each.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { request } from 'node:https';
import { connect } from 'node:tls';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import sshpk from 'sshpk';
import pino from 'pino';
import type { DesktopService } from '../../src/desktop/desktop-service.js';
import { desktopComponent } from '../../src/desktop/component.js';
import { eventsComponent } from '../../src/events/component.js';
import type { DesktopAuthority } from '../../src/desktop/token-authority.js';
import {
  createStandaloneCa,
  ensureCa,
  issueAgentCert,
  issueOperatorCert,
  type CaMaterial,
  type IssuedCert,
} from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../support/test-config.js';

export const AUDIENCE = 'sandboxd-desktop';
/** A real Ed25519 host key line (what a guest's /etc/ssh/ssh_host_ed25519_key.pub holds, without the comment). */
export const HOST_KEY = sshpk
  .parseKey(generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }), 'pem')
  .toString('ssh')
  .replace(/ \(unnamed\)$/, '');
export const ISSUER = 'desktop-test-issuer';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: Record<string, unknown>;
}

export interface RequestOptions {
  method?: string;
  /** The client certificate; the operator's by default, none when null. */
  cert?: IssuedCert | null;
  /** Authorization header values: one line each (none when empty). */
  authorization?: readonly string[];
  body?: string;
  contentType?: string;
}

export class DesktopBed {
  dir = '';
  server!: ServerHandle;
  ca!: CaMaterial;
  operator!: IssuedCert;
  agent!: IssuedCert;
  /** An operator certificate of another CA, and an expired one of ours. */
  foreign!: IssuedCert;
  expired!: IssuedCert;
  /** The issuer's private key (tokens) and another key (bad signatures). */
  readonly issuer = generateKeyPairSync('ed25519');
  readonly stranger = generateKeyPairSync('ed25519');
  /** Times the authority was consulted. */
  consulted = 0;
  /** When true the authority fails (503 route_unavailable). */
  authorityDown = false;
  /** The clock of the server, Unix ms. */
  nowMs = Date.now();
  readonly logLines: string[] = [];

  /** The client CA of SVC_DESKTOP_CLIENT_CA when the bed was made with one (`clientCa: true`). */
  clientCa: CaMaterial | undefined;
  readonly #env: Record<string, string> = {};

  constructor(readonly opts: { clientCa?: boolean } = {}) {}

  async start(): Promise<void> {
    this.dir = await mkdtemp(join(tmpdir(), 'sandboxd-desktop-'));
    const keyPath = join(this.dir, 'issuer.pub.pem');
    await writeFile(keyPath, this.issuer.publicKey.export({ type: 'spki', format: 'pem' }));
    if (this.opts.clientCa === true) {
      this.clientCa = await createStandaloneCa('cockpit.example');
      await writeFile(join(this.dir, 'client-ca.pem'), this.clientCa.caCertPem);
      this.#env['SVC_DESKTOP_CLIENT_CA'] = join(this.dir, 'client-ca.pem');
    }
    await this.#startServer(keyPath);
    this.ca = await ensureCa({ secretsDir: this.server.config.secretsDir, trustDomain: this.server.config.trustDomain });
    // With a client CA: the cockpit's certificate is any certificate of it (an agent-kind one here).
    this.operator =
      this.clientCa === undefined
        ? await issueOperatorCert(this.ca, { name: 'cockpit' })
        : await issueAgentCert(this.clientCa, { instanceId: 'cockpit-1' });
    this.agent = await issueAgentCert(this.ca, { instanceId: 'i-desktop-agent' });
    this.foreign = await issueOperatorCert(await createStandaloneCa(this.server.config.trustDomain), { name: 'cockpit' });
    this.expired = await issueOperatorCert(this.ca, { name: 'cockpit', ttlSeconds: 3600, now: new Date(Date.now() - 2 * 86_400_000) });
  }

  async #startServer(keyPath: string): Promise<void> {
    const config = loopbackConfig(this.dir, {
      SVC_DESKTOP_ADDR: '127.0.0.1:0',
      SVC_DESKTOP_TOKEN_ISSUER_KEY: keyPath,
      SVC_DESKTOP_TOKEN_ISSUER: ISSUER,
      LOG_LEVEL: 'info',
      ...this.#env,
    });
    const logger = pino({ level: 'info' }, { write: (line: string) => void this.logLines.push(line) });
    const counting = (inner: DesktopAuthority): DesktopAuthority => ({
      resolveKey: (header) => {
        this.consulted++;
        return this.authorityDown ? Promise.reject(new Error('authority down (test)')) : inner.resolveKey(header);
      },
    });
    this.server = await startServer(config, logger, {
      components: [eventsComponent(), desktopComponent({ authority: counting, now: () => this.nowMs })],
    });
  }

  /** Stops and starts the server on the same state directory (durability). */
  async restart(): Promise<void> {
    await this.server.stop();
    await this.#startServer(join(this.dir, 'issuer.pub.pem'));
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    if (this.dir !== '') await rm(this.dir, { recursive: true, force: true });
  }

  get service(): DesktopService {
    return this.server.service('desktop');
  }

  get port(): number {
    return this.server.service('desktopListener').port;
  }

  /** A delegation token: by default for `sub` in `workspace`, valid for 10 minutes of the server's clock. */
  token(
    claims: { sub?: string; workspace?: string; aud?: string; iss?: string; expSecondsFromNow?: number; cnf?: object } = {},
    key: KeyObject = this.issuer.privateKey,
  ): Promise<string> {
    const nowS = Math.floor(this.nowMs / 1000);
    return new SignJWT({ workspace: claims.workspace ?? 'ws-a', ...(claims.cnf !== undefined && { cnf: claims.cnf }) })
      .setProtectedHeader({ alg: 'EdDSA' })
      .setSubject(claims.sub ?? 'alice')
      .setAudience(claims.aud ?? AUDIENCE)
      .setIssuer(claims.iss ?? ISSUER)
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + (claims.expSecondsFromNow ?? 600))
      .sign(key);
  }

  /** One request on a fresh connection. */
  call(path: string, opts: RequestOptions = {}): Promise<Reply> {
    const cert = opts.cert === undefined ? this.operator : opts.cert;
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: this.port,
          path,
          method: opts.method ?? 'GET',
          ca: this.ca.caCertPem,
          ...(cert !== null && { cert: cert.certPem, key: cert.keyPem }),
          agent: false,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            let json: Record<string, unknown> = {};
            try {
              json = JSON.parse(text) as Record<string, unknown>;
            } catch {
              // not JSON: the test looks at text
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
          });
          res.on('error', reject);
        },
      );
      if (opts.authorization !== undefined && opts.authorization.length > 0) req.setHeader('authorization', [...opts.authorization]);
      if (opts.body !== undefined) {
        req.setHeader('content-type', opts.contentType ?? 'application/json');
        req.setHeader('content-length', Buffer.byteLength(opts.body));
      }
      req.on('error', reject);
      req.end(opts.body);
    });
  }

  /** A request with a bearer token and an optional JSON body. */
  async as(token: string, method: string, path: string, body?: unknown): Promise<Reply> {
    return this.call(path, { method, authorization: [`Bearer ${token}`], ...(body !== undefined && { body: JSON.stringify(body) }) });
  }

  /**
   * Sends the request head and `firstBytes` of a body announced longer, then nothing: what the
   * server answers (raw HTTP text), read until it closes the connection.
   */
  slowBody(path: string, token: string, announcedBytes: number, firstBytes: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect({
        host: '127.0.0.1',
        port: this.port,
        ca: this.ca.caCertPem,
        cert: this.operator.certPem,
        key: this.operator.keyPem,
        servername: 'localhost',
      });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (text += c));
      socket.on('close', () => resolve(text));
      socket.on('error', (err: Error) => (text === '' ? reject(err) : resolve(text)));
      socket.once('secureConnect', () => {
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${announcedBytes}\r\n\r\n${firstBytes}`,
        );
      });
    });
  }

  /** Enrolls `instance` for the default caller; returns the revision. */
  async enroll(instance: string, token: string, over: Record<string, unknown> = {}): Promise<Reply> {
    return this.as(token, 'POST', `/api/v2/instances/${instance}/desktop-enrollment`, {
      incarnation: 'inc-1',
      ssh_address: '10.0.0.5:22',
      ssh_host_key: HOST_KEY,
      ...over,
    });
  }
}
