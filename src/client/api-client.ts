/**
 * The typed client of sandboxd's public HTTP/WS API, shared by the dashboard (browser bundle)
 * and `sbx` (Node 20). One method per route; responses typed with the spec's field names
 * (types.ts); every non-2xx becomes an ApiError. Isomorphic: no Node built-ins.
 *
 *   const api = new ApiClient({ baseUrl: 'http://127.0.0.1:8122' });
 *   const { operation } = await api.createVm({ name: 'agent-one' });
 *   const done = await api.waitForOperation(operation.id, { onProgress: (op) => draw(op.progress_percent) });
 *   for await (const ev of api.tailEvents({ event_type: 'agent.*' }, { signal })) show(ev);
 */
import { ApiError } from './api-error.js';
import type {
  CredentialAddRequest,
  CredentialAuditPage,
  CredentialInfo,
  CredentialLease,
  CredentialLeaseRequest,
} from '../wire/credentials.js';
import { HttpTransport, queryString as qs, seg, type ApiClientOptions, type RequestOptions } from './http-transport.js';
import { PtyConnection, type PtyConnectOptions } from './pty-ws.js';
import type { SseStreamOptions } from './sse-stream.js';
import type { A2aArtifactList } from '../wire/a2a.js';
import { parseJsonData, taskLogEvent } from './stream-events.js';
import type {
  CapabilitiesResponse,
  CellCommandAccepted,
  CellCommandDocument,
  CellCommandRecord,
  CellState,
  CelldStatus,
  DiagnoseReport,
  PreflightReport,
  UpgradePlan,
  ValidateReport,
} from '../wire/celld.js';
import {
  TERMINAL_TASK_STATES,
  type ActivityCoverageResponse,
  type ActivityEventPage,
  type ActivityQuery,
  type ActivityReadScope,
  type AgentList,
  type AgentOutputChunk,
  type AgentOutputError,
  type AgentOutputEvent,
  type AgentOutputQuery,
  type ContainerImageList,
  type DeepHealth,
  type EventFilters,
  type EventPage,
  type EventRecord,
  type HealthStatus,
  type HitlList,
  type HitlRespondResult,
  type Operation,
  type OperationAccepted,
  type Readiness,
  type ReprovisionAccepted,
  type SessionCreated,
  type SessionCreateRequest,
  type SessionKillResult,
  type SessionList,
  type SessionSignal,
  type Task,
  type TaskArtifactList,
  type TaskCancelResult,
  type TaskList,
  type TaskListQuery,
  type TaskLogEvent,
  type TaskSubmitRequest,
  type TaskSubmitResult,
  type VmCreateRequest,
  type VmDeleteResult,
  type VmDetail,
  type VmLifecycleResult,
  type VmList,
  type VmRestartRequest,
  type AdminAccepted,
  type AdminOperation,
  type Checkpoint,
  type CheckpointCreateRequest,
  type CheckpointRestoreRequest,
  type WarmPool,
  type WarmPoolCreateRequest,
  type LoadoutJson,
  type StartupProfileJson,
  type FleetReconcileDryRun,
  type FleetReconcileRequest,
  type FleetWorkloadsResponse,
} from './types.js';
import { pollUntil, type PollOptions } from './wait.js';
import type { StorageAreaName, StorageListing, StorageReview, StorageReviewState } from '../wire/storage.js';
import type {
  DispatchAccepted,
  DispatchRequest,
  Executor,
  ExecutorRegistered,
  ExecutorRegisterRequest,
  Mission,
} from '../wire/missions.js';
import type { BridgeReconnect, BridgeStatus } from '../wire/aiwg.js';

/** Options of a request that may carry an Idempotency-Key (spec 4.11). */
export type IdempotentOptions = RequestOptions & { idempotencyKey?: string };

function withKey(opts: IdempotentOptions): RequestOptions {
  const { idempotencyKey, ...rest } = opts;
  return idempotencyKey === undefined ? rest : { ...rest, headers: { ...rest.headers, 'idempotency-key': idempotencyKey } };
}

/** Options of the streaming methods. */
export type StreamOptions = Pick<
  SseStreamOptions,
  'signal' | 'reconnect' | 'onOpen' | 'onReconnect' | 'lastEventId' | 'maxAttempts' | 'initialDelayMs' | 'maxDelayMs'
>;

export interface WaitOptions<T> extends Omit<PollOptions<T>, 'onUpdate'> {
  /** Each change seen while waiting (the first poll included). */
  onProgress?: (value: T) => void;
}

