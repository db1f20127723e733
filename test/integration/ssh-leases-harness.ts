/**
 * A server with the gateway SSH lease routes on real listeners: the plaintext loopback listener
 * (the trusted local listener) and the admin listener (HTTPS, mutual TLS) with operator
 * certificates from the server's CA and a real roles file (alice admin, carol operator, bob a
 * viewer because he is not in it). The hypervisor is libvirt's test:///default (it knows the VM
 * `test`); the server's log goes to a file at trace level so a test can scan every line.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { credentialsComponent } from '../../src/credentials/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { gatewaySshComponent } from '../../src/gateway/ssh/component.js';
import { ensureCa, issueOperatorCert, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { httpComponent, hypervisorComponent } from '../../src/server/runtime-components.js';
import { loopbackConfig } from '../support/test-config.js';
import { mtlsRequest } from '../support/mtls-request.js';

export type Operator = 'alice' | 'bob' | 'carol';

export interface Reply {
  readonly status: number;
  readonly json: Record<string, unknown>;
  readonly text: string;
}

export interface SshLeaseServer {
  readonly dir: string;
  readonly logFile: string;
  readonly server: ServerHandle;
  /** A call on the admin listener as one of the operators. */
  admin(who: Operator, method: string, path: string, body?: unknown): Promise<Reply>;
  /** A call on the trusted local listener. */
  local(method: string, path: string, body?: unknown): Promise<Reply>;
  /** Stops the server (the directory stays: restart with the same `dir`). */
  stop(): Promise<void>;
}

/** The error code of a reply. */
export const codeOf = (r: Reply): string | undefined => (r.json['error'] as { code?: string } | undefined)?.code;

/** Starts the server with its state in `dir` (made when absent) and `env` on top of the loopback config. */
export async function startSshLeaseServer(env: Record<string, string> = {}, dirIn?: string): Promise<SshLeaseServer> {
  const dir = dirIn ?? (await mkdtemp(join(tmpdir(), 'sbx-sshlease-')));
  const rolesPath = join(dir, 'roles.json');
  await writeFile(rolesPath, JSON.stringify({ alice: 'admin', carol: 'operator' }));
  const logFile = join(dir, `server-${Date.now()}.log`);
  const logger = pino({ level: 'trace' }, pino.destination({ dest: logFile, sync: true }));
  const config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath, SVC_HYPERVISOR_READ_BUDGET_MS: '20000', ...env });
  const server = await startServer(config, logger, {
    components: [
      authComponent,
      eventsComponent(),
      hypervisorComponent,
      credentialsComponent(),
      gatewaySshComponent(),
      httpComponent,
      adminListenerComponent,
    ],
  });
  let ca: CaMaterial;
  const certs = new Map<Operator, IssuedCert>();
  try {
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    for (const name of ['alice', 'bob', 'carol'] as const) certs.set(name, await issueOperatorCert(ca, { name }));
  } catch (err) {
    await server.stop();
    throw err;
  }
  const parse = (status: number, text: string): Reply => {
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // not JSON
    }
    return { status, json, text };
  };
  return {
    dir,
    logFile,
    server,
    admin(who, method, path, body) {
      const cert = certs.get(who) as IssuedCert;
      return mtlsRequest({ port: server.ports.admin, ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem }, method, path, body).then(
        (r) => parse(r.status, r.text),
      );
    },
    async local(method, path, body) {
      const res = await fetch(`http://127.0.0.1:${server.ports.http}${path}`, {
        method,
        ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      return parse(res.status, await res.text());
    },
    stop: () => server.stop(),
  };
}

/** Removes a server's directory. */
export function removeDir(dir: string): Promise<void> {
  return rm(dir, { recursive: true, force: true });
}
