/**
 * The gRPC listener for agents (SVC_GRPC_ADDR): grpc-js over mutual TLS only. Plaintext is never
 * offered; the client must present a certificate chaining to sandboxd's CA (a missing, foreign
 * or expired one fails the handshake). Connect uses identity (de)serializers, so the main thread
 * passes agent messages on as bytes and never decodes them; Exec's small request and response
 * messages are (de)serialized here.
 */
import * as grpc from '@grpc/grpc-js';
import { constants as cryptoConstants } from 'node:crypto';
import type { SecureServerOptions } from 'node:http2';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { SecureContextOptions } from 'node:tls';
import { AGENT_SERVICE_NAME, AgentServiceMethods, MAX_MESSAGE_BYTES, v1 } from '../../proto/index.js';
import { formatAddress, type ListenAddress } from '../config/parsers.js';
import type { CaMaterial } from '../identity/ca.js';
import type { LoggerLike } from './grpc-util.js';

/** HTTP/2 keepalive ping interval of the server (ms): a dead agent's stream ends within interval + timeout. */
export const kServerKeepaliveMs = 30_000;
/** How long a keepalive ping may stay unanswered (ms). */
export const kServerKeepaliveTimeoutMs = 10_000;

export interface GrpcHandlers {
  connect(call: grpc.ServerDuplexStream<Buffer, Buffer>): void;
  exec(call: grpc.ServerWritableStream<v1.ExecRequest, v1.IExecOutput>): void;
}

export interface GrpcListener {
  readonly port: number;
  /** Stops accepting, gives open calls `graceMs` to finish, then cuts them. Idempotent. */
  close(graceMs: number): Promise<void>;
}

const identity = (b: Buffer): Buffer => b;

/**
 * grpc-js's createSsl (the CA as the only trust anchor, client certificates required) plus one
 * TLS option it cannot express: SSL_OP_NO_TICKET. By default TLS 1.3 hands each agent two
 * stateless session tickets, each the session (peer certificate included) serialized and
 * encrypted; the resident memory of an idle mTLS connection measured 52 KiB with them and 39.5 KiB
 * without (native-bench/README.md, "fleet"). With the option OpenSSL sends session-id tickets
 * that Node's server never stores, so no session is resumed: agents (grpc-js) never resume
 * anyway, and every connection proves its certificate again. grpc-js spreads these options into
 * http2.createSecureServer (createHttp2Server in its server.ts).
 */
class AgentServerCredentials extends grpc.ServerCredentials {
  constructor(ca: CaMaterial) {
    const server: SecureServerOptions = { requestCert: true, rejectUnauthorized: true, secureOptions: cryptoConstants.SSL_OP_NO_TICKET };
    const context: SecureContextOptions = {
      ca: Buffer.from(ca.caCertPem),
      cert: Buffer.from(ca.serverCertPem),
      key: Buffer.from(ca.serverKeyPem),
    };
    super(server, context);
  }

  _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

function toBuffer(u8: Uint8Array): Buffer {
  return Buffer.isBuffer(u8) ? u8 : Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

/** The AgentService definition with our serializers (descriptors from proto/index.ts). */
export function agentServiceDefinition(): grpc.ServiceDefinition {
  const c = AgentServiceMethods.Connect;
  const e = AgentServiceMethods.Exec;
  return {
    Connect: {
      path: c.path,
      requestStream: c.requestStream,
      responseStream: c.responseStream,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
    Exec: {
      path: e.path,
      requestStream: e.requestStream,
      responseStream: e.responseStream,
      requestSerialize: (m: v1.IExecRequest) => toBuffer(v1.ExecRequest.encode(m).finish()),
      requestDeserialize: (b: Buffer) => v1.ExecRequest.decode(b),
      responseSerialize: (m: v1.IExecOutput) => toBuffer(v1.ExecOutput.encode(m).finish()),
      responseDeserialize: (b: Buffer) => v1.ExecOutput.decode(b),
    },
  };
}

/**
 * Binds the listener. Rejects when the address cannot be bound. `ca` supplies the trust bundle
 * (client certificates must chain to it) and the server certificate.
 *
 * We own the TCP listener and hand each accepted socket to grpc-js through its connection
 * injector, because grpc-js cannot be asked to close the raw sockets it accepted: a guest VM that
 * is powered off mid-connection never sends FIN, and after grpc-js destroyed its HTTP/2 session
 * the raw TCP socket stayed open (seen with real VMs: the test process never exited). `close`
 * therefore destroys whatever raw socket is still open once the grace has passed.
 */
export async function startGrpcListener(opts: {
  address: ListenAddress;
  ca: CaMaterial;
  handlers: GrpcHandlers;
  logger: LoggerLike;
}): Promise<GrpcListener> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    'grpc.keepalive_time_ms': kServerKeepaliveMs,
    'grpc.keepalive_timeout_ms': kServerKeepaliveTimeoutMs,
    // channelz keeps per-connection and per-call trackers (closures, counters, a global registry
    // entry) that nothing here reads.
    'grpc.enable_channelz': 0,
  });
  const handlers: grpc.UntypedServiceImplementation = {
    Connect: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => opts.handlers.connect(call),
    Exec: (call: grpc.ServerWritableStream<v1.ExecRequest, v1.IExecOutput>) => opts.handlers.exec(call),
  };
  server.addService(agentServiceDefinition(), handlers);
  const creds = new AgentServerCredentials(opts.ca);
  const injector = server.createConnectionInjector(creds);
  const sockets = new Set<Socket>();
  const tcp = createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {
      /* reported by the TLS layer wrapped around it */
    });
    injector.injectConnection(socket);
  });
  const port = await new Promise<number>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen({ host: opts.address.host, port: opts.address.port }, () => {
      tcp.off('error', reject);
      resolve((tcp.address() as AddressInfo).port);
    });
  });
  opts.logger.info(
    { address: formatAddress({ host: opts.address.host, port }), service: AGENT_SERVICE_NAME },
    'gRPC listener ready (mTLS)',
  );
  let closing: Promise<void> | undefined;
  return {
    port,
    close(graceMs) {
      closing ??= new Promise<void>((resolve) => {
        tcp.close();
        const finish = (): void => {
          clearTimeout(timer);
          injector.destroy();
          for (const socket of sockets) socket.destroy();
          sockets.clear();
          resolve();
        };
        const timer = setTimeout(() => {
          server.forceShutdown();
          finish();
        }, graceMs);
        timer.unref();
        server.tryShutdown(finish);
      });
      return closing;
    },
  };
}