export interface ArtifactDownload {
  bytes: Uint8Array;
  contentType: string;
  /** From Content-Disposition, else the artifact name's last segment. */
  fileName: string;
}

const isTerminalOp = (op: Operation): boolean => op.status === 'completed' || op.status === 'failed';
const isTerminalTask = (t: Task): boolean => TERMINAL_TASK_STATES.includes(t.state);

export class ApiClient extends HttpTransport {
  constructor(opts: ApiClientOptions) {
    super(opts);
  }

  // ------------------------------------------------------------ health (4.1)

  /** GET /healthz (liveness). */
  healthz(opts?: RequestOptions): Promise<HealthStatus> {
    return this.requestJson('GET', '/healthz', undefined, opts);
  }

  /** GET /readyz: resolves with the body for 200 and for 503 (not ready). */
  readyz(opts?: RequestOptions): Promise<Readiness> {
    return this.requestJson('GET', '/readyz', undefined, { ...opts, acceptStatus: [503] });
  }

  /** GET /healthz/deep. */
  deepHealth(opts?: RequestOptions): Promise<DeepHealth> {
    return this.requestJson('GET', '/healthz/deep', undefined, opts);
  }

  // ------------------------------------------------------------ agents (4.2)

  listAgents(opts?: RequestOptions): Promise<AgentList> {
    return this.requestJson('GET', '/api/v1/agents', undefined, opts);
  }

  reprovisionAgent(agentId: string, opts?: RequestOptions): Promise<ReprovisionAccepted> {
    return this.requestJson('POST', `/api/v1/agents/${seg(agentId)}/reprovision`, undefined, opts);
  }

  // ------------------------------------------------------------ VMs (4.3)

  /** state: running, stopped or all (default all); prefix: default agent-, `*` for all. */
  listVms(q: { state?: 'running' | 'stopped' | 'all'; prefix?: string } = {}, opts?: RequestOptions): Promise<VmList> {
    return this.requestJson('GET', `/api/v1/vms${qs(q)}`, undefined, opts);
  }

  getVm(name: string, opts?: RequestOptions): Promise<VmDetail> {
    return this.requestJson('GET', `/api/v1/vms/${seg(name)}`, undefined, opts);
  }

  /** 202: the vm_create operation (wait with waitForOperation). */
  createVm(req: VmCreateRequest, opts?: RequestOptions): Promise<OperationAccepted> {
    return this.requestJson('POST', '/api/v1/vms', req, opts);
  }

  startVm(name: string, opts?: RequestOptions): Promise<VmLifecycleResult> {
    return this.requestJson('POST', `/api/v1/vms/${seg(name)}/start`, undefined, opts);
  }

  /** ACPI shutdown (graceful). */
  stopVm(name: string, opts?: RequestOptions): Promise<VmLifecycleResult> {
    return this.requestJson('POST', `/api/v1/vms/${seg(name)}/stop`, undefined, opts);
  }

  /** Forced power-off. */
  destroyVm(name: string, opts?: RequestOptions): Promise<VmLifecycleResult> {
    return this.requestJson('POST', `/api/v1/vms/${seg(name)}/destroy`, undefined, opts);
  }

  /** 202: the vm_restart operation. */
  restartVm(name: string, req: VmRestartRequest = {}, opts?: RequestOptions): Promise<OperationAccepted> {
    return this.requestJson('POST', `/api/v1/vms/${seg(name)}/restart`, req, opts);
  }

  /** force: delete even when running; deleteDisk: remove the disk too. */
  deleteVm(name: string, q: { force?: boolean; deleteDisk?: boolean } = {}, opts?: RequestOptions): Promise<VmDeleteResult> {
    return this.requestJson('DELETE', `/api/v1/vms/${seg(name)}${qs({ force: q.force, delete_disk: q.deleteDisk })}`, undefined, opts);
  }

  /** 202: an operation (reported as vm_create). */
  deployAgent(name: string, opts?: RequestOptions): Promise<OperationAccepted> {
    return this.requestJson('POST', `/api/v1/vms/${seg(name)}/deploy-agent`, undefined, opts);
  }

  // ------------------------------------------------------------ operations (4.4)

  getOperation(id: string, opts?: RequestOptions): Promise<Operation> {
    return this.requestJson('GET', `/api/v1/operations/${seg(id)}`, undefined, opts);
  }

