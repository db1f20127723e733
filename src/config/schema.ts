/**
 * The one configuration schema: every environment variable sandboxd reads, with its default,
 * unit and meaning. `sandboxd serve --help` and the README table are generated from this list
 * (test/unit/docs/readme-tables.test.ts fails when the README drifts).
 */
import {
  parseBytes,
  parseActivityId,
  parseActivityStore,
  parseEnum,
  parseFlag,
  parseHypervisorUris,
  parseIntInRange,
  parseIpRanges,
  parseList,
  parseListenAddress,
  parseListenAddressOrOff,
  parseJsonArgv,
  parseNonEmpty,
  parsePairs,
  parseUrl,
  ConfigValueError,
} from './parsers.js';
import { PROVIDER_CAPABILITIES, type ProviderCapability } from '../wire/celld.js';

/** What a default may depend on; the loader fills it from the process. */
export interface DefaultsContext {
  readonly cpuCount: number;
  readonly stdoutIsTty: boolean;
  readonly homeDir: string;
  readonly xdgStateHome: string | undefined;
}

interface Entry<F extends string, T> {
  /** Property name in the frozen Config object. */
  readonly field: F;
  readonly group: 'spec' | 'listeners' | 'runtime' | 'logging' | 'gateway-ssh' | 'activity' | 'agents';
  /** Shown in --help and the README; `null` = unset by default. */
  readonly defaultText: string;
  /** Raw default fed to `parse`, or null when unset means "off"/"derived". */
  readonly defaultRaw: ((ctx: DefaultsContext) => string) | string | null;
  readonly parse: (raw: string) => T;
  readonly doc: string;
  /** Never echo the value (paths to keys are fine; values of secrets are not). */
  readonly secret?: boolean;
}

type RawDefault = ((ctx: DefaultsContext) => string) | string | null;

/** Keeps the literal type of defaultRaw so Config can tell which fields may be null. */
function entry<F extends string, T, D extends RawDefault>(
  e: Omit<Entry<F, T>, 'defaultRaw'> & { readonly defaultRaw: D },
): Entry<F, T> & { readonly defaultRaw: D } {
  return e;
}

/** The operator roles (src/auth/permissions.ts ROLES; a unit test keeps the two equal). */
export const OPERATOR_ROLES = ['viewer', 'operator', 'admin'] as const;

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** SVC_MISSION_COMMAND's default: prints the mission id and the objective (both from the environment, never interpolated). */
const DEFAULT_MISSION_COMMAND = JSON.stringify(['sh', '-c', 'printf \'mission %s\\n%s\\n\' "$SVC_MISSION_ID" "$SVC_MISSION_OBJECTIVE"']);

