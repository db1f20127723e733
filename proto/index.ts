/**
 * The typed entry point to the agent wire contract (proto/svc/sandbox/v1/agent.proto).
 *
 * - `svc` / `v1`: the static protobufjs code generated into proto/gen/ by proto/generate.mjs
 *   (`npm run proto`). 64-bit integers are plain JS numbers (see proto/generate.mjs).
 * - `AgentServiceMethods`: the gRPC method descriptors, so transports can register handlers with
 *   their own (identity) serializers without this module importing grpc-js.
 * - `AGENT_PROTO_PATH` / `PROTO_INCLUDE_DIR`: for clients that load the .proto at run time with
 *   @grpc/proto-loader (the "written from proto/ alone" path).
 *
 * The contract itself (message semantics, connection sequence, limits, compatibility rules) is
 * proto/README.md.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { svc } from './gen/agent.js';

export { svc };

/**
 * Package svc.sandbox.v1 as both values (message classes: `v1.AgentMessage.decode(bytes)`) and
 * types (`v1.IOutputChunk` for plain objects, `v1.OutputChunk` for decoded instances).
 */
import v1 = svc.sandbox.v1;
export { v1 };

/** Fully qualified gRPC service name. */
export const AGENT_SERVICE_NAME = 'svc.sandbox.v1.AgentService';

/** A gRPC method as a transport needs it: HTTP/2 path, streaming shape, message type names. */
export interface GrpcMethodDescriptor {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  /** Fully qualified protobuf type of the request. */
  readonly requestType: string;
  /** Fully qualified protobuf type of the response. */
  readonly responseType: string;
}

/** Methods of AgentService (checked against the .proto by test/unit/proto/generated.test.ts). */
export const AgentServiceMethods = {
  /** Bidirectional agent stream: AgentMessage in, ManagementMessage out. */
  Connect: {
    path: '/svc.sandbox.v1.AgentService/Connect',
    requestStream: true,
    responseStream: true,
    requestType: 'svc.sandbox.v1.AgentMessage',
    responseType: 'svc.sandbox.v1.ManagementMessage',
  },
  /** Operator one-shot command: one ExecRequest in, a stream of ExecOutput out. */
  Exec: {
    path: '/svc.sandbox.v1.AgentService/Exec',
    requestStream: false,
    responseStream: true,
    requestType: 'svc.sandbox.v1.ExecRequest',
    responseType: 'svc.sandbox.v1.ExecOutput',
  },
} as const satisfies Record<string, GrpcMethodDescriptor>;

/** gRPC metadata keys of the Connect call (proto/README.md "Metadata"). */
export const AgentMetadata = {
  /** Required: the agent's human name (AgentRegistration.agent_id). */
  agentId: 'x-agent-id',
  /** Required: must equal the certificate's spiffe://<td>/agent/<instance_id>. */
  instanceId: 'x-agent-instance-id',
  /** Retired shared-secret header: a call carrying it is rejected. */
  retiredSecret: 'x-agent-secret',
} as const;

/** Largest message either peer accepts, in bytes (4 MiB, the gRPC default receive limit). */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Recommended upper bound of OutputChunk.data and StdinChunk.data, in bytes (64 KiB). */
export const RECOMMENDED_CHUNK_BYTES = 64 * 1024;
/** Heartbeat interval when RegistrationAck.heartbeat_interval_seconds is 0, in seconds. */
export const DEFAULT_HEARTBEAT_INTERVAL_SECONDS = 30;

function findProtoRoot(): string {
  const rel = join('svc', 'sandbox', 'v1', 'agent.proto');
  // Works from the source tree (proto/index.ts) and from any build folder one or more levels
  // below the repository root (dist/proto/index.js, .build-x/proto/index.js): tsc does not copy
  // .proto files, so walk up to the first folder holding proto/svc/sandbox/v1/agent.proto.
  // Importing this module never fails: when nothing is found, the path next to this file is
  // returned and a loader using it reports the missing file.
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, rel))) return candidate;
    if (dirname(dir) === dir) return here;
  }
}

/** Absolute path of the proto/ folder: the include directory for run-time loaders. */
export const PROTO_INCLUDE_DIR: string = findProtoRoot();
/** Absolute path of agent.proto. */
export const AGENT_PROTO_PATH: string = join(PROTO_INCLUDE_DIR, 'svc', 'sandbox', 'v1', 'agent.proto');