  /**
   * Polls until the operation is completed or failed and resolves with it (a failed operation
   * resolves too: check `status`). onProgress sees every change. Rejects on abort, on
   * OPERATION_NOT_FOUND, after too many failed polls, or past `timeoutMs`.
   */
  waitForOperation(id: string, opts: WaitOptions<Operation> = {}): Promise<Operation> {
    const { onProgress, ...rest } = opts;
    return pollUntil((signal) => this.getOperation(id, signal === undefined ? {} : { signal }), isTerminalOp, {
      ...rest,
      ...(onProgress !== undefined ? { onUpdate: onProgress } : {}),
    });
  }

  // ------------------------------------------------------------ events (4.5)

  listEvents(filters: EventFilters = {}, opts?: RequestOptions): Promise<EventPage> {
    return this.requestJson('GET', `/api/v1/events${qs({ ...filters })}`, undefined, opts);
  }

  /**
   * Live events (follow=true SSE), oldest first from `filters.since` when given, else new ones
   * only. Reconnects after outages and resumes after the last event received (since=<id>); when
   * the server restarted meanwhile (its ids started over), resumes from its first event.
   */
  async *tailEvents(
    filters: Omit<EventFilters, 'limit'> & { limit?: number } = {},
    opts: StreamOptions = {},
  ): AsyncGenerator<EventRecord, void, undefined> {
    const { since, ...rest } = filters;
    const stream = this.sse(
      '/api/v1/events',
      (lastId) => ({ ...rest, follow: true, since: lastId !== undefined && /^\d+$/.test(lastId) ? lastId : since }),
      {
        ...opts,
        resumeFrom: async (lastId) => {
          if (lastId === undefined || !/^\d+$/.test(lastId)) return lastId;
          const page = await this.listEvents({ limit: 1 }, opts.signal === undefined ? {} : { signal: opts.signal });
          return page.last_event_id < Number(lastId) ? '0' : lastId;
        },
      },
    );
    for await (const ev of stream) {
      if (ev.event === 'event') yield parseJsonData(ev) as EventRecord;
      else if (ev.event === 'error') {
        // The server dropped us for falling behind; the next connection resumes from our cursor.
        continue;
      }
    }
  }

  // ------------------------------------------------------------ container images (4.16)

  listContainerImages(opts?: RequestOptions): Promise<ContainerImageList> {
    return this.requestJson('GET', '/api/v1/container-images', undefined, opts);
  }

  // ------------------------------------------------------------ tasks (4.6)

  /** A YAML string is sent as manifest_yaml; an object body as given. */
  submitTask(manifest: string | TaskSubmitRequest, opts?: RequestOptions): Promise<TaskSubmitResult> {
    return this.requestJson('POST', '/api/v1/tasks', typeof manifest === 'string' ? { manifest_yaml: manifest } : manifest, opts);
  }

  listTasks(q: TaskListQuery = {}, opts?: RequestOptions): Promise<TaskList> {
    const state = typeof q.state === 'string' ? q.state : q.state?.join(',');
    return this.requestJson('GET', `/api/v1/tasks${qs({ state, limit: q.limit, offset: q.offset })}`, undefined, opts);
  }

  getTask(id: string, opts?: RequestOptions): Promise<Task> {
    return this.requestJson('GET', `/api/v1/tasks/${seg(id)}`, undefined, opts);
  }

  /** 400 task.not_cancellable when the task already finished. */
  cancelTask(id: string, reason = 'cancelled by user', opts?: RequestOptions): Promise<TaskCancelResult> {
    return this.requestJson('DELETE', `/api/v1/tasks/${seg(id)}`, { reason }, opts);
  }

  /** Polls until the task reaches a terminal state and resolves with it. */
  waitForTask(id: string, opts: WaitOptions<Task> = {}): Promise<Task> {
    const { onProgress, ...rest } = opts;
    return pollUntil((signal) => this.getTask(id, signal === undefined ? {} : { signal }), isTerminalTask, {
      pollMs: 1000,
      ...rest,
      ...(onProgress !== undefined ? { onUpdate: onProgress } : {}),
    });
  }

  /**
   * The task's log stream (SSE stdout, stderr, event, completed, error). Ends after `completed`
   * or `error`; reconnects and resumes (Last-Event-ID) if the connection drops before that.
   */
  async *taskLogs(id: string, opts: StreamOptions = {}): AsyncGenerator<TaskLogEvent, void, undefined> {
    for await (const ev of this.sse(`/api/v1/tasks/${seg(id)}/logs`, () => ({}), opts)) {
      const out = taskLogEvent(ev);
      if (out === null) continue;
      yield out;
      if (out.type === 'completed' || out.type === 'error') return;
    }
  }