export const SCHEMA = {
  // ---- spec part 1
  LOG_FORMAT: entry({
    field: 'logFormat',
    group: 'logging',
    defaultText: 'pretty on a terminal, json otherwise',
    defaultRaw: (ctx) => (ctx.stdoutIsTty ? 'pretty' : 'json'),
    parse: parseEnum(['pretty', 'json', 'compact'] as const),
    doc: 'Log line format: pretty (human, colour on a terminal), json (one object per line) or compact (one short line).',
  }),
  LOG_LEVEL: entry({
    field: 'logLevel',
    group: 'logging',
    defaultText: 'info',
    defaultRaw: 'info',
    parse: parseEnum(LOG_LEVELS),
    doc: 'Minimum level logged: trace, debug, info, warn, error, fatal or silent.',
  }),
  LOG_FILE: entry({
    field: 'logFile',
    group: 'logging',
    defaultText: 'unset (log to stdout)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Write logs to this file instead of stdout (directories are created).',
  }),
  LOG_FILE_ROTATION: entry({
    field: 'logFileRotation',
    group: 'logging',
    defaultText: 'none',
    defaultRaw: 'none',
    parse: parseEnum(['daily', 'none'] as const),
    doc: 'daily rotates LOG_FILE every day (files LOG_FILE.YYYY-MM-DD.N); none keeps one file.',
  }),
  LOG_FILE_RETENTION_DAYS: entry({
    field: 'logFileRetentionDays',
    group: 'logging',
    defaultText: '7',
    defaultRaw: '7',
    parse: parseIntInRange(1, 3650),
    doc: 'With daily rotation, how many days of rotated files are kept (days).',
  }),
  SECRETS_DIR: entry({
    field: 'secretsDir',
    group: 'spec',
    defaultText: '$SVC_STATE_DIR/secrets',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Directory of the CA, server and SSH keys (created 0700; private keys 0600).',
  }),
  ORCH_SERVE_ENDPOINT: entry({
    field: 'orchServeEndpoint',
    group: 'spec',
    defaultText: 'unset (standalone)',
    defaultRaw: null,
    parse: parseUrl(['ws:', 'wss:']),
    doc: 'When set, register with this orchestration server and stream events to it over a WebSocket (fire-and-forget).',
  }),
  SVC_ENABLE_DIRECT_RUNTIME_SSH: entry({
    field: 'enableDirectRuntimeSsh',
    group: 'spec',
    defaultText: '0',
    defaultRaw: '0',
    parse: parseFlag,
    doc: '1 lets managed-profile (svc-dev) provisioning install direct runtime SSH keys (ssh_key of VM create).',
  }),
  SVC_ENABLE_DIRECT_SSH_ORCH_PROXY: entry({
    field: 'enableDirectSshOrchProxy',
    group: 'spec',
    defaultText: '0',
    defaultRaw: '0',
    parse: parseFlag,
    doc: '1 enables the legacy manifest and exec proxy routes (403 otherwise).',
  }),
  SVC_GATEWAY_SSH_LISTEN: entry({
    field: 'gatewaySshListen',
    group: 'gateway-ssh',
    defaultText: 'unset (connector off)',
    defaultRaw: null,
    parse: parseListenAddress,
    doc:
      'Address of the SSH connector listener (host:port); the connector is disabled when unset. Its prelude is plaintext: ' +
      'a non-loopback address needs SVC_ALLOW_INSECURE_REMOTE=1.',
  }),
  SVC_GATEWAY_SSH_TARGETS: entry({
    field: 'gatewaySshTargets',
    group: 'gateway-ssh',
    defaultText: 'empty',
    defaultRaw: '',
    parse: parsePairs,
    doc: "Comma-separated instance=host:port map of the SSH endpoints the connector dials; an instance not named here goes to its VM's known SSH address (a local VM's sshd, a debian-image qemu guest's address:22).",
  }),
  SVC_GATEWAY_SSH_ALLOWLIST: entry({
    field: 'gatewaySshAllowlist',
    group: 'gateway-ssh',
    defaultText: 'empty (deny all)',
    defaultRaw: '',
    parse: parsePairs,
    doc: 'Comma-separated actor=instance rules the connector checks; * may stand on either side; empty refuses every connection.',
  }),
  SVC_GATEWAY_SSH_CONNECT: entry({
    field: 'gatewaySshConnect',
    group: 'gateway-ssh',
    defaultText: '127.0.0.1:8124',
    defaultRaw: '127.0.0.1:8124',
    parse: parseListenAddress,
    doc: 'Client side (sbx ssh): the connector address its ProxyCommand dials.',
  }),
  SVC_GATEWAY_SSH_ACTOR: entry({
    field: 'gatewaySshActor',
    group: 'gateway-ssh',
    defaultText: 'unset',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Client side (sbx): actor name sent in the connector prelude and in SSH lease requests.',
  }),
  SVC_GATEWAY_SSH_CA_KEY: entry({
    field: 'gatewaySshCaKey',
    group: 'gateway-ssh',
    defaultText: 'unset (no signing)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Path to an SSH CA private key; enables certificate signing on lease issue.',
  }),
  SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH: entry({
    field: 'gatewaySshCaPublicKeyHostPath',
    group: 'gateway-ssh',
    defaultText: 'unset',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Path to the SSH CA public key; when set, each local (test-driver) VM gets an sshd on 127.0.0.1 that trusts only it, and each debian-image qemu VM created gets it by fw_cfg for its own sshd.',
  }),
  SVC_GATEWAY_SSH_AUTHORIZED_USER: entry({
    field: 'gatewaySshAuthorizedUser',
    group: 'gateway-ssh',
    defaultText: 'agent',
    defaultRaw: 'agent',
    parse: parseNonEmpty,
    doc: 'Guest user whose authorized-principals file lists the accepted principals; the only user a local sshd lets in.',
  }),
  SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: entry({
    field: 'gatewaySshAuthorizedPrincipals',
    group: 'gateway-ssh',
    defaultText: 'empty (the user)',
    defaultRaw: '',
    parse: parseList,
    doc: 'Certificate principals accepted for that user, comma or space separated; empty: the user name.',
  }),
  SVC_GATEWAY_SSH_LEASE_MAX_TTL_SECONDS: entry({
    field: 'gatewaySshLeaseMaxTtlSeconds',
    group: 'gateway-ssh',
    defaultText: '3600',
    defaultRaw: '3600',
    parse: parseIntInRange(60, 86_400),
    doc: 'Longest SSH lease (and certificate) a POST /api/v2/gateway/ssh/leases may ask for (seconds; the shortest is 1; longer is ssh_lease.ttl_out_of_range).',
  }),

  // ---- ours: the activity store (spec 4.12)
  SVC_ACTIVITY_STORE: entry({
    field: 'activityStore',
    group: 'activity',
    defaultText: 'sqlite',
    defaultRaw: 'sqlite',
    parse: parseActivityStore,
    secret: true,
    doc: 'Where activity events are kept: `sqlite` (a file under SVC_STATE_DIR/activity) or a `postgres://user:password@host:port/db` URL (schema created and migrated on start; the fleet inventory then lives in that database too, per SVC_HOST_ID). The value is never echoed: a URL may hold a password.',
  }),
  SVC_ACTIVITY_RETENTION_DAYS: entry({
    field: 'activityRetentionDays',
    group: 'activity',
    defaultText: '30',
    defaultRaw: '30',
    parse: parseIntInRange(1, 3650),
    doc: 'Activity events ingested longer ago than this are deleted, a bounded chunk at a time in the background (ingest is never held up by it).',
  }),
  SVC_TENANT_ID: entry({
    field: 'tenantId',
    group: 'activity',
    defaultText: 'default',
    defaultRaw: 'default',
    parse: parseActivityId,
    doc: "The tenant of the activity sandboxd itself records (commands, sessions, tool calls), and the dashboard's activity view.",
  }),
  SVC_HOST_ID: entry({
    field: 'hostId',
    group: 'activity',
    defaultText: 'the host name',
    defaultRaw: null,
    parse: parseActivityId,
    doc: 'The host id of the activity sandboxd itself records, and of its fleet inventory in a shared PostgreSQL (default: the host name).',
  }),

  // ---- ours: listeners
  SVC_HTTP_ADDR: entry({
    field: 'httpAddr',
    group: 'listeners',
    defaultText: '127.0.0.1:8122',
    defaultRaw: '127.0.0.1:8122',
    parse: parseListenAddress,
    doc: 'HTTP listener: REST API, SSE, dashboard, metrics, pty-ws.v1.',
  }),
  SVC_WS_ADDR: entry({
    field: 'wsAddr',
    group: 'listeners',
    defaultText: '127.0.0.1:8121',
    defaultRaw: '127.0.0.1:8121',
    parse: parseListenAddress,
    doc: 'WebSocket listener (plaintext, legacy; dashboard live output).',
  }),
  SVC_GRPC_ADDR: entry({
    field: 'grpcAddr',
    group: 'listeners',
    defaultText: '127.0.0.1:8120',
    defaultRaw: '127.0.0.1:8120',
    parse: parseListenAddress,
    doc: 'gRPC listener for agents (mTLS only).',
  }),
  SVC_ADMIN_ADDR: entry({
    field: 'adminAddr',
    group: 'listeners',
    defaultText: '127.0.0.1:8123',
    defaultRaw: '127.0.0.1:8123',
    parse: parseListenAddressOrOff,
    doc:
      'Admin listener: the same HTTP routes over HTTPS with mutual TLS (operator certificates; no WebSocket routes). ' +
      'Authenticated, so it may listen on a non-loopback address; off turns it off.',
  }),
  SVC_ALLOW_INSECURE_REMOTE: entry({
    field: 'allowInsecureRemote',
    group: 'listeners',
    defaultText: '0',
    defaultRaw: '0',
    parse: parseFlag,
    doc: 'Unsafe override: 1 allows a plaintext listener (HTTP, WS, the SSH connector) on a non-loopback address.',
  }),
  SVC_TRUSTED_PROXIES: entry({
    field: 'trustedProxies',
    group: 'listeners',
    defaultText: '127.0.0.0/8,::1 (loopback)',
    defaultRaw: '127.0.0.0/8,::1',
    parse: parseIpRanges,
    doc:
      'Peers (IPs or CIDRs, comma-separated; none for nobody) whose Forwarded / X-Forwarded-Proto / X-Forwarded-Host headers ' +
      'decide the scheme and host of the URLs in responses; from any other peer only Host counts.',
  }),
  SVC_MAX_BODY_BYTES: entry({
    field: 'maxBodyBytes',
    group: 'listeners',
    defaultText: '1MiB',
    defaultRaw: '1MiB',
    parse: parseBytes(1024, 64 * 1024 ** 2),
    doc: 'Largest JSON request body accepted (bytes; larger gets 413).',
  }),

  // ---- ours: runtime
  SVC_STATE_DIR: entry({
    field: 'stateDir',
    group: 'runtime',
    defaultText: '$XDG_STATE_HOME/sandboxd (~/.local/state/sandboxd)',
    defaultRaw: (ctx) => `${ctx.xdgStateHome ?? `${ctx.homeDir}/.local/state`}/sandboxd`,
    parse: parseNonEmpty,
    doc: 'Where durable files live (SQLite stores, session registry, VM working dirs).',
  }),
  SVC_HYPERVISOR_URI: entry({
    field: 'hypervisorUris',
    group: 'runtime',
    defaultText: 'test:///default',
    defaultRaw: 'test:///default',
    parse: parseHypervisorUris,
    doc: 'libvirt connection URI; several comma-separated URIs for several hosts (a VM lives on one).',
  }),
  SVC_HYPERVISOR_READ_BUDGET_MS: entry({
    field: 'hypervisorReadBudgetMs',
    group: 'runtime',
    defaultText: '2000',
    defaultRaw: '2000',
    parse: parseIntInRange(50, 600_000),
    doc: 'A libvirt read (list, get, health) slower than this fails and counts toward the circuit breaker (ms).',
  }),
  SVC_HYPERVISOR_WRITE_BUDGET_MS: entry({
    field: 'hypervisorWriteBudgetMs',
    group: 'runtime',
    defaultText: '30000',
    defaultRaw: '30000',
    parse: parseIntInRange(100, 3_600_000),
    doc: 'Budget of a libvirt write (define, start, stop, destroy, undefine) and of connecting (ms).',
  }),
  SVC_HYPERVISOR_FAILURE_THRESHOLD: entry({
    field: 'hypervisorFailureThreshold',
    group: 'runtime',
    defaultText: '3',
    defaultRaw: '3',
    parse: parseIntInRange(1, 100),
    doc: "Consecutive failures or timeouts that open a host's fail-fast circuit.",
  }),
  SVC_HYPERVISOR_COOLDOWN_MS: entry({
    field: 'hypervisorCooldownMs',
    group: 'runtime',
    defaultText: '30000',
    defaultRaw: '30000',
    parse: parseIntInRange(100, 3_600_000),
    doc: 'How long an open circuit fails fast before one probe call is let through (ms; doubles while probes fail, up to 5 minutes).',
  }),
  SVC_HYPERVISOR_POLL_INTERVAL_MS: entry({
    field: 'hypervisorPollIntervalMs',
    group: 'runtime',
    defaultText: '1000',
    defaultRaw: '1000',
    parse: parseIntInRange(100, 600_000),
    doc: 'Interval of the state poller that turns changes made outside sandboxd into vm.* events (ms).',
  }),
  SVC_HYPERVISOR_VIRSH_EVENTS: entry({
    field: 'hypervisorVirshEvents',
    group: 'runtime',
    defaultText: 'auto',
    defaultRaw: 'auto',
    parse: parseEnum(['auto', 'off'] as const),
    doc: 'auto also listens to `virsh event --loop` on daemon URIs for immediate, exact events; off uses polling only.',
  }),
  SVC_HYPERVISOR_DOMAIN_TYPE: entry({
    field: 'hypervisorDomainType',
    group: 'runtime',
    defaultText: 'auto',
    defaultRaw: 'auto',
    parse: parseEnum(['auto', 'qemu', 'kvm'] as const),
    doc: 'qemu domains: kvm, qemu (TCG), or auto (KVM when the host has usable hardware virtualisation, TCG otherwise).',
  }),
  SVC_VM_AGENT_CONNECT_TIMEOUT_SECONDS: entry({
    field: 'vmAgentConnectTimeoutSeconds',
    group: 'runtime',
    defaultText: '60',
    defaultRaw: '60',
    parse: parseIntInRange(1, 3600),
    doc: "VM create fails with PROVISIONING_ERROR when the VM's agent has not connected within this (seconds; raise it under TCG).",
  }),
  SVC_OPERATION_RETENTION_SECONDS: entry({
    field: 'operationRetentionSeconds',
    group: 'runtime',
    defaultText: '3600',
    defaultRaw: '3600',
    parse: parseIntInRange(1, 30 * 86_400),
    doc: 'Finished operations stay readable at GET /api/v1/operations/{id} and /api/v2/admin/operations/{id} this long (seconds), across restarts.',
  }),
  SVC_CONTAINER_IMAGES_FILE: entry({
    field: 'containerImagesFile',
    group: 'runtime',
    defaultText: 'unset (the built-in catalog)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'JSON file replacing the curated catalog of GET /api/v1/container-images ({images: [{ref, label, description, default?}]}).',
  }),
  SVC_VM_BASE_IMAGE: entry({
    field: 'vmBaseImage',
    group: 'runtime',
    defaultText: 'unset',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'qemu hosts: the qcow2 base image each VM gets a copy-on-write overlay of.',
  }),
  SVC_VM_NETWORK: entry({
    field: 'vmNetwork',
    group: 'runtime',
    defaultText: 'default',
    defaultRaw: 'default',
    parse: parseNonEmpty,
    doc: 'qemu hosts: the libvirt network VMs are attached to.',
  }),
  SVC_VM_AGENT_SERVER_ADDR: entry({
    field: 'vmAgentServerAddr',
    group: 'runtime',
    defaultText: 'the gRPC address (192.168.122.1:<port> when it is loopback)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'qemu hosts: the host:port agents inside VMs dial to reach the gRPC listener.',
  }),
  SVC_STORAGE_DIR: entry({
    field: 'storageDir',
    group: 'runtime',
    defaultText: '$SVC_STATE_DIR/storage',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'Root of the storage areas: global/ (read-only), inbox/<agent_id>/, outbox/<task_id>/.',
  }),
  SVC_CREDENTIAL_AUDIT: entry({
    field: 'credentialAudit',
    group: 'runtime',
    defaultText: 'on',
    defaultRaw: 'on',
    parse: parseEnum(['on', 'off'] as const),
    doc: 'on: lease grants, revokes, expiries and every credential proxy call are written to credentials/credential-audit.db in SVC_STATE_DIR; off: nothing is written and GET /api/v2/credentials/audit answers available false.',
  }),
  SVC_CREDENTIAL_PROXY_TIMEOUT_MS: entry({
    field: 'credentialProxyTimeoutMs',
    group: 'runtime',
    defaultText: '20000',
    defaultRaw: '20000',
    parse: parseIntInRange(100, 600_000),
    doc: 'A credential proxy call (connect, response headers and body together) fails with credential_proxy.upstream_timeout after this many milliseconds.',
  }),
  SVC_CREDENTIAL_PROXY_MAX_RESPONSE_BYTES: entry({
    field: 'credentialProxyMaxResponseBytes',
    group: 'runtime',
    defaultText: '1MiB',
    defaultRaw: '1MiB',
    parse: parseBytes(1024, 64 * 1024 ** 2),
    doc: 'Largest upstream response body the credential proxy returns (bytes; larger fails with credential_proxy.response_too_large).',
  }),
  SVC_STORAGE_MAX_DOWNLOAD_BYTES: entry({
    field: 'storageMaxDownloadBytes',
    group: 'runtime',
    defaultText: '64GiB',
    defaultRaw: '64GiB',
    parse: parseBytes(1024, 1024 ** 5),
    doc: 'Largest file a storage download serves (bytes; larger files are 413 storage.download_too_large). Downloads stream, so this bounds transfer time, not server memory.',
  }),
  SVC_INBOX_QUOTA_BYTES: entry({
    field: 'inboxQuotaBytes',
    group: 'runtime',
    defaultText: '50GB',
    defaultRaw: '50GB',
    parse: parseBytes(1024, 1024 ** 5),
    doc: "Quota of each agent's inbox (bytes); svc_agentshare_inbox_bytes reports the total in use.",
  }),
  SVC_TASK_AGENT_COMMAND: entry({
    field: 'taskAgentCommand',
    group: 'runtime',
    defaultText: '["claude","-p","{prompt}","--output-format","stream-json","--model","{model}"]',
    defaultRaw: null,
    parse: parseJsonArgv,
    doc: "Coding-agent argv template for tasks (JSON array; {prompt} and {model} are replaced; never run through a shell). A manifest's agent.command wins.",
  }),
  SVC_TASK_MAX_CONCURRENT: entry({
    field: 'taskMaxConcurrent',
    group: 'runtime',
    defaultText: '8',
    defaultRaw: '8',
    parse: parseIntInRange(1, 1000),
    doc: 'Tasks that hold a VM at once; later ones wait in pending (first come, first served).',
  }),
  SVC_REPLAY_RING_BYTES: entry({
    field: 'replayRingBytes',
    group: 'runtime',
    defaultText: '8MiB',
    defaultRaw: '8MiB',
    parse: parseBytes(64 * 1024, 1024 ** 3),
    doc: 'Replayable output kept per command (encoded frames, oldest chunks evicted first and reported as gaps; bytes).',
  }),
  SVC_REPLAY_BUDGET_BYTES: entry({
    field: 'replayBudgetBytes',
    group: 'runtime',
    defaultText: '256MiB',
    defaultRaw: '256MiB',
    parse: parseBytes(1024 * 1024, 64 * 1024 ** 3),
    doc: 'All replay rings of one actor shard together (bytes); the largest rings are trimmed first.',
  }),
  SVC_REPLAY_RETENTION_SECONDS: entry({
    field: 'replayRetentionSeconds',
    group: 'runtime',
    defaultText: '300',
    defaultRaw: '300',
    parse: parseIntInRange(1, 7 * 86_400),
    doc: "A finished command's output stays replayable this long (seconds).",
  }),
  SVC_SSE_SUBSCRIBER_QUEUE_BYTES: entry({
    field: 'sseSubscriberQueueBytes',
    group: 'listeners',
    defaultText: '1MiB',
    defaultRaw: '1MiB',
    parse: parseBytes(64 * 1024, 1024 ** 3),
    doc: 'Bytes an SSE subscriber may fall behind before it gets agent_output.error (slow_subscriber) and is closed.',
  }),
  SVC_ACTORS: entry({
    field: 'actorsMode',
    group: 'runtime',
    defaultText: 'workers',
    defaultRaw: 'workers',
    parse: parseEnum(['workers', 'inline'] as const),
    doc: 'workers runs actors in worker-thread shards; inline runs the same actors on the main thread (baseline, debugging).',
  }),
  SVC_ACTOR_SHARDS: entry({
    field: 'actorShards',
    group: 'runtime',
    defaultText: 'CPU cores - 1, at least 1',
    defaultRaw: (ctx) => String(Math.max(1, ctx.cpuCount - 1)),
    parse: parseIntInRange(1, 256),
    doc: 'Number of worker shards hosting actors.',
  }),
  SVC_ACTOR_RING_BYTES: entry({
    field: 'actorRingBytes',
    group: 'runtime',
    defaultText: '8MiB',
    defaultRaw: '8MiB',
    parse: parseBytes(64 * 1024, 1024 ** 3),
    doc: 'Size of each shard ring (inbound and outbound; a power of two, bytes).',
  }),
  SVC_ACTOR_RING: entry({
    field: 'actorRing',
    group: 'runtime',
    defaultText: 'sab',
    defaultRaw: 'sab',
    parse: parseEnum(['sab', 'port'] as const),
    doc: 'Rings between the main thread and the worker shards: sab (SharedArrayBuffer, zero-copy) or port (MessagePort, the fallback: one transferred buffer per frame).',
  }),
  SVC_SHUTDOWN_DEADLINE_MS: entry({
    field: 'shutdownDeadlineMs',
    group: 'runtime',
    defaultText: '10000',
    defaultRaw: '10000',
    parse: parseIntInRange(100, 600_000),
    doc: 'On SIGTERM/SIGINT, exit within this many milliseconds (a second signal exits at once).',
  }),

  // ---- ours: agents
  SVC_TRUST_DOMAIN: entry({
    field: 'trustDomain',
    group: 'agents',
    defaultText: 'sandbox.local',
    defaultRaw: 'sandbox.local',
    parse: (raw: string) => {
      const v = parseNonEmpty(raw).toLowerCase();
      if (!/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/.test(v)) throw new Error(`"${raw}" is not a valid SPIFFE trust domain`);
      return v;
    },
    doc: 'SPIFFE trust domain of agent and operator identities (spiffe://<domain>/agent/<instance_id>).',
  }),
  SVC_OPERATOR_ROLES: entry({
    field: 'operatorRolesFile',
    group: 'agents',
    defaultText: 'unset (every operator is a viewer)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc:
      'JSON file mapping operator names to roles ({"alice":"admin","ci-bot":"operator"}); names not in it are viewer. ' +
      'Checked at start (invalid: start-up error) and re-read when it changes (invalid then: mTLS callers fail closed).',
  }),
  SVC_LOCAL_ROLE: entry({
    field: 'localRole',
    group: 'agents',
    defaultText: 'admin',
    defaultRaw: 'admin',
    parse: parseEnum(OPERATOR_ROLES),
    doc: 'Role of callers on the plaintext loopback listener (the trusted local listener, actor local): viewer, operator or admin.',
  }),
  SVC_AGENT_HEARTBEAT_SECONDS: entry({
    field: 'agentHeartbeatSeconds',
    group: 'agents',
    defaultText: '30',
    defaultRaw: '30',
    parse: parseIntInRange(1, 3600),
    doc: 'Heartbeat interval sent to agents in RegistrationAck (seconds).',
  }),
  SVC_AGENT_STALE_AFTER_SECONDS: entry({
    field: 'agentStaleAfterSeconds',
    group: 'agents',
    defaultText: '3 heartbeat intervals',
    defaultRaw: null,
    parse: parseIntInRange(1, 86_400),
    doc: 'An agent whose last heartbeat is older than this is Stale (seconds).',
  }),
  SVC_AGENT_RETENTION_SECONDS: entry({
    field: 'agentRetentionSeconds',
    group: 'agents',
    defaultText: '600',
    defaultRaw: '600',
    parse: parseIntInRange(0, 7 * 86_400),
    doc: 'A Disconnected agent stays listed this long, then is removed (seconds).',
  }),
  SVC_BOOTSTRAP_ENROLLMENT: entry({
    field: 'bootstrapEnrollment',
    group: 'agents',
    defaultText: 'on',
    defaultRaw: 'on',
    parse: parseEnum(['on', 'off'] as const),
    doc: 'Secure bootstrap enrollment (single-use tokens exchanged for an agent certificate); off refuses staging and consume (readiness: disabled).',
  }),
  SVC_BOOTSTRAP_TOKEN_TTL_SECONDS: entry({
    field: 'bootstrapTokenTtlSeconds',
    group: 'agents',
    defaultText: '900',
    defaultRaw: '900',
    parse: parseIntInRange(30, 86_400),
    doc: 'Lifetime of a staged single-use bootstrap token (seconds); an unconsumed token is refused after it.',
  }),
  SVC_BOOTSTRAP_CONSUME_URL: entry({
    field: 'bootstrapConsumeUrl',
    group: 'agents',
    defaultText: 'the HTTP listener (http://<SVC_HTTP_ADDR>/api/v1/bootstrap-enrollment/consume)',
    defaultRaw: null,
    parse: parseUrl(['http:', 'https:']),
    doc: 'The consume URL written into bootstrap material, as the agent reaches it (e.g. through a tunnel); https is verified with the material CA. qemu VMs are checkpointed only with it set (their restored guests enroll through it).',
  }),
  SVC_EXEC_DEFAULT_TIMEOUT_SECONDS: entry({
    field: 'execDefaultTimeoutSeconds',
    group: 'agents',
    defaultText: '300',
    defaultRaw: '300',
    parse: parseIntInRange(1, 86_400),
    doc: 'Timeout of an Exec call that asks for none (timeout_seconds 0).',
  }),
  // ---- Celld and provider capabilities (README "Celld")
  SVC_CELLD_ENABLED: entry({
    field: 'celldEnabled',
    group: 'runtime',
    defaultText: '0',
    defaultRaw: '0',
    parse: parseFlag,
    doc: 'Celld: 1 turns on cell commands and reconcile through /api/v2/celld (they also need SVC_CELLD_CELL_ID); off, they answer 503 celld.disabled and only status and validate run.',
  }),
  SVC_CELLD_CELL_ID: entry({
    field: 'celldCellId',
    group: 'runtime',
    defaultText: 'unset (Celld not configured)',
    defaultRaw: null,
    parse: parseCellId,
    doc: "This server's cell id ([a-z][a-z0-9-]{0,62}): its hypervisor hosts form that one cell; commands name it.",
  }),
  SVC_CELLD_BACKEND: entry({
    field: 'celldBackend',
    group: 'runtime',
    defaultText: 'libvirt',
    defaultRaw: 'libvirt',
    parse: parseEnum(['libvirt'] as const),
    doc: "Celld's cell backend: libvirt (this server's SVC_HYPERVISOR_URI hosts as one cell; the only backend in this version).",
  }),
  SVC_HYPERVISOR_WITHHELD_CAPABILITIES: entry({
    field: 'withheldCapabilities',
    group: 'runtime',
    defaultText: 'none',
    defaultRaw: '',
    parse: parseCapabilities,
    doc: 'Provider capabilities to withhold on every host (comma list of snapshot, checkpoint, fork, warm_pool): their routes refuse with provider.capability_unavailable and the dashboard hides them. Nothing a provider lacks can be added.',
  }),
  SVC_FLEET_SWEEP_INTERVAL_SECONDS: entry({
    field: 'fleetSweepIntervalSeconds',
    group: 'runtime',
    defaultText: '30',
    defaultRaw: '30',
    parse: parseIntInRange(0, 86_400),
    doc: "Interval of the fleet inventory sweep that lists every domain on every host, catching changes no event reported (a VM removed or defined behind sandboxd's back); 0 turns it off (events, reads and reconciles still observe).",
  }),
  // managed desktop sessions (spec 4.15; README "Managed desktop sessions")
  SVC_DESKTOP_ADDR: entry({
    field: 'desktopAddr',
    group: 'listeners',
    defaultText: 'unset (desktop listener off)',
    defaultRaw: null,
    parse: parseListenAddressOrOff,
    doc:
      'Desktop listener (spec 4.15): HTTPS with mutual TLS serving only the managed desktop routes, each needing exactly one ' +
      'Authorization: Bearer <delegation token>. Authenticated, so it may listen on a non-loopback address; needs SVC_DESKTOP_TOKEN_ISSUER_KEY.',
  }),
  SVC_DESKTOP_CLIENT_CA: entry({
    field: 'desktopClientCa',
    group: 'listeners',
    defaultText: "unset (sandboxd's own CA, operator certificates only)",
    defaultRaw: null,
    parse: parseNonEmpty,
    doc:
      'PEM file of the CA(s) the desktop listener verifies client certificates against; any certificate it verifies is accepted. ' +
      "Unset: sandboxd's own CA, and only operator certificates (sandboxd certs issue-operator).",
  }),
  SVC_DESKTOP_TOKEN_ISSUER_KEY: entry({
    field: 'desktopTokenIssuerKey',
    group: 'listeners',
    defaultText: 'unset',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'PEM file of the public key (Ed25519 or P-256) that signs desktop delegation tokens (JWS: EdDSA or ES256), read at start.',
  }),
  SVC_DESKTOP_TOKEN_AUDIENCE: entry({
    field: 'desktopTokenAudience',
    group: 'listeners',
    defaultText: 'sandboxd-desktop',
    defaultRaw: 'sandboxd-desktop',
    parse: parseNonEmpty,
    doc: 'The aud claim every desktop delegation token must carry.',
  }),
  SVC_DESKTOP_TOKEN_ISSUER: entry({
    field: 'desktopTokenIssuer',
    group: 'listeners',
    defaultText: 'unset (iss not checked)',
    defaultRaw: null,
    parse: parseNonEmpty,
    doc: 'When set, the iss claim every desktop delegation token must carry.',
  }),
  SVC_DESKTOP_GRANT_TTL_SECONDS: entry({
    field: 'desktopGrantTtlSeconds',
    group: 'listeners',
    defaultText: '60',
    defaultRaw: '60',
    parse: parseIntInRange(5, 600),
    doc: "Lifetime of a one-use desktop grant (attach, reconnect), never past its resource's absolute expiry.",
  }),
  // ---- missions and dispatch (README "Missions and dispatch")
  SVC_MISSION_COMMAND: entry({
    field: 'missionCommand',
    group: 'runtime',
    defaultText: DEFAULT_MISSION_COMMAND,
    defaultRaw: DEFAULT_MISSION_COMMAND,
    parse: parseJsonArgv,
    doc: 'Argv (JSON array) a dispatched mission runs on its agent when its executor was registered without a command; never through a shell of ours. The mission reaches it in the environment: SVC_MISSION_ID, SVC_MISSION_OBJECTIVE, SVC_MISSION_COMPLETION, SVC_MISSION_SESSION_ID, SVC_MISSION_METADATA (JSON), SVC_EXECUTOR_ID. The default prints the mission id and its objective.',
  }),
  SVC_MISSION_TIMEOUT_SECONDS: entry({
    field: 'missionTimeoutSeconds',
    group: 'runtime',
    defaultText: '3600',
    defaultRaw: '3600',
    parse: parseIntInRange(1, 604_800),
    doc: 'timeout_seconds of a mission dispatched with long_running false (SIGTERM, then SIGKILL, to its process group on the agent); long_running missions have none.',
  }),
  SVC_MISSION_START_WINDOW_MS: entry({
    field: 'missionStartWindowMs',
    group: 'runtime',
    defaultText: '2000',
    defaultRaw: '2000',
    parse: parseIntInRange(100, 60_000),
    doc: "How long a dispatch waits for its command's first sign of life on the agent (output, or a result) before answering 202; a command that cannot start within it answers 500 dispatch.failed with mission.failed.",
  }),
  // ---- orchestration link (README "Orchestration link and aiwg bridge"; used when ORCH_SERVE_ENDPOINT is set)
  SVC_ORCH_QUEUE_MAX_EVENTS: entry({
    field: 'orchQueueMaxEvents',
    group: 'runtime',
    defaultText: '10000',
    defaultRaw: '10000',
    parse: parseIntInRange(1, 1_000_000),
    doc: 'Events the orchestration link holds while the server is unreachable or slow; when full the oldest is dropped and the server gets a gap record with the count.',
  }),
  SVC_ORCH_QUEUE_MAX_BYTES: entry({
    field: 'orchQueueMaxBytes',
    group: 'runtime',
    defaultText: '16MiB',
    defaultRaw: '16MiB',
    parse: parseBytes(1024, 1024 ** 3),
    doc: 'Bytes of encoded events the orchestration link holds (the same drop-oldest rule as SVC_ORCH_QUEUE_MAX_EVENTS).',
  }),
  SVC_ORCH_BACKOFF_INITIAL_MS: entry({
    field: 'orchBackoffInitialMs',
    group: 'runtime',
    defaultText: '500',
    defaultRaw: '500',
    parse: parseIntInRange(1, 600_000),
    doc: 'Ceiling of the first reconnect delay of the orchestration link, ms; each failed attempt doubles it (full jitter: the delay is uniform below the ceiling).',
  }),
  SVC_ORCH_BACKOFF_MAX_MS: entry({
    field: 'orchBackoffMaxMs',
    group: 'runtime',
    defaultText: '30000',
    defaultRaw: '30000',
    parse: parseIntInRange(1, 3_600_000),
    doc: 'Ceiling of every reconnect delay of the orchestration link, ms.',
  }),
  SVC_ORCH_LOG_INTERVAL_SECONDS: entry({
    field: 'orchLogIntervalSeconds',
    group: 'runtime',
    defaultText: '60',
    defaultRaw: '60',
    parse: parseIntInRange(0, 86_400),
    doc: 'At most one log line per this many seconds about the orchestration link (an unreachable endpoint counts in svc_orch_link_* metrics, not in log lines); 0 logs every change.',
  }),
  // ---- A2A (README "A2A")
  SVC_A2A_COMMAND_TIMEOUT_SECONDS: entry({
    field: 'a2aCommandTimeoutSeconds',
    group: 'agents',
    defaultText: '300',
    defaultRaw: '300',
    parse: parseIntInRange(1, 86_400),
    doc: "Deadline of the command an A2A message runs on the instance's agent (the agent kills its process group then; the task fails).",
  }),
  SVC_A2A_MAX_TASKS: entry({
    field: 'a2aMaxTasks',
    group: 'agents',
    defaultText: '1000',
    defaultRaw: '1000',
    parse: parseIntInRange(1, 1_000_000),
    doc: 'A2A tasks the executor task store keeps (in memory); a new one evicts the oldest ended task, and is refused (503 a2a.store_full) when all still run.',
  }),
  SVC_A2A_TASK_OUTPUT_BYTES: entry({
    field: 'a2aTaskOutputBytes',
    group: 'agents',
    defaultText: '1MiB',
    defaultRaw: '1MiB',
    parse: parseBytes(1024, 1024 ** 3),
    doc: "Output kept per A2A task; past it the task's output is cut and one output_truncated artifact says so.",
  }),
  SVC_A2A_STORE_OUTPUT_BYTES: entry({
    field: 'a2aStoreOutputBytes',
    group: 'agents',
    defaultText: '64MiB',
    defaultRaw: '64MiB',
    parse: parseBytes(1024 ** 2, 16 * 1024 ** 3),
    doc: 'Output kept over all A2A tasks; the oldest ended tasks are evicted to make room, then new output is cut.',
  }),
} as const;

