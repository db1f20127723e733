/**
 * The SSH connector (spec 4.14; README "SSH connector"): a TCP listener of its own
 * (SVC_GATEWAY_SSH_LISTEN) that carries a raw SSH stream to an instance's sshd without looking
 * inside it.
 *
 * Per connection: one newline-terminated JSON prelude {actor, instance_id, access_mode}
 * (src/wire/ssh-connector.ts: at most 4 KiB, within 5 s), then
 *   1. the allowlist (SVC_GATEWAY_SSH_ALLOWLIST, `actor=instance`, `*` on either side; empty denies all),
 *   2. the lease: the actor must hold an active, unexpired SSH lease for that instance
 *      ({@link LeaseCheck}). The prelude carries no credential; a lease is issued only to an
 *      authenticated operator for exactly this actor and instance, so holding one is what makes
 *      the prelude's actor claim count. The login itself is still sshd's: it accepts only a
 *      certificate of the CA for an authorized principal within its validity,
 *   3. the target: SVC_GATEWAY_SSH_TARGETS (`instance=host:port`), else the VM's known SSH
 *      address ({@link TargetLookup}: a local VM's sshd, a qemu guest's address:22); a VM with
 *      none (stopped, the minimal image) is ssh.no_endpoint with the lookup's reason.
 * A refusal is one JSON error line {error: {code, message}} and the connection closes; the target
 * is dialled only after every check passed, so no byte of a refused client ever reaches sshd.
 * Then bytes are piped both ways with backpressure (socket.pipe: at most a socket's buffers per
 * direction held here), including the bytes that arrived behind the prelude's newline.
 *
 * Audit (when a log is given): `gateway_ssh_session.open` per decision (allowed, or denied with the
 * refusal code) and `gateway_ssh_session.close` with bytes each way and the duration. Never a byte of the
 * stream.
 */
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { ListenAddress } from '../../config/parsers.js';
import type { AuditEntry } from '../../credentials/audit-log.js';
import {
  kPreludeMaxBytes,
  kPreludeTimeoutMs,
  parsePrelude,
  type SshConnectorErrorCode,
  type SshPrelude,
} from '../../wire/ssh-connector.js';

/** What the lease check found: the lease's id is recorded in the audit. */
export interface LeaseMatch {
  readonly id: string;
}

/**
 * Does `actor` hold an active, unexpired SSH lease for `instanceId`? The lease store's
 * `findActive(actor, instanceId)` fits as it is. Must not throw (a rejection is a refusal).
 */
export type LeaseCheck = (actor: string, instanceId: string) => LeaseMatch | undefined | Promise<LeaseMatch | undefined>;

/** What a lookup knows of an instance: its SSH address, why it has none, or null (no such instance). */
export type TargetAnswer = ListenAddress | { readonly none: string } | null;

/** An instance's SSH address when SVC_GATEWAY_SSH_TARGETS does not name it. */
export type TargetLookup = (instanceId: string) => TargetAnswer | Promise<TargetAnswer>;

export interface SshConnectorOptions {
  readonly listen: ListenAddress;
  /** SVC_GATEWAY_SSH_TARGETS: instance → host:port, ahead of `lookup`. */
  readonly targets: readonly (readonly [string, string])[];
  /** SVC_GATEWAY_SSH_ALLOWLIST: actor=instance rules. */
  readonly allowlist: readonly (readonly [string, string])[];
  readonly leaseCheck: LeaseCheck;
  readonly lookup?: TargetLookup;
  readonly audit?: { write(e: AuditEntry): void } | null;
  /** Connection outcomes: opened, or the refusal code. */
  readonly outcomes?: Counter<'outcome'>;
  readonly logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Default kPreludeMaxBytes / kPreludeTimeoutMs (tests shorten the time). */
  readonly preludeMaxBytes?: number;
  readonly preludeTimeoutMs?: number;
  /** Bound of dialling the target, ms. Default 10000. */
  readonly connectTimeoutMs?: number;
}