  listTaskArtifacts(id: string, opts?: RequestOptions): Promise<TaskArtifactList> {
    return this.requestJson('GET', `/api/v1/tasks/${seg(id)}/artifacts`, undefined, opts);
  }

  /** Where a browser can download an artifact (the name's slashes are percent-encoded). */
  taskArtifactUrl(id: string, name: string): string {
    return this.url(`/api/v1/tasks/${seg(id)}/artifacts/${seg(name)}`);
  }

  async downloadTaskArtifact(id: string, name: string, opts: RequestOptions = {}): Promise<ArtifactDownload> {
    const res = await this.request('GET', `/api/v1/tasks/${seg(id)}/artifacts/${seg(name)}`, undefined, {
      timeoutMs: 0,
      ...opts,
      headers: { accept: '*/*', ...opts.headers },
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    const disposition = res.headers.get('content-disposition') ?? '';
    const m = /filename\*=UTF-8''([^;]+)|filename="?([^";]+)"?/i.exec(disposition);
    const raw = m?.[1] !== undefined ? decodeURIComponent(m[1]) : m?.[2];
    return {
      bytes,
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      fileName: raw ?? name.split('/').pop() ?? name,
    };
  }

  // ------------------------------------------------------------ sessions (4.2)

  /** With an idempotencyKey a retry returns the first create's response instead of a new terminal. */
  createSession(agentId: string, req: SessionCreateRequest = {}, opts: IdempotentOptions = {}): Promise<SessionCreated> {
    return this.requestJson('POST', `/api/v1/agents/${seg(agentId)}/sessions`, req, withKey(opts));
  }

  // ------------------------------------------------------------ checkpoints, warm pools (4.10)

  /** Polls GET /api/v2/admin/operations/{id} (the admin operation of a 202). */
  getAdminOperation(id: string, opts?: RequestOptions): Promise<AdminOperation> {
    return this.requestJson('GET', `/api/v2/admin/operations/${seg(id)}`, undefined, opts);
  }

  createCheckpoint(req: CheckpointCreateRequest, opts: IdempotentOptions = {}): Promise<AdminAccepted> {
    return this.requestJson('POST', '/api/v2/admin/hypervisor/checkpoints', req, withKey(opts));
  }

  listCheckpoints(opts?: RequestOptions): Promise<{ checkpoints: Checkpoint[] }> {
    return this.requestJson('GET', '/api/v2/admin/hypervisor/checkpoints', undefined, opts);
  }

  restoreCheckpoint(id: string, req: CheckpointRestoreRequest = {}, opts: IdempotentOptions = {}): Promise<AdminAccepted> {
    return this.requestJson('POST', `/api/v2/admin/hypervisor/checkpoints/${seg(id)}/restore`, req, withKey(opts));
  }

  createWarmPool(req: WarmPoolCreateRequest, opts: IdempotentOptions = {}): Promise<AdminAccepted> {
    return this.requestJson('POST', '/api/v2/admin/hypervisor/warm-pools', req, withKey(opts));
  }

  listWarmPools(opts?: RequestOptions): Promise<{ pools: WarmPool[] }> {
    return this.requestJson('GET', '/api/v2/admin/hypervisor/warm-pools', undefined, opts);
  }

  handoff(pool: string, opts: IdempotentOptions = {}): Promise<AdminAccepted> {
    return this.requestJson('POST', `/api/v2/admin/hypervisor/warm-pools/${seg(pool)}/handoff`, {}, withKey(opts));
  }

  // ------------------------------------------------------------ startup profiles and loadouts (4.13)

  listStartupProfiles(opts?: RequestOptions): Promise<{ startup_profiles: StartupProfileJson[]; total: number }> {
    return this.requestJson('GET', '/api/v2/startup-profiles', undefined, opts);
  }

  getStartupProfile(name: string, opts?: RequestOptions): Promise<StartupProfileJson> {
    return this.requestJson('GET', `/api/v2/startup-profiles/${seg(name)}`, undefined, opts);
  }

  createStartupProfile(body: Record<string, unknown>, opts: IdempotentOptions = {}): Promise<StartupProfileJson> {
    return this.requestJson('POST', '/api/v2/startup-profiles', body, withKey(opts));
  }