function parseCellId(raw: string): string {
  const v = raw.trim();
  if (!/^[a-z][a-z0-9-]{0,62}$/.test(v)) throw new ConfigValueError(`"${raw}" is not a cell id ([a-z][a-z0-9-]{0,62})`);
  return v;
}

function parseCapabilities(raw: string): readonly ProviderCapability[] {
  const out: ProviderCapability[] = [];
  for (const item of parseList(raw)) {
    const hit = PROVIDER_CAPABILITIES.find((c) => c === item.toLowerCase());
    if (hit === undefined) throw new ConfigValueError(`"${item}" is not one of ${PROVIDER_CAPABILITIES.join(', ')}`);
    if (!out.includes(hit)) out.push(hit);
  }
  return Object.freeze(out);
}

export type SchemaKey = keyof typeof SCHEMA;
type FieldOf<K extends SchemaKey> = (typeof SCHEMA)[K]['field'];
type ValueOf<K extends SchemaKey> = ReturnType<(typeof SCHEMA)[K]['parse']>;
type Nullable<K extends SchemaKey> = (typeof SCHEMA)[K]['defaultRaw'] extends null ? null : never;

/** The validated, deep-frozen configuration every component receives (derived defaults resolved by the loader). */
export type Config = {
  readonly [K in SchemaKey as FieldOf<K>]:
    ValueOf<K> | (K extends 'SECRETS_DIR' | 'SVC_AGENT_STALE_AFTER_SECONDS' | 'SVC_STORAGE_DIR' ? never : Nullable<K>);
};
