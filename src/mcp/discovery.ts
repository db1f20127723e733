/**
 * GET /api/v2/admin/mcp/discovery (spec 4.10; its response is "not shown": this is our shape,
 * README "MCP"). It describes exactly what the MCP endpoint serves because it asks a server built
 * like the endpoint's: an SDK Client over an in-memory transport runs the handshake, tools/list and
 * resources/list once, and the document embeds those answers as they are, each tool with the
 * permission it needs. An integration test checks that it equals what a remote client lists.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, type Resource, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Authority } from '../auth/operator-identity.js';
import type { Permission } from '../auth/permissions.js';
import { buildMcpServer, kMcpServerName, kMcpServerVersion, kPermissionMetaKey, type McpServerDeps } from './server.js';
import { kMaxListLimit, kRunCommandMaxTimeoutSeconds, kRunCommandOutputBytes, kTaskLogPage, kCreateVmMaxWaitSeconds } from './tools.js';

/** Where the endpoint is served. */
export const MCP_PATH = '/api/v2/admin/mcp';
export const MCP_DISCOVERY_PATH = '/api/v2/admin/mcp/discovery';
/** The permission every request to the endpoint needs (each tool may need more). */
export const MCP_CONNECT_PERMISSION: Permission = 'admin.read';
export const MCP_DISCOVERY_SCHEMA_VERSION = 'sandboxd.mcp-discovery/v1';

export interface McpDiscovery {
  readonly schema_version: typeof MCP_DISCOVERY_SCHEMA_VERSION;
  /** True when the admin listener runs (the endpoint is served only there). */
  readonly available: boolean;
  /** Why not, when not available. */
  readonly reason?: string;
  readonly transport: 'streamable-http';
  /** `stateless`: no Mcp-Session-Id; every POST is answered on its own (GET and DELETE: 405). */
  readonly session_mode: 'stateless';
  readonly endpoint: {
    readonly path: string;
    readonly methods: readonly string[];
    readonly listener: 'admin';
    /** https://<SVC_ADMIN_ADDR>/api/v2/admin/mcp, null when the admin listener is off. */
    readonly url: string | null;
  };
  readonly protocol_versions: readonly string[];
  readonly latest_protocol_version: string;
  readonly server_info: { readonly name: string; readonly version: string };
  readonly capabilities: { readonly tools: true; readonly resources: true; readonly progress_notifications: true };
  readonly authentication: {
    readonly scheme: 'mtls';
    readonly client_certificate: string;
    readonly trust_domain: string;
    readonly connect_permission: Permission;
    readonly plaintext_listener: string;
  };
  /** The tools as tools/list answers them, each with the permission a call needs. */
  readonly tools: readonly (Tool & { readonly required_permission: Permission })[];
  /** The resources as resources/list answers them, each with the permission a read needs. */
  readonly resources: readonly (Resource & { readonly required_permission: Permission })[];
  readonly limits: Readonly<Record<string, number>>;
}

/** An authority with no permissions: listing needs none, and nothing else is called. */
const LISTING_CALLER: Authority = {
  schema_version: 'management.access-authority/v1',
  mode: 'local',
  actor: 'discovery',
  role: null,
  permissions: [],
  ssh_identity: false,
  fail_closed: false,
};

/** What a server built from `deps` lists, asked through the SDK's own client. */
export async function listServed(deps: McpServerDeps): Promise<{ tools: Tool[]; resources: Resource[] }> {
  const server = buildMcpServer(deps, LISTING_CALLER);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'sandboxd-discovery', version: kMcpServerVersion });
  try {
    await server.connect(serverSide);
    await client.connect(clientSide);
    const [tools, resources] = await Promise.all([client.listTools(), client.listResources()]);
    return { tools: tools.tools, resources: resources.resources };
  } finally {
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
}

export interface DiscoveryOptions {
  readonly trustDomain: string;
  /** The admin listener's address, null when SVC_ADMIN_ADDR is off. */
  readonly adminAddress: { readonly host: string; readonly port: number } | null;
}

/** The discovery document. */
export async function buildDiscovery(deps: McpServerDeps, o: DiscoveryOptions): Promise<McpDiscovery> {
  const served = await listServed(deps);
  const permissionOf = (t: Tool): Permission => {
    const p = t._meta?.[kPermissionMetaKey];
    if (typeof p !== 'string') throw new Error(`tool ${t.name} has no ${kPermissionMetaKey}`);
    return p as Permission;
  };
  const a = o.adminAddress;
  const host = a === null ? null : a.host.includes(':') ? `[${a.host}]` : a.host;
  return {
    schema_version: MCP_DISCOVERY_SCHEMA_VERSION,
    available: a !== null,
    ...(a === null && { reason: 'the admin listener is off (SVC_ADMIN_ADDR=off); the MCP endpoint is served only there' }),
    transport: 'streamable-http',
    session_mode: 'stateless',
    endpoint: { path: MCP_PATH, methods: ['POST'], listener: 'admin', url: a === null ? null : `https://${host}:${a.port}${MCP_PATH}` },
    protocol_versions: [...SUPPORTED_PROTOCOL_VERSIONS],
    latest_protocol_version: LATEST_PROTOCOL_VERSION,
    server_info: { name: kMcpServerName, version: kMcpServerVersion },
    capabilities: { tools: true, resources: true, progress_notifications: true },
    authentication: {
      scheme: 'mtls',
      client_certificate: `an operator certificate from sandboxd's CA (SPIFFE ID spiffe://${o.trustDomain}/operator/<name>; sandboxd certs issue-operator)`,
      trust_domain: o.trustDomain,
      connect_permission: MCP_CONNECT_PERMISSION,
      plaintext_listener: 'refused: 403 identity.operator_required',
    },
    tools: served.tools.map((t) => ({ ...t, required_permission: permissionOf(t) })),
    resources: served.resources.map((r) => ({ ...r, required_permission: MCP_CONNECT_PERMISSION })),
    limits: {
      list_max_items: kMaxListLimit,
      run_command_output_bytes_default: kRunCommandOutputBytes.default,
      run_command_output_bytes_max: kRunCommandOutputBytes.max,
      run_command_timeout_seconds_max: kRunCommandMaxTimeoutSeconds,
      create_vm_wait_seconds_max: kCreateVmMaxWaitSeconds,
      task_log_page_records_max: kTaskLogPage.maxRecords,
      task_log_page_bytes_max: kTaskLogPage.maxBytes,
      request_body_bytes_max: kMcpMaxBodyBytes,
    },
  };
}

/** Largest POST body the endpoint reads (bytes): MCP messages are small; one MiB is the listeners' default. */
export const kMcpMaxBodyBytes = 1024 * 1024;