  /** A full replacement; `body.expected_revision` is the revision read. */
  updateStartupProfile(name: string, body: Record<string, unknown>, opts: IdempotentOptions = {}): Promise<StartupProfileJson> {
    return this.requestJson('PUT', `/api/v2/startup-profiles/${seg(name)}`, body, withKey(opts));
  }

  deleteStartupProfile(name: string, opts: IdempotentOptions = {}): Promise<{ deleted: boolean; name: string }> {
    return this.requestJson('DELETE', `/api/v2/startup-profiles/${seg(name)}`, undefined, withKey(opts));
  }

  /** Creates loadout `name` from its YAML document (create-only). */
  createLoadout(name: string, document: string, opts?: RequestOptions): Promise<LoadoutJson> {
    return this.requestJson('POST', `/api/v2/loadouts/${seg(name)}`, { document }, opts);
  }

  listLoadouts(opts?: RequestOptions): Promise<{ loadouts: LoadoutJson[]; total: number }> {
    return this.requestJson('GET', '/api/v2/loadouts', undefined, opts);
  }

  getLoadout(name: string, opts?: RequestOptions): Promise<LoadoutJson> {
    return this.requestJson('GET', `/api/v2/loadouts/${seg(name)}`, undefined, opts);
  }

  // ------------------------------------------------------------ fleet inventory and reconcile (4.13)

  fleetWorkloads(opts?: RequestOptions): Promise<FleetWorkloadsResponse> {
    return this.requestJson('GET', '/api/v2/fleet/workloads', undefined, opts);
  }

  /** 202 {operation} (a fleet_reconcile operation), or with dry_run 200 {dry_run, before_revision, plan}. */
  fleetReconcile(req: FleetReconcileRequest, opts: IdempotentOptions = {}): Promise<AdminAccepted | FleetReconcileDryRun> {
    return this.requestJson('POST', '/api/v2/fleet/reconcile', req, withKey(opts));
  }

  listSessions(agentId: string, opts?: RequestOptions): Promise<SessionList> {
    return this.requestJson('GET', `/api/v1/agents/${seg(agentId)}/sessions`, undefined, opts);
  }

  killSession(agentId: string, sessionId: string, signal: SessionSignal = 'TERM', opts?: RequestOptions): Promise<SessionKillResult> {
    return this.requestJson('DELETE', `/api/v1/agents/${seg(agentId)}/sessions/${seg(sessionId)}${qs({ signal })}`, undefined, opts);
  }

  /** The pty-ws.v1 URL of a session on this client's server (works through tunnels, unlike a server-built URL). */
  ptyWsUrl(sessionId: string): string {
    return this.wsUrl(`/api/v1/sessions/${seg(sessionId)}/pty`);
  }

  /** Opens a terminal connection (pty-ws.v1); needs a WebSocket constructor (options.WebSocket or the global). */
  openPty(sessionId: string, opts: PtyConnectOptions): PtyConnection {
    const ctor = this.webSocketCtor;
    if (ctor === undefined) throw new ApiError(0, 'protocol', 'no WebSocket implementation: pass options.WebSocket');
    return new PtyConnection(ctor, this.ptyWsUrl(sessionId), opts);
  }

  // ------------------------------------------------------------ human in the loop (4.16)

  listHitl(opts?: RequestOptions): Promise<HitlList> {
    return this.requestJson('GET', '/api/v1/hitl', undefined, opts);
  }

  /** The response (one line) and Enter are typed into the session; 404 hitl.not_found once answered. */
  respondHitl(id: string, response: string, opts?: RequestOptions): Promise<HitlRespondResult> {
    return this.requestJson('POST', `/api/v1/hitl/${seg(id)}/respond`, { response }, opts);
  }

  // ------------------------------------------------------------ credentials (4.14)

  addCredential(body: CredentialAddRequest, opts?: RequestOptions): Promise<CredentialInfo> {
    return this.requestJson('POST', '/api/v2/credentials', body, opts);
  }

  listCredentials(opts?: RequestOptions): Promise<{ credentials: CredentialInfo[]; total: number }> {
    return this.requestJson('GET', '/api/v2/credentials', undefined, opts);
  }

  deleteCredential(name: string, opts?: RequestOptions): Promise<{ deleted: boolean; revoked_leases: number }> {
    return this.requestJson('DELETE', `/api/v2/credentials/${seg(name)}`, undefined, opts);
  }

  grantCredentialLease(body: CredentialLeaseRequest, opts?: RequestOptions): Promise<CredentialLease> {
    return this.requestJson('POST', '/api/v2/credentials/leases', body, opts);
  }

