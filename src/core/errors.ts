/**
 * The one error table: every error sandboxd returns has a stable code, an HTTP status and a gRPC
 * status, declared here and nowhere else. The README's error table is generated from it
 * (`npm run docs`) and test/unit/docs/readme-tables.test.ts fails when the two disagree.
 *
 * Errors cross threads and processes as the plain object {code, message, details}
 * (see toWire/fromWire); the HTTP layer renders them as the spec's v1 envelope
 * {"error": {"code", "message"}}.
 */

/** gRPC status codes we use (numeric values from the gRPC spec; no grpc-js import here). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

interface ErrorSpec {
  readonly http: number;
  readonly grpc: GrpcStatusCode;
  /** One line for the README table. */
  readonly meaning: string;
}

/**
 * code → statuses. Codes named by the spec keep its spelling (VM_NOT_FOUND, idempotency.key_conflict);
 * codes we added use lower-case dotted names by area (request.*, route.*, server.*).
 */
export const ERROR_TABLE = {
  // request validation (ours; the spec only says "400 invalid input")
  'request.invalid': { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'a field or query parameter is missing or invalid' },
  'request.malformed_json': { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'the body is not valid JSON' },
  'request.unsupported_media_type': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'a body was sent without Content-Type: application/json',
  },
  'request.body_too_large': { http: 413, grpc: GrpcStatus.RESOURCE_EXHAUSTED, meaning: "the body exceeds the route's size limit" },
  'route.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no route has this path' },
  'route.method_not_allowed': {
    http: 405,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'the path exists but not with this method (Allow lists the methods)',
  },
  'route.forbidden': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'the route is disabled by configuration (legacy direct-SSH proxy routes)',
  },
  // operator identity (src/auth; the spec leaves the identity and the role names "not shown")
  'auth.permission_denied': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "the caller's role lacks the permission the route needs (the message names it)",
  },
  'auth.ssh_identity_required': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'SSH permissions need an operator certificate on the admin listener; the trusted local listener claims no SSH identity',
  },
  // credentials and the credential proxy (spec 4.14; statuses "not shown": ours)
  'credential.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no credential has this name' },
  'credential.already_exists': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'a credential with this name exists (delete it to replace it)',
  },
  'credential_lease.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no credential lease has this id' },
  'credential_proxy.lease_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'proxy call with a lease id that does not exist' },
  'credential_proxy.lease_revoked': { http: 403, grpc: GrpcStatus.PERMISSION_DENIED, meaning: 'proxy call with a revoked lease' },
  'credential_proxy.lease_expired': { http: 403, grpc: GrpcStatus.PERMISSION_DENIED, meaning: 'proxy call with an expired lease' },
  'credential_proxy.scope_mismatch': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "proxy call whose agent_id, instance_id or session_id differ from the lease's",
  },
  'credential_proxy.policy_missing': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'proxy call with a lease that has no proxy_policy',
  },
  'credential_proxy.scheme_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'proxy target URL is not http or https',
  },
  'credential_proxy.host_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "proxy target host is not in the lease's policy",
  },
  'credential_proxy.path_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "proxy target path is not under the policy's path prefixes",
  },
  'credential_proxy.method_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "proxy method is not in the lease's policy",
  },
  'credential_proxy.header_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "proxy call sends a header outside the policy's header allowlist (or one never allowed)",
  },
  'credential_proxy.address_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'proxy target resolves to a loopback, link-local, metadata, unspecified or multicast address the policy does not name',
  },
  'credential_proxy.upstream_unreachable': {
    http: 502,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'the proxy target does not resolve or the connection failed',
  },
  'credential_proxy.upstream_timeout': {
    http: 504,
    grpc: GrpcStatus.DEADLINE_EXCEEDED,
    meaning: 'the proxy target did not answer within SVC_CREDENTIAL_PROXY_TIMEOUT_MS',
  },
  'credential_proxy.response_encoding': {
    http: 502,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'the upstream body has a content encoding the proxy cannot decode (it must read the body to redact the credential)',
  },
  'credential_proxy.response_too_large': {
    http: 502,
    grpc: GrpcStatus.RESOURCE_EXHAUSTED,
    meaning: 'the upstream response exceeds SVC_CREDENTIAL_PROXY_MAX_RESPONSE_BYTES',
  },
  // gateway SSH leases (spec 4.14; statuses "not shown": ours)
  'ssh_lease.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no SSH lease has this id' },
  'ssh_lease.public_key_invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'public_key is not one OpenSSH public key line (malformed, a certificate, or the body does not match its type)',
  },
  'ssh_lease.public_key_unsupported': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'public_key is of a type not accepted (only ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa of at least 2048 bits)',
  },
  'ssh_lease.private_key_refused': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'public_key holds a private key; it was neither stored nor logged',
  },
  'ssh_lease.access_mode_unsupported': { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'access_mode is not ssh' },
  'ssh_lease.ttl_out_of_range': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'ttl_seconds is outside 1 to SVC_GATEWAY_SSH_LEASE_MAX_TTL_SECONDS',
  },
  'ssh_lease.actor_mismatch': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: "the body's actor is not the authenticated operator (leases are issued in the caller's own name only)",
  },
  'ssh_lease.principal_not_allowed': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'the principal is not one the guests accept (SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS, else the authorized user)',
  },
  'ssh_lease.instance_not_found': {
    http: 404,
    grpc: GrpcStatus.NOT_FOUND,
    meaning: 'instance_id names no VM the hypervisor knows (by name or instance id) and no SVC_GATEWAY_SSH_TARGETS entry',
  },
  'ssh_lease.signing_failed': {
    http: 500,
    grpc: GrpcStatus.INTERNAL,
    meaning: 'ssh-keygen could not sign the key with SVC_GATEWAY_SSH_CA_KEY (nothing was issued)',
  },
  // the activity store (spec 4.12; codes and statuses "not shown": ours)
  'activity.scope_header_missing': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'a scope header (X-Svc-Tenant-Id, -Host-Id, -Instance-Id, -Agent-Id; -Collector-Id on ingest) is missing or not an id',
  },
  'activity.event_invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'an event is not a valid activity.event/v1 record (the message names the event and the field)',
  },
  'activity.scope_mismatch': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: "an event's tenant, host, instance, agent or collector differs from the scope headers (the batch was refused)",
  },
  'activity.restricted_content': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'an event is restricted content, or its payload has a content key (prompt, stdin, env, ...); the store keeps metadata only',
  },
  'activity.secret_prohibited': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'an event is marked secret-prohibited; it was not stored',
  },
  'activity.secret_field': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning:
      'a payload key carries secrets (password, token, api_key, ...) or a value looks like one (a PEM private key, a bearer credential)',
  },
  'activity.batch_too_large': { http: 413, grpc: GrpcStatus.RESOURCE_EXHAUSTED, meaning: 'the batch holds more than 1000 events' },
  'activity.event_id_conflict': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'an event_id is already stored with different content (a replay must be identical; the batch was refused)',
  },
  'activity.sequence_conflict': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: "an event's collector_sequence is already stored under another event_id (the batch was refused)",
  },
  'activity.store_unavailable': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'the activity store could not commit or read (nothing was acknowledged; retry)',
  },
  'route.retired': {
    http: 410,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'the route is retired (rotate-secret: agents use transport identity)',
  },
  'server.not_ready': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'listeners or actors are still starting, or the server is shutting down',
  },
  'server.unavailable': { http: 503, grpc: GrpcStatus.UNAVAILABLE, meaning: 'a dependency needed for this request is unavailable' },
  'server.internal': { http: 500, grpc: GrpcStatus.INTERNAL, meaning: 'an unexpected failure; the log has the details' },
  'server.timeout': { http: 503, grpc: GrpcStatus.DEADLINE_EXCEEDED, meaning: 'an internal call did not finish within its deadline' },
  'actor.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no actor has this id' },
  'actor.shard_restarted': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'the worker shard hosting the actor crashed and was restarted',
  },
  'actor.already_exists': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'an actor with this id is already running' },

  // agents (spec part 5; gRPC identity)
  'agent.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no connected or retained agent has this id' },
  'agent.identity_mismatch': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'the certificate identity does not match x-agent-instance-id',
  },
  'identity.operator_required': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning:
      'the call needs an operator certificate (spiffe://<domain>/operator/<name>): gRPC Exec, the MCP endpoint (admin listener only), and every request on the admin listener',
  },
  'agent.unauthenticated': { http: 401, grpc: GrpcStatus.UNAUTHENTICATED, meaning: 'no verified transport identity' },

  // secure bootstrap enrollment (spec 4.10; POST /api/v1/bootstrap-enrollment/consume, README "Secure bootstrap").
  // The stable enrollment error taxonomy: GET /api/v2/admin/bootstrap/readiness lists these codes.
  'bootstrap.request_invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'the consume body is not a JSON object with a string token and a string csr',
  },
  'bootstrap.token_unknown': {
    http: 401,
    grpc: GrpcStatus.UNAUTHENTICATED,
    meaning: 'no bootstrap token matches (never issued, malformed, or pruned)',
  },
  'bootstrap.token_expired': { http: 401, grpc: GrpcStatus.UNAUTHENTICATED, meaning: 'the bootstrap token is past its expiry' },
  'bootstrap.token_revoked': {
    http: 401,
    grpc: GrpcStatus.UNAUTHENTICATED,
    meaning: 'the bootstrap token was revoked (its VM was deleted, a restore abandoned, or a newer token staged)',
  },
  'bootstrap.token_consumed': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the bootstrap token was already used: tokens are single-use',
  },
  'bootstrap.csr_invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'the CSR is not a PEM PKCS#10 request with a valid signature over an ECDSA P-256 key (the token stays usable)',
  },
  'bootstrap.ca_unavailable': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'the CA cannot sign now (not loaded or expired); the token stays usable, retry later',
  },
  'bootstrap.disabled': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'bootstrap enrollment is turned off (SVC_BOOTSTRAP_ENROLLMENT=off)',
  },

  // VMs and operations (spec part 7)
  VM_NOT_FOUND: { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'VM missing' },
  VM_RUNNING: { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'VM running when stopped is required (delete without force)' },
  VM_STOPPED: { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'VM stopped when running is required' },
  VM_NOT_RUNNING: { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'VM not running (restart, deploy-agent)' },
  VM_ALREADY_EXISTS: { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'name in use' },
  VM_BUSY: { http: 409, grpc: GrpcStatus.ABORTED, meaning: 'a conflicting operation is queued or running on this VM' },
  INVALID_VM_NAME: { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'name fails ^agent-[a-z0-9-]+$' },
  PROVISIONING_ERROR: { http: 500, grpc: GrpcStatus.INTERNAL, meaning: 'provisioning failed' },
  LIBVIRT_ERROR: { http: 502, grpc: GrpcStatus.UNAVAILABLE, meaning: 'hypervisor operation failed' },
  HYPERVISOR_UNAVAILABLE: {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'hypervisor down, too slow, or circuit open (Retry-After sent)',
  },
  OPERATION_NOT_FOUND: { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'unknown operation id' },
  'operation.not_found': {
    http: 404,
    grpc: GrpcStatus.NOT_FOUND,
    meaning: 'unknown operation id at GET /api/v2/admin/operations/{id} (never issued, or purged after its retention)',
  },
  'server.restarted': {
    http: 503,
    grpc: GrpcStatus.ABORTED,
    meaning:
      "only as an operation's error_code: sandboxd stopped or died while the operation was pending or running; its outcome is unknown (check the target)",
  },

  // sessions, idempotency (spec part 7)
  'session.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no session with this id on this agent' },
  'session.name_in_use': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'the agent already has a live session with this session_name',
  },
  'session.id_in_use': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'a pty-ws.v1 join would start a session under the id of a live one',
  },
  'hitl.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no pending human-in-the-loop request with this id' },
  'session_backend.not_implemented': {
    http: 501,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'session backend not run by sandboxd or not on the agent',
  },
  'session_class.not_implemented': {
    http: 501,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'session class that does not pair with the backend',
  },
  'idempotency.key_conflict': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'same Idempotency-Key, different request' },
  'idempotency.in_progress': {
    http: 409,
    grpc: GrpcStatus.ABORTED,
    meaning: 'the original request with this key is still running (Retry-After: 1)',
  },
  // checkpoints and warm pools (spec 4.10)
  'checkpoint.pre_enrollment_required': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'a checkpoint request without pre_enrollment: true (only pre-enrollment checkpoints exist)',
  },
  'checkpoint.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no checkpoint with this id' },
  'checkpoint.exists': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'a checkpoint with this id exists' },
  'checkpoint.vm_enrolled': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the VM was not created with enrollment: deferred, or its agent has enrolled: its state holds an identity',
  },
  'checkpoint.vm_busy': { http: 409, grpc: GrpcStatus.ABORTED, meaning: 'a checkpoint of this VM is being taken' },
  'checkpoint.not_ready': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the checkpoint is being taken, restored, reserved by a warm pool, consumed or failed',
  },
  'checkpoint.name_mismatch': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: "a direct restore's name differs from the checkpoint's source VM",
  },
  'checkpoint.unsupported_host': {
    http: 501,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'checkpoints are taken on libvirt test-driver hosts only in this version (README "Checkpoints and warm pools")',
  },
  'warm_pool.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no warm pool with this name' },
  'warm_pool.exists': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'a warm pool with this name exists' },
  'warm_pool.empty': {
    http: 409,
    grpc: GrpcStatus.RESOURCE_EXHAUSTED,
    meaning: 'no slot of the pool is free now (Retry-After: when a refill may have added one)',
  },
  // fleet inventory and reconcile (spec 4.13)
  'fleet.stale_inventory_revision': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'before_revision is not the current inventory_revision (error.details.inventory_revision has it): preview again',
  },
  'fleet.reconcile_in_progress': {
    http: 409,
    grpc: GrpcStatus.ABORTED,
    meaning: 'another fleet reconcile is still running (Retry-After: 1)',
  },
  STREAM_INTERRUPTED: { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'chat stream for an unknown or expired command' },

  // tasks and storage
  'task.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no task with this id' },
  'task.invalid_manifest': { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'the manifest fails the schema' },
  'task.not_cancellable': { http: 400, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'the task already finished' },
  'task.no_capacity': { http: 503, grpc: GrpcStatus.UNAVAILABLE, meaning: 'no VM or agent can be had for a task' },
  'storage.invalid_path': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'path is absolute, has .., a NUL byte, or leaves the root',
  },
  'storage.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no such file' },
  'storage.quota_exceeded': { http: 507, grpc: GrpcStatus.RESOURCE_EXHAUSTED, meaning: 'the agent inbox quota is used up' },

  // startup profiles and loadouts (README "Startup profiles and loadouts")
  'profile.invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'a startup profile field is missing or invalid (the message names it)',
  },
  'profile.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no startup profile with this name' },
  'profile.exists': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'a startup profile with this name exists' },
  'profile.builtin': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the built-in profiles svc-dev and basic cannot be changed or deleted',
  },
  'profile.revision_mismatch': {
    http: 409,
    grpc: GrpcStatus.ABORTED,
    meaning: "expected_revision (or If-Match) is not the profile's current revision: someone changed it since you read it",
  },
  'profile.in_use': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the profile is launching a VM or bound to one (a VM created with it exists)',
  },
  'profile.unknown': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'POST /api/v1/vms names a startup profile that does not exist',
  },
  'loadout.invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'the loadout document fails its limits or schema (the message names the field)',
  },
  'loadout.secret_field': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'an environment key or value looks secret-bearing (secrets go through credential leases, never loadouts or profiles)',
  },
  'loadout.name_mismatch': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: "metadata.name is not the loadout's catalog key (the path)",
  },
  'loadout.exists': { http: 409, grpc: GrpcStatus.ALREADY_EXISTS, meaning: 'a loadout with this name exists (loadouts are create-only)' },
  'loadout.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no loadout with this name' },
  'loadout.unknown': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'a VM create or a startup profile names a loadout that does not exist',
  },
  // Celld (spec 4.13; README "Celld") and provider capabilities
  'provider.capability_unavailable': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: "the VM's or checkpoint's provider does not advertise this action (snapshot, checkpoint, fork, warm_pool)",
  },
  'celld.disabled': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'Celld is off (SVC_CELLD_ENABLED): cell commands and reconcile are refused',
  },
  'celld.not_configured': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'Celld is enabled but has no cell id (SVC_CELLD_CELL_ID): cell commands and reconcile are refused',
  },
  'celld.cell_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: "the path names a cell other than this server's" },
  'celld.document_invalid': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'the cell command document fails its schema (details.problems)',
  },
  'celld.request_hash_mismatch': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: "the document's request_hash is not the sha256 of its canonical JSON",
  },
  'celld.operation_conflict': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'this operation_id is bound to a different document in the effect ledger',
  },
  'celld.replay_refused': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'a generation-only reconcile is never replayed: read its ledger entry for the outcome',
  },
  'celld.command_not_found': {
    http: 404,
    grpc: GrpcStatus.NOT_FOUND,
    meaning: 'no command with this operation_id was accepted in this cell (it had no effect; sending it is safe)',
  },
  'celld.fleet_unavailable': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: 'reconcile through Celld needs the fleet inventory, which is not running',
  },
  // scoped storage (issue 21)
  'storage.object_too_large': {
    http: 413,
    grpc: GrpcStatus.RESOURCE_EXHAUSTED,
    meaning: 'an object read or write through the scoped API is over 1 MiB (larger files: the _download route)',
  },
  'storage.download_too_large': {
    http: 413,
    grpc: GrpcStatus.RESOURCE_EXHAUSTED,
    meaning: 'the file is larger than SVC_STORAGE_MAX_DOWNLOAD_BYTES',
  },
  'storage.read_only': { http: 403, grpc: GrpcStatus.PERMISSION_DENIED, meaning: 'the global area is read-only' },
  'storage.confirmation_required': {
    http: 428,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'overwrite and delete need If-Match: <etag> or confirm=overwrite / confirm=delete',
  },
  'storage.precondition_failed': {
    http: 412,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the object changed: its ETag is not the one given (or seen when the write was requested)',
  },
  'storage.not_a_file': { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'the path names a directory or a special file' },
  'storage.not_empty': { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'a directory to delete is not empty' },
  'storage.review_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no storage write review with this id' },
  'storage.review_decided': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'the write review was already approved or rejected',
  },
  'storage.review_self': {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'an operator cannot approve a write they requested (a second identity reviews)',
  },
  // managed desktop sessions (spec 4.15, part 7 "Desktop problem codes": spec spelling; rendered as
  // application/problem+json on the desktop listener only)
  invalid_resource_request: {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'desktop: malformed, oversized or unparseable request',
  },
  invalid_enrollment: { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, meaning: 'desktop: malformed, oversized or unparseable enrollment' },
  access_denied: {
    http: 403,
    grpc: GrpcStatus.PERMISSION_DENIED,
    meaning: 'desktop: no verified client certificate or token, failed authorization, or an unknown or foreign resource',
  },
  resource_conflict: {
    http: 409,
    grpc: GrpcStatus.ABORTED,
    meaning: 'desktop: idempotency key bound to another payload, stale generation, or the resource cannot take the action',
  },
  enrollment_conflict: {
    http: 409,
    grpc: GrpcStatus.ABORTED,
    meaning: 'desktop: expected_revision is not the current enrollment revision',
  },
  route_unavailable: { http: 503, grpc: GrpcStatus.UNAVAILABLE, meaning: 'desktop: the token authority is unavailable' },
  'desktop.route_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'desktop listener: no desktop route has this path' },
  'desktop.method_not_allowed': {
    http: 405,
    grpc: GrpcStatus.UNIMPLEMENTED,
    meaning: 'desktop listener: the path exists, not with this method',
  },
  'desktop.body_timeout': {
    http: 408,
    grpc: GrpcStatus.DEADLINE_EXCEEDED,
    meaning: 'desktop listener: the body did not arrive within 1 s',
  },
  // mission dispatch and executors (spec 4.16, part 5; README "Missions and dispatch")
  'dispatch.unauthorized': {
    http: 401,
    grpc: GrpcStatus.UNAUTHENTICATED,
    meaning: 'no Authorization: Bearer header, or a token no registered executor was issued',
  },
  'dispatch.agent_not_found': {
    http: 404,
    grpc: GrpcStatus.NOT_FOUND,
    meaning: "the mission's agent (executor_filter.agent_id, else the executor's) is not known to this server",
  },
  'dispatch.no_agents': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: "the mission's agent is known but not connected now (no agent to receive the mission)",
  },
  'dispatch.executor_not_registered': {
    http: 503,
    grpc: GrpcStatus.UNAVAILABLE,
    meaning: "the token's executor is not registered for what executor_filter asks (another agent, executor id or capability)",
  },
  'dispatch.failed': {
    http: 500,
    grpc: GrpcStatus.INTERNAL,
    meaning: 'the dispatcher could not start the mission on the agent (mission.failed names the reason)',
  },
  'mission.conflict': {
    http: 409,
    grpc: GrpcStatus.ALREADY_EXISTS,
    meaning: 'this mission_id was dispatched before with a different body, session or executor',
  },
  'mission.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no mission with this mission_id' },
  'executor.not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no executor with this id' },
  // orchestration link and aiwg bridge (README "Orchestration link and aiwg bridge")
  'aiwg.not_configured': {
    http: 409,
    grpc: GrpcStatus.FAILED_PRECONDITION,
    meaning: 'no bridge to reconnect: ORCH_SERVE_ENDPOINT is not set (the server runs standalone)',
  },
  // A2A task artifacts and the A2A operations on pty-ws.v1 (issue 23 items 3 and 4; README "A2A")
  'a2a.instance_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no agent and no A2A task with this instance id' },
  'a2a.task_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no A2A task with this id on this instance' },
  'a2a.artifact_not_found': { http: 404, grpc: GrpcStatus.NOT_FOUND, meaning: 'no artifact with this id in this A2A task' },
  'a2a.invalid_id': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'an instance, task or artifact id in the path is not 1..128 of [A-Za-z0-9._:-] (no "..")',
  },
  'a2a.version_not_supported': {
    http: 400,
    grpc: GrpcStatus.INVALID_ARGUMENT,
    meaning: 'A2A-Version is neither 0.3 nor 1.0 (answered as google.rpc.Status, reason VERSION_NOT_SUPPORTED)',
  },
  'a2a.task_not_cancelable': { http: 409, grpc: GrpcStatus.FAILED_PRECONDITION, meaning: 'the A2A task has already ended' },
  'a2a.agent_unavailable': { http: 503, grpc: GrpcStatus.UNAVAILABLE, meaning: 'no connected agent behind the instance id' },
  'a2a.store_full': {
    http: 503,
    grpc: GrpcStatus.RESOURCE_EXHAUSTED,
    meaning: 'the A2A task store is full of tasks that are still running',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_TABLE;

/** The plain shape errors take across threads, processes and the wire. */
export interface WireError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

/** An error with a code from the table. Throw it from handlers and actors; the edges render it. */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'SvcError';
    this.code = code;
    this.details = details;
  }
  get httpStatus(): number {
    return ERROR_TABLE[this.code].http;
  }
  get grpcStatus(): GrpcStatusCode {
    return ERROR_TABLE[this.code].grpc;
  }
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_TABLE, code);
}