class Refusal extends Error {
  constructor(
    readonly code: SshConnectorErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** How long a refused client may take to read its error line before it is cut off, ms. */
const kRefusalLingerMs = 2000;

export class SshConnector {
  readonly #o: SshConnectorOptions;
  readonly #server: Server;
  readonly #targets: ReadonlyMap<string, ListenAddress>;
  readonly #sockets = new Set<Socket>();
  #closed: Promise<void> | null = null;

  private constructor(o: SshConnectorOptions, server: Server) {
    this.#o = o;
    this.#server = server;
    this.#targets = new Map(o.targets.map(([instance, addr]) => [instance, parseTarget(addr)]));
  }

  /** Listens on `listen`; rejects when the address cannot be bound or a target is malformed. */
  static async start(o: SshConnectorOptions): Promise<SshConnector> {
    // Half-open both ways: one side's end is passed on as an end, so the other side's last bytes still arrive.
    const server = createServer({ noDelay: true, allowHalfOpen: true });
    const c = new SshConnector(o, server);
    server.on('connection', (s) => c.#accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.listen.port, o.listen.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => o.logger.error({ err }, 'ssh connector listener error'));
    return c;
  }

  /** The bound port (useful with port 0). */
  get port(): number {
    const a = this.#server.address();
    return typeof a === 'object' && a !== null ? a.port : this.#o.listen.port;
  }

  /** Connections open now (prelude pending, or piping). */
  get connections(): number {
    return this.#sockets.size;
  }

  /** Stops listening and cuts every connection. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      for (const s of this.#sockets) s.destroy();
    });
    return this.#closed;
  }

  #accept(client: Socket): void {
    this.#sockets.add(client);
    client.once('close', () => this.#sockets.delete(client));
    client.on('error', () => undefined); // a reset client: 'close' follows and does the rest
    const startedMs = Date.now();
    const sessionId = `sshsess_${randomBytes(8).toString('hex')}`;
    let prelude: SshPrelude | null = null;
    readPrelude(client, this.#o.preludeMaxBytes ?? kPreludeMaxBytes, this.#o.preludeTimeoutMs ?? kPreludeTimeoutMs)
      .then(async ({ line, rest }) => {
        const p = parsePrelude(line);
        if (!('actor' in p)) throw new Refusal(p.code, p.message);
        prelude = p;
        const lease = await this.#authorize(p);
        const target = await this.#target(p.instance_id);
        const upstream = await dial(target, this.#o.connectTimeoutMs ?? 10_000).catch((err: unknown) => {
          throw new Refusal('ssh.target_unreachable', `the SSH endpoint of ${p.instance_id} did not answer (${(err as Error).message})`);
        });
        if (client.destroyed || this.#closed !== null) {
          // The client left, or the connector stopped, while the target was dialled.
          upstream.destroy();
          client.destroy();
          return;
        }
        this.#pipe(client, upstream, rest, { prelude: p, leaseId: lease.id, sessionId, startedMs });
      })
      .catch((err: unknown) => {
        const r = err instanceof Refusal ? err : new Refusal('ssh.unavailable', 'the connector failed');
        if (!(err instanceof Refusal)) this.#o.logger.error({ err, session: sessionId }, 'ssh connector failed');
        this.#refuse(client, r, prelude, sessionId);
      });
  }

  async #authorize(p: SshPrelude): Promise<LeaseMatch> {
    const allowed = this.#o.allowlist.some(([a, i]) => (a === '*' || a === p.actor) && (i === '*' || i === p.instance_id));
    if (!allowed) throw new Refusal('ssh.not_allowed', `actor ${p.actor} may not reach ${p.instance_id} (SVC_GATEWAY_SSH_ALLOWLIST)`);
    let lease: LeaseMatch | undefined;
    try {
      lease = await this.#o.leaseCheck(p.actor, p.instance_id);
    } catch (err) {
      this.#o.logger.error({ err }, 'ssh lease check failed');
      lease = undefined;
    }
    if (lease === undefined)
      throw new Refusal('ssh.lease_required', `actor ${p.actor} holds no active SSH lease for ${p.instance_id} (sbx ssh requests one)`);
    return lease;
  }

  async #target(instanceId: string): Promise<ListenAddress> {
    const t = this.#targets.get(instanceId) ?? (await this.#o.lookup?.(instanceId)) ?? null;
    if (t === null) throw new Refusal('ssh.unknown_instance', `no SSH endpoint is known for ${instanceId}`);
    if ('none' in t) throw new Refusal('ssh.no_endpoint', `${instanceId} has no SSH endpoint: ${t.none}`);
    return t;
  }

  #pipe(
    client: Socket,
    upstream: Socket,
    rest: Buffer,
    s: { prelude: SshPrelude; leaseId: string; sessionId: string; startedMs: number },
  ): void {
    this.#sockets.add(upstream);
    upstream.once('close', () => this.#sockets.delete(upstream));
    this.#o.outcomes?.inc({ outcome: 'opened' });
    this.#audit('gateway_ssh_session.open', 'allowed', null, s.prelude, s.sessionId, s.leaseId, {});
    this.#o.logger.info(
      { session: s.sessionId, actor: s.prelude.actor, instance: s.prelude.instance_id, lease: s.leaseId },
      'ssh session opened',
    );
    let open = 2;
    const closed = (): void => {
      if (--open > 0) return;
      const details = {
        bytes_up: upstream.bytesWritten,
        bytes_down: client.bytesWritten,
        duration_ms: Date.now() - s.startedMs,
      };
      this.#audit('gateway_ssh_session.close', 'allowed', null, s.prelude, s.sessionId, s.leaseId, details);
      this.#o.logger.info({ session: s.sessionId, ...details }, 'ssh session closed');
    };
    // An end is passed on by pipe (half-close), after the bytes before it; a side that fails
    // (reset, error) takes the other with it at once.
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.once('close', (hadError) => {
      if (hadError) client.destroy();
      else client.end();
      closed();
    });
    client.once('close', (hadError) => {
      if (hadError) upstream.destroy();
      else upstream.end();
      closed();
    });
    // A peer that vanished without a FIN or RST is found by keepalive probes, not kept forever.
    client.setKeepAlive(true, 60_000);
    upstream.setKeepAlive(true, 60_000);
    if (rest.length > 0) upstream.write(rest);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  }

  #refuse(client: Socket, r: Refusal, prelude: SshPrelude | null, sessionId: string): void {
    this.#o.outcomes?.inc({ outcome: r.code });
    this.#audit('gateway_ssh_session.open', 'denied', r.code, prelude, sessionId, null, {});
    this.#o.logger.info(
      { session: sessionId, code: r.code, actor: prelude?.actor, instance: prelude?.instance_id },
      'ssh connection refused',
    );
    if (client.destroyed) return;
    // Whatever the client sends now is read and dropped (unread bytes would turn the close into a
    // reset, which can discard the error line before the client reads it).
    client.removeAllListeners('data');
    client.on('data', () => undefined);
    client.resume();
    client.end(`${JSON.stringify({ error: { code: r.code, message: r.message } })}\n`);
    setTimeout(() => client.destroy(), kRefusalLingerMs).unref();
  }

  #audit(
    action: 'gateway_ssh_session.open' | 'gateway_ssh_session.close',
    outcome: 'allowed' | 'denied',
    reasonCode: string | null,
    p: SshPrelude | null,
    sessionId: string,
    leaseId: string | null,
    details: Record<string, number>,
  ): void {
    const audit = this.#o.audit;
    if (audit === undefined || audit === null) return;
    try {
      audit.write({
        action,
        outcome,
        reasonCode,
        actor: p?.actor ?? null,
        leaseId,
        credential: null,
        agentId: null,
        instanceId: p?.instance_id ?? null,
        sessionId,
        traceId: null,
        details,
      });
    } catch (err) {
      this.#o.logger.error({ err, session: sessionId }, 'ssh session audit record could not be written');
    }
  }
}

/**
 * Reads up to the first newline. Resolves with the line (without the newline) and the bytes
 * after it, leaving the socket paused; rejects with a Refusal past `maxBytes` or `timeoutMs`, or
 * when the client goes away.
 */
function readPrelude(s: Socket, maxBytes: number, timeoutMs: number): Promise<{ line: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      clearTimeout(timer);
      s.off('data', onData);
      s.off('end', onEnd);
      s.off('close', onEnd);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Refusal('ssh.prelude_timeout', `the prelude did not arrive within ${timeoutMs} ms`));
    }, timeoutMs);
    const onEnd = (): void => {
      done();
      reject(new Refusal('ssh.prelude_invalid', 'the connection ended before the prelude did'));
    };
    const onData = (chunk: Buffer): void => {
      const nl = chunk.indexOf(0x0a);
      const used = nl < 0 ? chunk.length : nl + 1;
      if (size + used > maxBytes) {
        done();
        reject(new Refusal('ssh.prelude_too_large', `the prelude is longer than ${maxBytes} bytes`));
        return;
      }
      if (nl < 0) {
        parts.push(chunk);
        size += chunk.length;
        return;
      }
      s.pause();
      done();
      parts.push(chunk.subarray(0, nl));
      resolve({ line: Buffer.concat(parts).toString('utf8').replace(/\r$/, ''), rest: Buffer.from(chunk.subarray(nl + 1)) });
    };
    s.on('data', onData);
    s.once('end', onEnd);
    s.once('close', onEnd);
  });
}

function dial(t: ListenAddress, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: t.host, port: t.port, noDelay: true, allowHalfOpen: true });
    const timer = setTimeout(() => s.destroy(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** `host:port` or `[v6]:port` of SVC_GATEWAY_SSH_TARGETS. */
export function parseTarget(raw: string): ListenAddress {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(raw.trim());
  const port = Number(m?.[3]);
  if (m === null || port < 1 || port > 65535) throw new Error(`SVC_GATEWAY_SSH_TARGETS: "${raw}" is not host:port`);
  return { host: m[1] ?? m[2] ?? '', port };
}