  listCredentialLeases(
    q: { state?: string; credential?: string; agent_id?: string } = {},
    opts?: RequestOptions,
  ): Promise<{ leases: CredentialLease[]; total: number }> {
    return this.requestJson('GET', `/api/v2/credentials/leases${qs(q)}`, undefined, opts);
  }

  revokeCredentialLease(id: string, opts?: RequestOptions): Promise<CredentialLease> {
    return this.requestJson('DELETE', `/api/v2/credentials/leases/${seg(id)}`, undefined, opts);
  }

  credentialAudit(date: string, opts?: RequestOptions): Promise<CredentialAuditPage> {
    return this.requestJson('GET', `/api/v2/credentials/audit${qs({ date })}`, undefined, opts);
  }

  // ------------------------------------------------------------ activity (4.12)

  /** GET /api/v2/activity/events: a page in ingest order (resume with `cursor` = next_cursor) and the collectors' coverage. */
  activityEvents(scope: ActivityReadScope, q: ActivityQuery = {}, opts: RequestOptions = {}): Promise<ActivityEventPage> {
    return this.requestJson('GET', `/api/v2/activity/events${qs({ ...q })}`, undefined, {
      ...opts,
      headers: { ...opts.headers, ...activityScopeHeaders(scope) },
    });
  }

  /** GET /api/v2/activity/coverage: per collector of the scope, count, first/last time, gaps and jumps. */
  activityCoverage(
    scope: ActivityReadScope,
    q: { collector_id?: string } = {},
    opts: RequestOptions = {},
  ): Promise<ActivityCoverageResponse> {
    return this.requestJson('GET', `/api/v2/activity/coverage${qs(q)}`, undefined, {
      ...opts,
      headers: { ...opts.headers, ...activityScopeHeaders(scope) },
    });
  }

  // ------------------------------------------------------------ scoped storage (4.13)

  /** GET /api/v2/storage/{area}/list[/{path}]: one page (at most 500 entries; pass next_cursor on). */
  storageList(
    area: StorageAreaRef,
    path: readonly string[],
    q: { cursor?: string; limit?: number } = {},
    opts?: RequestOptions,
  ): Promise<StorageListing> {
    const tail = path.length === 0 ? '' : `/${scopedPath(path)}`;
    return this.requestJson('GET', `${storageArea(area)}/list${tail}${qs(q)}`, undefined, opts);
  }

  /** GET an object (at most 1 MiB; larger files: GET /api/v1/storage/{area}/_download?path=). */
  async storageGet(
    area: StorageAreaRef,
    path: readonly string[],
    opts: RequestOptions = {},
  ): Promise<{ bytes: Uint8Array; etag: string | null }> {
    const res = await this.request('GET', `${storageArea(area)}/objects/${scopedPath(path)}`, undefined, {
      ...opts,
      headers: { ...opts.headers, accept: '*/*' },
    });
    return { bytes: new Uint8Array(await res.arrayBuffer()), etag: res.headers.get('etag') };
  }

  /** PUT an object (inbox/outbox): 202 with a pending review. `confirm` overwrites an existing object. */
  storagePut(
    area: StorageAreaRef,
    path: readonly string[],
    bytes: Uint8Array,
    w: { ifMatch?: string; confirm?: boolean } = {},
    opts: IdempotentOptions = {},
  ): Promise<{ review: StorageReview }> {
    const o = withKey(opts);
    const headers = { ...o.headers, ...(w.ifMatch !== undefined && { 'if-match': w.ifMatch }) };
    return this.requestJson(
      'PUT',
      `${storageArea(area)}/objects/${scopedPath(path)}${w.confirm === true ? '?confirm=overwrite' : ''}`,
      bytes,
      {
        ...o,
        headers,
      },
    );
  }

  /** DELETE an object (inbox/outbox): 202 with a pending review; needs `confirm` or `ifMatch`. */
  storageDelete(
    area: StorageAreaRef,
    path: readonly string[],
    w: { ifMatch?: string; confirm?: boolean } = {},
    opts: IdempotentOptions = {},
  ): Promise<{ review: StorageReview }> {
    const o = withKey(opts);
    const headers = { ...o.headers, ...(w.ifMatch !== undefined && { 'if-match': w.ifMatch }) };
    return this.requestJson(
      'DELETE',
      `${storageArea(area)}/objects/${scopedPath(path)}${w.confirm === true ? '?confirm=delete' : ''}`,
      undefined,
      {
        ...o,
        headers,
      },
    );
  }

