/**
 * An agent and an operator client written from proto/ alone: the .proto is loaded at run time
 * with @grpc/proto-loader, and nothing of sandboxd's server or agent code (nor the generated
 * code in proto/gen) is imported. It proves the contract in proto/ is enough to talk to sandboxd.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** proto/ of the repository (the build folders do not copy .proto files, so walk up). */
export function findProtoDir(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, 'svc', 'sandbox', 'v1', 'agent.proto'))) return candidate;
    if (dirname(dir) === dir) throw new Error('proto/svc/sandbox/v1/agent.proto not found above this file');
  }
}

type ServiceCtor = new (
  target: string,
  creds: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => grpc.Client & Record<string, (...args: unknown[]) => unknown>;

/** AgentService as loaded from the .proto (snake_case fields, enums as strings, 64-bit as numbers). */
export function loadAgentService(): ServiceCtor {
  const def = protoLoader.loadSync(join('svc', 'sandbox', 'v1', 'agent.proto'), {
    includeDirs: [findProtoDir()],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { svc: { sandbox: { v1: { AgentService: ServiceCtor } } } };
  return pkg.svc.sandbox.v1.AgentService;
}

export interface TlsMaterial {
  ca: string;
  cert: string;
  key: string;
}

const channelOptions: grpc.ChannelOptions = { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' };

interface ManagementMessage {
  payload?: string;
  registration_ack?: { accepted: boolean; heartbeat_interval_seconds: number };
  command?: { command_id: string; command: string; args: string[] };
  session_query?: { report_all: boolean };
}

/**
 * A minimal agent: registers, answers the session query, heartbeats READY, and runs every
 * CommandRequest by echoing it back as stdout and stderr chunks plus a CommandResult.
 */
export class ProtoOnlyAgent {
  readonly #client: grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  readonly #call: grpc.ClientDuplexStream<object, ManagementMessage>;
  readonly received: string[] = [];
  readonly acked: Promise<ManagementMessage['registration_ack']>;

  constructor(target: string, tls: TlsMaterial, ids: { agentId: string; instanceId: string }) {
    const Service = loadAgentService();
    this.#client = new Service(
      target,
      grpc.credentials.createSsl(Buffer.from(tls.ca), Buffer.from(tls.key), Buffer.from(tls.cert)),
      channelOptions,
    );
    const md = new grpc.Metadata();
    md.set('x-agent-id', ids.agentId);
    md.set('x-agent-instance-id', ids.instanceId);
    this.#call = (this.#client['Connect'] as (md: grpc.Metadata) => grpc.ClientDuplexStream<object, ManagementMessage>)(md);
    this.#call.on('error', () => undefined);
    let ackResolve!: (a: ManagementMessage['registration_ack']) => void;
    this.acked = new Promise((r) => (ackResolve = r));
    this.#call.on('data', (m: ManagementMessage) => {
      this.received.push(String(m.payload));
      const now = Date.now();
      if (m.payload === 'registration_ack') {
        ackResolve(m.registration_ack);
        this.#call.write({
          heartbeat: {
            agent_id: ids.agentId,
            timestamp_ms: now,
            status: 'READY',
            cpu_percent: 1.5,
            memory_used_bytes: 1024,
            uptime_seconds: 10,
          },
        });
        this.#call.write({
          metrics: {
            agent_id: ids.agentId,
            timestamp_ms: now,
            cpu_percent: 1.5,
            memory_used_bytes: 1024,
            memory_total_bytes: 4096,
            disk_used_bytes: 1,
            disk_total_bytes: 2,
            load_avg: [0.1, 0.2, 0.3],
            uptime_seconds: 10,
          },
        });
      } else if (m.payload === 'session_query') {
        this.#call.write({ session_report: { agent_id: ids.agentId, sessions: [], timestamp_ms: now } });
      } else if (m.payload === 'command' && m.command) {
        const c = m.command;
        const text = `ran ${[c.command, ...c.args].join(' ')}\n`;
        this.#call.write({ stdout: { stream_id: c.command_id, data: Buffer.from(text), timestamp_ms: now, seq: 1, offset: 0, eof: true } });
        this.#call.write({
          stderr: { stream_id: c.command_id, data: Buffer.from('note\n'), timestamp_ms: now, seq: 2, offset: 0, eof: true },
        });
        this.#call.write({ command_result: { command_id: c.command_id, exit_code: 0, success: true, duration_ms: 1, last_seq: 2 } });
      }
    });
    this.#call.write({
      registration: {
        agent_id: ids.agentId,
        instance_id: ids.instanceId,
        hostname: 'proto-only-host',
        ip_address: '127.0.0.1',
        profile: 'basic',
        labels: { written_from: 'proto' },
        system: { os: 'Linux', kernel: '6.1', cpu_cores: 1, memory_bytes: 4096, disk_bytes: 2 },
      },
    });
  }

  close(): void {
    this.#call.end();
    this.#client.close();
  }
}

export interface ExecItem {
  stream: string;
  data: Buffer;
  exit_code: number;
  complete: boolean;
  error: string;
}

/** An operator's Exec through the run-time-loaded service. */
export function protoOnlyExec(
  target: string,
  tls: TlsMaterial,
  request: Record<string, unknown>,
): Promise<{ items: ExecItem[]; status: grpc.StatusObject }> {
  const Service = loadAgentService();
  const client = new Service(
    target,
    grpc.credentials.createSsl(Buffer.from(tls.ca), Buffer.from(tls.key), Buffer.from(tls.cert)),
    channelOptions,
  );
  const call = (client['Exec'] as (req: object) => grpc.ClientReadableStream<ExecItem>)(request);
  const items: ExecItem[] = [];
  return new Promise((resolve) => {
    call.on('data', (i: ExecItem) => items.push(i));
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => {
      client.close();
      resolve({ items, status });
    });
  });
}
