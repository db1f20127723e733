/**
 * One Connect stream to sandboxd over mTLS (grpc-js client; only src/guest-agent and src/agent-link import
 * grpc-js). Each attempt builds a fresh channel, so the agent's own backoff (backoff.ts) decides
 * when to retry rather than grpc-js's channel reconnect logic, and certificates are re-read on
 * every attempt (a renewed certificate is picked up without a restart).
 *
 * Messages are (de)serialized with the static code in proto/gen through raw method paths: no
 * run-time .proto loading.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { AgentMetadata, AgentServiceMethods, MAX_MESSAGE_BYTES, v1 } from '../../proto/index.js';
import { formatAddress, type ListenAddress } from '../config/parsers.js';

/** File names inside the certificate folder (sandboxd certs issue-agent writes them). */
export const CERT_FILES = Object.freeze({ ca: 'ca.pem', cert: 'agent.pem', key: 'agent-key.pem' });

export interface ConnectionOptions {
  readonly server: ListenAddress;
  /** Name the server certificate must carry; also the :authority. */
  readonly tlsServerName: string;
  readonly certsDir: string;
  readonly agentId: string;
  readonly instanceId: string;
  /** HTTP/2 keepalive ping interval, in ms. Default 20000. */
  readonly keepaliveMs?: number;
  /** How long a keepalive ping may stay unanswered before the connection is declared dead, in ms. Default 10000. */
  readonly keepaliveTimeoutMs?: number;
}

export interface ConnectionHandlers {
  onMessage(msg: v1.ManagementMessage): void;
  /** The stream accepts writes again after send() returned false. */
  onDrain(): void;
  /** The stream ended (once): server closed it, the network failed, or close() was called. */
  onClose(reason: string): void;
}

function serialize(msg: v1.IAgentMessage): Buffer {
  const u8 = v1.AgentMessage.encode(msg).finish();
  return Buffer.isBuffer(u8) ? u8 : Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

function deserialize(buf: Buffer): v1.ManagementMessage {
  return v1.ManagementMessage.decode(buf);
}

/** Reads the three PEM files; rejects with a message naming the missing one. */
export async function readCertBundle(dir: string): Promise<{ ca: Buffer; cert: Buffer; key: Buffer }> {
  const read = (name: string): Promise<Buffer> =>
    readFile(join(dir, name)).catch((err: NodeJS.ErrnoException) => {
      throw new Error(`cannot read ${join(dir, name)}: ${err.code ?? err.message}`);
    });
  const [ca, cert, key] = await Promise.all([read(CERT_FILES.ca), read(CERT_FILES.cert), read(CERT_FILES.key)]);
  return { ca, cert, key };
}

export class AgentConnection {
  readonly #client: grpc.Client;
  readonly #call: grpc.ClientDuplexStream<v1.IAgentMessage, v1.ManagementMessage>;
  #closed = false;

  private constructor(
    client: grpc.Client,
    call: grpc.ClientDuplexStream<v1.IAgentMessage, v1.ManagementMessage>,
    handlers: ConnectionHandlers,
  ) {
    this.#client = client;
    this.#call = call;
    const close = (reason: string): void => {
      if (this.#closed) return;
      this.#closed = true;
      this.#client.close();
      handlers.onClose(reason);
    };
    call.on('data', (m: v1.ManagementMessage) => {
      if (!this.#closed) handlers.onMessage(m);
    });
    call.on('drain', () => {
      if (!this.#closed) handlers.onDrain();
    });
    // 'error' carries non-OK statuses; 'status' comes for every end. Listening to 'error' also
    // keeps it from being thrown as an unhandled event.
    call.on('error', (err: grpc.ServiceError) => close(`${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`));
    call.on('status', (s: grpc.StatusObject) =>
      close(s.code === grpc.status.OK ? 'server ended the stream' : `${grpc.status[s.code] ?? s.code}: ${s.details}`),
    );
  }

  /** Opens the stream. Rejects when the certificates cannot be read; network failures arrive as onClose. */
  static async open(opts: ConnectionOptions, handlers: ConnectionHandlers): Promise<AgentConnection> {
    const bundle = await readCertBundle(opts.certsDir);
    const creds = grpc.credentials.createSsl(bundle.ca, bundle.key, bundle.cert);
    const channelOptions: grpc.ChannelOptions = {
      // Dialing an IP with TLS would set the SNI to an IP (Node's DEP0123 warning); the server
      // certificate names `localhost` (or tlsServerName), so check and send that name instead.
      'grpc.ssl_target_name_override': opts.tlsServerName,
      'grpc.default_authority': opts.tlsServerName,
      'grpc.keepalive_time_ms': opts.keepaliveMs ?? 20_000,
      'grpc.keepalive_timeout_ms': opts.keepaliveTimeoutMs ?? 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.enable_retries': 0,
    };
    const client = new grpc.Client(formatAddress(opts.server), creds, channelOptions);
    const md = new grpc.Metadata();
    md.set(AgentMetadata.agentId, opts.agentId);
    md.set(AgentMetadata.instanceId, opts.instanceId);
    const call = client.makeBidiStreamRequest<v1.IAgentMessage, v1.ManagementMessage>(
      AgentServiceMethods.Connect.path,
      serialize,
      deserialize,
      md,
      {},
    );
    return new AgentConnection(client, call, handlers);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Writes one message. False means "buffer full, wait for onDrain" (the message was still queued). */
  send(msg: v1.IAgentMessage): boolean {
    if (this.#closed) return false;
    return this.#call.write(msg);
  }

  /** Drops the stream and the channel at once (queued writes may be lost). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#call.cancel();
  }

  /**
   * Half-closes (queued writes are sent first) and waits for the server to end the stream, at
   * most timeoutMs, then cancels.
   */
  closeGracefully(timeoutMs: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.close(), timeoutMs);
      timer.unref();
      this.#call.once('status', () => {
        clearTimeout(timer);
        resolve();
      });
      this.#call.end();
    });
  }
}