  storageReviews(q: { state?: StorageReviewState; limit?: number } = {}, opts?: RequestOptions): Promise<{ reviews: StorageReview[] }> {
    return this.requestJson('GET', `/api/v2/storage/reviews${qs(q)}`, undefined, opts);
  }

  storageReview(id: string, opts?: RequestOptions): Promise<{ review: StorageReview }> {
    return this.requestJson('GET', `/api/v2/storage/reviews/${seg(id)}`, undefined, opts);
  }

  /** Approve (and apply) a requested write; rejects with the write's error when it cannot land. */
  approveStorageReview(id: string, opts: IdempotentOptions = {}): Promise<{ review: StorageReview }> {
    return this.requestJson('POST', `/api/v2/storage/reviews/${seg(id)}/approve`, undefined, withKey(opts));
  }

  rejectStorageReview(id: string, opts: IdempotentOptions = {}): Promise<{ review: StorageReview }> {
    return this.requestJson('POST', `/api/v2/storage/reviews/${seg(id)}/reject`, undefined, withKey(opts));
  }

  // ------------------------------------------------------------ agent output (4.7)

  /** Live (and with replay, buffered) output chunks; resumes with Last-Event-ID after a drop. */
  async *agentOutput(q: AgentOutputQuery, opts: StreamOptions = {}): AsyncGenerator<AgentOutputEvent, void, undefined> {
    for await (const ev of this.sse(
      '/api/v1/agent-output/stream',
      (lastId) => (lastId === undefined ? { ...q } : { ...q, replay: undefined }),
      opts,
    )) {
      if (ev.event === 'agent_output' || ev.event === 'agent_output.replay') {
        yield { type: ev.event, chunk: parseJsonData(ev) as AgentOutputChunk, id: ev.id };
      } else if (ev.event === 'agent_output.error') {
        yield { type: 'agent_output.error', error: parseJsonData(ev) as AgentOutputError, id: ev.id };
      }
    }
  }

  // ------------------------------------------------------------ Celld and provider capabilities (4.13)

  /** GET /api/v2/admin/hypervisor/capabilities: what each host's provider advertises, and each VM's. */
  hypervisorCapabilities(opts?: RequestOptions): Promise<CapabilitiesResponse> {
    return this.requestJson('GET', '/api/v2/admin/hypervisor/capabilities', undefined, opts);
  }

  celldStatus(opts?: RequestOptions): Promise<CelldStatus> {
    return this.requestJson('GET', '/api/v2/celld/status', undefined, opts);
  }

  celldValidate(doc: unknown, opts?: RequestOptions): Promise<ValidateReport> {
    return this.requestJson('POST', '/api/v2/celld/validate', doc, opts);
  }

  celldPreflight(doc?: CellCommandDocument, opts?: RequestOptions): Promise<PreflightReport> {
    return this.requestJson('POST', '/api/v2/celld/preflight', doc === undefined ? {} : { document: doc }, opts);
  }

  celldDiagnose(opts?: RequestOptions): Promise<DiagnoseReport> {
    return this.requestJson('POST', '/api/v2/celld/diagnose', {}, opts);
  }

  celldPlanUpgrade(to: string, opts?: RequestOptions): Promise<UpgradePlan> {
    return this.requestJson('POST', '/api/v2/celld/plan-upgrade', { to }, opts);
  }

  celldCell(cell: string, opts?: RequestOptions): Promise<CellState> {
    return this.requestJson('GET', `/api/v2/celld/cells/${seg(cell)}`, undefined, opts);
  }

  /** A cell command: 202 accepted, or the stored answer of a replay (`replayed: true`). */
  celldCommand(cell: string, doc: CellCommandDocument, opts?: RequestOptions): Promise<CellCommandAccepted> {
    return this.requestJson('POST', `/api/v2/celld/cells/${seg(cell)}/commands`, doc, opts);
  }

  /** The effect-ledger entry of a command: how a client whose answer was lost learns the outcome. */
  celldCommandRecord(cell: string, operationId: string, opts?: RequestOptions): Promise<CellCommandRecord> {
    return this.requestJson('GET', `/api/v2/celld/cells/${seg(cell)}/commands/${seg(operationId)}`, undefined, opts);
  }

  /** A generation-only reconcile: runs once, never replayed. */
  celldReconcile(cell: string, operationId: string, generation: number, opts?: RequestOptions): Promise<CellCommandAccepted> {
    return this.requestJson('POST', `/api/v2/celld/cells/${seg(cell)}/reconcile`, { operation_id: operationId, generation }, opts);
  }