/** Anything thrown → WireError. Unknown errors become server.internal with a generic message. */
export function toWire(err: unknown): WireError {
  if (err instanceof SvcError) return err.toWire();
  if (typeof err === 'object' && err !== null && isErrorCode((err as { code?: unknown }).code)) {
    const e = err as { code: ErrorCode; message?: unknown; details?: unknown };
    const wire: WireError = { code: e.code, message: typeof e.message === 'string' ? e.message : e.code };
    if (typeof e.details === 'object' && e.details !== null) wire.details = e.details as Record<string, unknown>;
    return wire;
  }
  return { code: 'server.internal', message: 'internal error' };
}

/** WireError → SvcError (for rethrowing on the receiving side of a thread boundary). */
export function fromWire(wire: WireError): SvcError {
  return new SvcError(isErrorCode(wire.code) ? wire.code : 'server.internal', wire.message, wire.details);
}

/** The spec's v1 error envelope. */
export function envelope(code: ErrorCode, message: string): { error: { code: ErrorCode; message: string } } {
  return { error: { code, message } };
}

/** The README's error table, generated from ERROR_TABLE (test/unit/docs/readme-tables.test.ts keeps them equal). */
export function errorsMarkdownTable(): string {
  const grpcName = new Map<number, string>(Object.entries(GrpcStatus).map(([k, v]) => [v, k]));
  const rows = (Object.keys(ERROR_TABLE) as ErrorCode[]).map((code) => {
    const e: ErrorSpec = ERROR_TABLE[code];
    return `| \`${code}\` | ${e.http} | ${grpcName.get(e.grpc) ?? e.grpc} | ${e.meaning} |`;
  });
  return ['| Code | HTTP | gRPC | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}
