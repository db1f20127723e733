/**
 * A simulated agent for the bench scenarios: a real mTLS gRPC Connect stream (grpc-js, identity
 * serializers, messages encoded with the generated proto code) that registers, heartbeats and
 * streams output chunks for a command id the server has not dispatched (the agent actor adopts
 * it). Each agent gets its own HTTP/2 connection unless `shareConnection` is set.
 */
import * as grpc from '@grpc/grpc-js';
import { AgentMetadata, AgentServiceMethods, v1 } from '../../proto/index.js';

export interface SimAgentTls {
  /** PEM text. */
  ca: string;
  cert: string;
  key: string;
}

export interface SimAgentOptions {
  target: string;
  tls: SimAgentTls;
  agentId: string;
  instanceId: string;
  /** Multiplex over a shared HTTP/2 connection (grpc-js's global subchannel pool). Default false. */
  shareConnection?: boolean;
}

const identity = (b: Buffer): Buffer => b;

/** One ChannelCredentials (one parsed key and SecureContext) per certificate: fleets share theirs. */
const credentialsCache = new WeakMap<SimAgentTls, grpc.ChannelCredentials>();
function credentialsFor(tls: SimAgentTls): grpc.ChannelCredentials {
  let creds = credentialsCache.get(tls);
  if (creds === undefined) {
    creds = grpc.credentials.createSsl(Buffer.from(tls.ca), Buffer.from(tls.key), Buffer.from(tls.cert));
    credentialsCache.set(tls, creds);
  }
  return creds;
}

/** CLOCK_MONOTONIC in µs: the same clock in every process of this machine (no wall-clock drift). */
export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

function encode(m: v1.IAgentMessage): Buffer {
  const u8 = v1.AgentMessage.encode(m).finish();
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

export class SimAgent {
  readonly agentId: string;
  readonly #client: grpc.Client;
  readonly #call: grpc.ClientDuplexStream<Buffer, Buffer>;
  readonly acked: Promise<void>;
  readonly ended: Promise<grpc.StatusObject>;
  #drainWaiters: Array<() => void> = [];

  constructor(opts: SimAgentOptions) {
    this.agentId = opts.agentId;
    this.#client = new grpc.Client(opts.target, credentialsFor(opts.tls), {
      'grpc.ssl_target_name_override': 'localhost',
      'grpc.default_authority': 'localhost',
      'grpc.enable_channelz': 0,
      ...(opts.shareConnection === true ? {} : { 'grpc.use_local_subchannel_pool': 1 }),
    });
    const md = new grpc.Metadata();
    md.set(AgentMetadata.agentId, opts.agentId);
    md.set(AgentMetadata.instanceId, opts.instanceId);
    this.#call = this.#client.makeBidiStreamRequest<Buffer, Buffer>(AgentServiceMethods.Connect.path, identity, identity, md, {});
    this.#call.on('error', () => undefined);
    this.#call.on('drain', () => {
      const waiters = this.#drainWaiters;
      this.#drainWaiters = [];
      for (const w of waiters) w();
    });
    let acked: () => void = () => undefined;
    this.acked = new Promise((resolve) => (acked = resolve));
    this.#call.on('data', (b: Buffer) => {
      const m = v1.ManagementMessage.decode(b);
      if (m.payload === 'registrationAck') acked();
    });
    this.ended = new Promise((resolve) => this.#call.on('status', resolve));
  }

  /** Sends the registration (the stream's first message). */
  register(): void {
    this.#call.write(
      encode({
        registration: {
          agentId: this.agentId,
          hostname: `bench-${this.agentId}`,
          ipAddress: '127.0.0.1',
          profile: 'basic',
          system: { os: 'Linux bench', kernel: '6.1', cpuCores: 2, memoryBytes: 1 << 30, diskBytes: 1 << 30 },
        },
      }),
    );
  }

  /**
   * A READY heartbeat stamped with Date.now(). memory_used_bytes carries the send time in µs of
   * CLOCK_MONOTONIC (monotonicMicros, shared by every process here): the server echoes it in its
   * agent.heartbeat event, which lets the fleet scenario measure how long a heartbeat takes to be
   * handled.
   */
  heartbeat(): boolean {
    const sentUs = monotonicMicros();
    return this.#call.write(
      encode({
        heartbeat: {
          agentId: this.agentId,
          timestampMs: Date.now(),
          status: v1.AgentStatus.READY,
          cpuPercent: 1,
          memoryUsedBytes: sentUs,
          uptimeSeconds: 1,
        },
      }),
    );
  }

  /** One stdout chunk; false when the stream's buffer is full (await drained()). */
  chunk(commandId: string, seq: number, offset: number, data: Uint8Array): boolean {
    return this.#call.write(encode({ stdout: { streamId: commandId, seq, offset, data, timestampMs: Date.now() } }));
  }

  /** A pre-encoded AgentMessage. */
  writeRaw(message: Buffer): boolean {
    return this.#call.write(message);
  }

  result(commandId: string, exitCode: number, lastSeq: number): void {
    this.#call.write(encode({ commandResult: { commandId, exitCode, success: exitCode === 0, durationMs: 1, lastSeq } }));
  }

  drained(): Promise<void> {
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  close(): void {
    this.#call.end();
    this.#client.close();
  }
}

/** Encodes a stdout chunk message once (for senders that repeat the same bytes). */
export function encodeChunkMessage(commandId: string, seq: number, offset: number, data: Uint8Array): Buffer {
  return encode({ stdout: { streamId: commandId, seq, offset, data, timestampMs: Date.now() } });
}

/** PTY-like output: coloured log lines with CR LF, `bytes` long (deterministic for a given `seed`). */
export function ptyText(bytes: number, seed = 0): Buffer {
  const out = Buffer.alloc(bytes);
  let o = 0;
  let n = seed;
  while (o < bytes) {
    n++;
    const line = `\x1b[32mINFO\x1b[0m 2025-01-01T00:00:${String(n % 60).padStart(2, '0')}Z worker[${1000 + (n % 97)}]: request id=${(n * 2654435761) >>> 0} status=200 took ${n % 50}ms\r\n`;
    o += out.write(line, o, 'latin1');
  }
  return out;
}