  // ------------------------------------------------------------ missions and dispatch (4.16; README "Missions and dispatch")

  /** Registers an executor; the answer is the only one that ever holds its token. */
  registerExecutor(req: ExecutorRegisterRequest, opts?: RequestOptions): Promise<ExecutorRegistered> {
    return this.requestJson('POST', '/api/v2/executors', req, opts);
  }

  listExecutors(q: { agent_id?: string } = {}, opts?: RequestOptions): Promise<{ executors: Executor[] }> {
    return this.requestJson('GET', `/api/v2/executors${qs(q)}`, undefined, opts);
  }

  getExecutor(id: string, opts?: RequestOptions): Promise<Executor> {
    return this.requestJson('GET', `/api/v2/executors/${seg(id)}`, undefined, opts);
  }

  deleteExecutor(id: string, opts?: RequestOptions): Promise<{ executor_id: string; deleted: true }> {
    return this.requestJson('DELETE', `/api/v2/executors/${seg(id)}`, undefined, opts);
  }

  /** POST /api/v1/sessions/{id}/dispatch with the executor's bearer token. */
  dispatchMission(sessionId: string, token: string, req: DispatchRequest, opts: RequestOptions = {}): Promise<DispatchAccepted> {
    return this.requestJson('POST', `/api/v1/sessions/${seg(sessionId)}/dispatch`, req, {
      ...opts,
      headers: { ...opts.headers, authorization: `Bearer ${token}` },
    });
  }

  listMissions(q: { agent_id?: string; status?: string; limit?: number } = {}, opts?: RequestOptions): Promise<{ missions: Mission[] }> {
    return this.requestJson('GET', `/api/v2/missions${qs(q)}`, undefined, opts);
  }

  getMission(id: string, opts?: RequestOptions): Promise<Mission> {
    return this.requestJson('GET', `/api/v2/missions/${seg(id)}`, undefined, opts);
  }
  // ------------------------------------------------------------ aiwg bridge (4.16; README "Orchestration link and aiwg bridge")

  /** GET /api/v1/aiwg/status: the orchestration link's state. */
  aiwgStatus(opts?: RequestOptions): Promise<BridgeStatus> {
    return this.requestJson('GET', '/api/v1/aiwg/status', undefined, opts);
  }

  /** POST /api/v1/aiwg/reconnect: the link reconnects now; 409 aiwg.not_configured when standalone. */
  aiwgReconnect(opts?: RequestOptions): Promise<BridgeReconnect> {
    return this.requestJson('POST', '/api/v1/aiwg/reconnect', undefined, opts);
  }
  // A2A (README "A2A"): the artifact records of an instance's task (A2A-Version 0.3), its AgentCard.
  listA2aArtifacts(instanceId: string, taskId: string, opts?: RequestOptions): Promise<A2aArtifactList> {
    return this.requestJson('GET', `/agents/${seg(instanceId)}/v1/tasks/${seg(taskId)}/artifacts`, undefined, opts);
  }

  a2aAgentCard(instanceId: string, opts?: RequestOptions): Promise<Record<string, unknown>> {
    return this.requestJson('GET', `/agents/${seg(instanceId)}/.well-known/agent-card.json`, undefined, opts);
  }
}

/** A storage area: global, or an agent's inbox, or a task's outbox. */
export type StorageAreaRef = { area: 'global' } | { area: Exclude<StorageAreaName, 'global'>; owner: string };

/** `/api/v2/storage/global`, `/api/v2/storage/inbox/{agent}`, `/api/v2/storage/outbox/{task}`. */
export function storageArea(a: StorageAreaRef): string {
  return a.area === 'global' ? '/api/v2/storage/global' : `/api/v2/storage/${a.area}/${seg(a.owner)}`;
}

/** Names, each percent-encoded on its own (a `/` inside a name becomes %2F), joined with `/`. */
export function scopedPath(names: readonly string[]): string {
  return names.map(seg).join('/');
}

/** The X-Svc-* headers of an activity read. */
export function activityScopeHeaders(scope: ActivityReadScope): Record<string, string> {
  return {
    'x-svc-tenant-id': scope.tenant_id,
    'x-svc-host-id': scope.host_id,
    'x-svc-instance-id': scope.instance_id,
    'x-svc-agent-id': scope.agent_id,
  };
}
