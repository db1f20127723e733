/**
 * The fleet inventory and its reconcile (spec 4.13; README "Fleet inventory and reconcile").
 *
 * Observation keeps the observed side of every workload current:
 * - event-driven: every hypervisor lifecycle event (our own calls, the poller, virsh events)
 *   re-reads that one domain; every agents-registry change re-reads that one agent;
 * - a periodic sweep (SVC_FLEET_SWEEP_INTERVAL_SECONDS) lists every domain on every host, which
 *   catches what no event reported (a domain removed or defined behind sandboxd's back);
 * - GET /api/v2/fleet/workloads and a reconcile sweep first, so what they show or act on is as
 *   of the request.
 * An observation equal to the one held is no change (no new revision).
 *
 * The desired side follows the operations of the one store: a vm_delete or checkpoint_create that
 * completed drops its VM from the desired set; a create, restore or handoff that completed takes
 * its spec from the domain it made (profile, vcpus, memory, disk); one that failed drops it.
 * (The request hooks of intent-middleware.ts record what was asked, at the 202.)
 *
 * Adoption: the first successful sweep of a new inventory records every domain carrying
 * sandboxd's metadata as desired (origin `adopted`), so VMs made before this feature existed are
 * not taken for strays.
 *
 * Reconcile: one at a time (409 fleet.reconcile_in_progress), against the revision the caller
 * previewed (409 fleet.stale_inventory_revision otherwise), as a `fleet_reconcile` operation that
 * runs the plan's steps one after the other through the VM feature's own paths and completes with
 * every step's outcome and reason.
 */
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import { isTerminal, type OperationSnapshot } from '../core/operation-state.js';
import type { DomainInfo, HypervisorEvent, HypervisorPort } from '../hypervisor/port.js';
import type { OperationTracker } from '../operations/operation-tracker.js';
import { errorMessage } from '../util/error-message.js';
import type { CreateVmRequest } from '../vms/create-request.js';
import type { LifecycleAction } from '../vms/vm-controller.js';
import {
  RECONCILE_OUTCOMES,
  WORKLOAD_DRIFTS,
  type FleetWorkloadsResponse,
  type ObservedAgent,
  type ObservedDomain,
  type ReconcileOutcome,
  type ReconcilePlanJson,
  type ReconcilePlanStep,
  type ReconcileResultJson,
  type ReconcileStepResult,
  type WorkloadDrift,
  type WorkloadJson,
} from '../wire/fleet.js';
import { amendDesired, dropDesired } from './desired.js';
import { contentOf, type InventoryStore } from './inventory-store.js';
import type { FleetPort } from './port.js';
import { classify, content, workloadJson, type DesiredRecord, type ObservedRecord } from './records.js';

/** The agent fields the inventory reads from the agents registry. */
export interface FleetAgentView {
  readonly status: string;
  readonly instance_id: string;
}

/** What the fleet needs of the VM feature (its VmApi, the same paths the API takes). */
export interface FleetVms {
  /** Queues a VM create; resolves with its operation id. */
  create(req: CreateVmRequest): Promise<string>;
  lifecycle(name: string, action: LifecycleAction): Promise<unknown>;
  remove(name: string, opts: { force: boolean; deleteDisk: boolean }): Promise<unknown>;
}

export interface FleetServiceOptions {
  readonly store: InventoryStore;
  readonly hypervisor: Pick<HypervisorPort, 'list' | 'get' | 'onEvent'>;
  readonly agents: {
    get(agentId: string): FleetAgentView | undefined;
    subscribe(listener: (change: { kind: 'updated'; agent: { id: string } } | { kind: 'removed'; agentId: string }) => void): () => void;
  } | null;
  readonly operations: OperationTracker;
  readonly vms: FleetVms;
  readonly logger: Pick<Logger, 'info' | 'warn'>;
  /** Interval of the periodic sweep, ms; 0: none. */
  readonly sweepIntervalMs: number;
  /** How long a reconcile waits for one VM create, ms. Default 120 000. */
  readonly createTimeoutMs?: number;
  readonly now?: () => number;
}

const CREATE_LIKE = new Set(['vm_create', 'checkpoint_restore', 'warm_pool_handoff']);

export class FleetService implements FleetPort {
  readonly #o: FleetServiceOptions;
  readonly #store: InventoryStore;
  readonly #now: () => number;
  readonly #unsubscribe: (() => void)[] = [];
  /** VM create operations a reconcile started: their failure keeps the workload desired. */
  readonly #ownCreates = new Set<string>();
  #timer: NodeJS.Timeout | null = null;
  #chain: Promise<void> = Promise.resolve();
  #queued: Promise<void> | null = null;
  #lastSweepMs: number | null = null;
  #sweepError: string | null = null;
  #running: string | null = null;
  #stopped = false;

  constructor(o: FleetServiceOptions) {
    this.#o = o;
    this.#store = o.store;
    this.#now = o.now ?? Date.now;
  }

  /** Subscribes to the event sources, settles what a previous process left pending and starts the sweep. */
  start(): void {
    const o = this.#o;
    this.#unsubscribe.push(o.hypervisor.onEvent((e) => this.#onHypervisorEvent(e)));
    if (o.agents !== null) {
      this.#unsubscribe.push(o.agents.subscribe((c) => this.#observeAgent(c.kind === 'updated' ? c.agent.id : c.agentId)));
    }
    this.#unsubscribe.push(o.operations.store.subscribe((s) => this.#onOperation(s)));
    for (const r of this.#store.list()) {
      const pending = r.desired?.pendingOperationId ?? null;
      if (pending === null || this.#unfinished(pending)) continue;
      const held = o.operations.store.get(pending);
      if (held === undefined) amendDesired(this.#store, r.name, (d) => ({ ...d, pendingOperationId: null }));
      else this.#onOperation(held);
    }
    void this.refresh().catch((err: unknown) => o.logger.warn({ err: errorMessage(err) }, 'fleet: the first sweep failed'));
    if (o.sweepIntervalMs > 0) {
      this.#timer = setInterval(() => {
        void this.refresh().catch(() => undefined);
      }, o.sweepIntervalMs);
      this.#timer.unref();
    }
  }

  /** Stops observing (a running reconcile finishes its current step). Idempotent. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    for (const u of this.#unsubscribe.splice(0)) u();
  }

  /** After the request hooks recorded an intent: settles it at once when its operation already ended. */
  afterIntent(operationId: string): void {
    const s = this.#o.operations.store.get(operationId);
    if (s !== undefined && isTerminal(s.status)) this.#onOperation(s);
  }

  inventoryRevision(): number {
    return this.#store.revision();
  }

  workloads(): readonly WorkloadJson[] {
    const unfinished = (id: string): boolean => this.#unfinished(id);
    const busy = this.#busy();
    return this.#store.list().map((r) => workloadJson(r, unfinished, busy));
  }

  /** GET /api/v2/fleet/workloads: sweeps first (a failed sweep is reported, the held state shown). */
  async inventory(): Promise<FleetWorkloadsResponse> {
    await this.refresh().catch(() => undefined);
    const workloads = [...this.workloads()];
    const drift_counts = Object.fromEntries(WORKLOAD_DRIFTS.map((d) => [d, 0])) as Record<WorkloadDrift, number>;
    for (const w of workloads) drift_counts[w.drift]++;
    return {
      inventory_revision: this.#store.revision(),
      last_sweep_at: this.#lastSweepMs === null ? null : new Date(this.#lastSweepMs).toISOString(),
      sweep_error: this.#sweepError,
      workloads,
      total: workloads.length,
      drift_counts,
    };
  }

  plan(): ReconcilePlanJson {
    const unfinished = (id: string): boolean => this.#unfinished(id);
    const busy = this.#busy();
    return { inventory_revision: this.#store.revision(), steps: this.#store.list().map((r) => classify(r, unfinished, busy)) };
  }

  async startReconcile(req: {
    beforeRevision: number;
    dryRun: boolean;
    actor: string;
  }): Promise<{ operationId: string } | { plan: ReconcilePlanJson }> {
    await this.refresh();
    const current = this.#store.revision();
    if (req.beforeRevision !== current) {
      throw new SvcError(
        'fleet.stale_inventory_revision',
        `before_revision ${req.beforeRevision} is not the current inventory_revision ${current}: preview the inventory again`,
        { inventory_revision: current },
      );
    }
    const plan = this.plan();
    if (req.dryRun) return { plan };
    if (this.#running !== null) {
      throw new SvcError('fleet.reconcile_in_progress', `reconcile ${this.#running} is still running`, {
        operation_id: this.#running,
        retryAfterSeconds: 1,
      });
    }
    const op = this.#o.operations.begin('fleet_reconcile', 'fleet');
    this.#running = op.id;
    void this.#run(op, plan, req.actor).finally(() => {
      this.#running = null;
    });
    return { operationId: op.id };
  }

  /** Sweeps every host (coalesced: callers during a sweep share the next one). */
  refresh(): Promise<void> {
    if (this.#queued !== null) return this.#queued;
    const p = this.#chain.then(() => {
      this.#queued = null;
      return this.#sweep();
    });
    this.#queued = p;
    this.#chain = p.catch(() => undefined);
    return p;
  }

  async #run(op: ReturnType<OperationTracker['begin']>, plan: ReconcilePlanJson, actor: string): Promise<void> {
    op.start();
    const steps: ReconcileStepResult[] = [];
    const acting = plan.steps.filter((s) => s.action !== 'none').length;
    let done = 0;
    for (const s of plan.steps) {
      if (s.action === 'none') {
        steps.push({ ...s, outcome: 'left_alone', operation_id: null, error: null });
        continue;
      }
      let result: ReconcileStepResult;
      try {
        const r = await this.#act(s);
        result = { ...s, outcome: r.outcome, operation_id: r.operationId, error: null };
      } catch (err) {
        result = { ...s, outcome: 'failed', operation_id: null, error: errorMessage(err) };
      }
      steps.push(result);
      this.#noteReconcile(s.workload, op.id, result.outcome);
      op.progress((++done / acting) * 99);
    }
    await this.refresh().catch(() => undefined);
    const counts = Object.fromEntries(RECONCILE_OUTCOMES.map((k) => [k, 0])) as Record<ReconcileOutcome, number>;
    for (const s of steps) counts[s.outcome]++;
    const result: ReconcileResultJson = {
      before_revision: plan.inventory_revision,
      after_revision: this.#store.revision(),
      actor,
      steps,
      counts,
    };
    this.#o.logger.info({ operation: op.id, counts }, 'fleet reconcile finished');
    op.complete(result as unknown as Record<string, unknown>);
  }

  async #act(s: ReconcilePlanStep): Promise<{ outcome: ReconcileOutcome; operationId: string | null }> {
    const name = s.workload;
    switch (s.action) {
      case 'create': {
        const d = this.#store.get(name)?.desired;
        if (d === null || d === undefined) throw new SvcError('request.invalid', `workload '${name}' is no longer desired`);
        const opId = await this.#o.vms.create(createRequest(name, d));
        this.#ownCreates.add(opId);
        amendDesired(this.#store, name, (x) => ({ ...x, pendingOperationId: opId }));
        const final = await this.#o.operations.waitFor(opId, { timeoutMs: this.#o.createTimeoutMs ?? 120_000 });
        if (final.status === 'failed') throw new SvcError('PROVISIONING_ERROR', `create ${opId} failed: ${final.error ?? 'unknown'}`);
        return { outcome: 'created', operationId: opId };
      }
      case 'delete':
        await this.#o.vms.remove(name, { force: true, deleteDisk: false });
        return { outcome: 'deleted', operationId: null };
      case 'start':
        await this.#o.vms.lifecycle(name, 'start');
        return { outcome: 'started', operationId: null };
      case 'stop':
        await this.#o.vms.lifecycle(name, 'destroy');
        return { outcome: 'stopped', operationId: null };
      default:
        return { outcome: 'left_alone', operationId: null };
    }
  }

  #noteReconcile(name: string, operationId: string, outcome: ReconcileOutcome): void {
    this.#store.update(name, (held) =>
      held === undefined ? null : content(held.desired, held.observed, { operationId, outcome, atMs: this.#now() }),
    );
  }

  /** The unfinished operations by VM (their target), as of now; a reconcile's own target is no VM. */
  #busy(): (vm: string) => string | null {
    const byVm = new Map<string, string>();
    for (const s of this.#o.operations.store.unfinished()) if (s.type !== 'fleet_reconcile') byVm.set(s.target, s.id);
    return (vm) => byVm.get(vm) ?? null;
  }

  #unfinished(id: string): boolean {
    const s = this.#o.operations.store.get(id);
    return s !== undefined && !isTerminal(s.status);
  }

  /** The desired side follows the operations (see the file comment). */
  #onOperation(s: OperationSnapshot): void {
    if (!isTerminal(s.status)) return;
    const name = s.target;
    if ((s.type === 'vm_delete' || s.type === 'checkpoint_create') && s.status === 'completed') {
      dropDesired(this.#store, name);
      return;
    }
    if (!CREATE_LIKE.has(s.type)) return;
    const d = this.#store.get(name)?.desired;
    if (d === null || d === undefined || d.pendingOperationId !== s.id) return;
    const own = this.#ownCreates.delete(s.id);
    if (s.status === 'failed') {
      if (own) amendDesired(this.#store, name, (x) => ({ ...x, pendingOperationId: null }));
      else dropDesired(this.#store, name);
      return;
    }
    const checkpointId = typeof s.result?.['checkpoint_id'] === 'string' ? s.result['checkpoint_id'] : null;
    amendDesired(this.#store, name, (x) => ({ ...x, pendingOperationId: null, checkpointId: x.checkpointId ?? checkpointId }));
    void this.#o.hypervisor
      .get(name)
      .then((dom) => {
        if (dom !== null) {
          this.#applyDomainSpec(name, dom);
          this.#observe(name, dom);
        }
      })
      .catch(() => undefined);
  }

  /** A made workload's spec is what its domain got (a startup profile may have set the resources). */
  #applyDomainSpec(name: string, dom: DomainInfo): void {
    amendDesired(this.#store, name, (x) => ({
      ...x,
      profile: dom.metadata.profile ?? x.profile,
      vcpus: dom.vcpus,
      memoryMiB: dom.memoryMiB,
      diskGiB: dom.metadata.diskGiB ?? x.diskGiB,
      host: dom.host,
    }));
  }

  #onHypervisorEvent(e: HypervisorEvent): void {
    if (this.#stopped) return;
    if (e.type === 'vm.undefined') {
      this.#observe(e.vmName, null);
      return;
    }
    void this.#o.hypervisor
      .get(e.vmName)
      .then((dom) => this.#observe(e.vmName, dom))
      .catch(() => undefined);
  }

  #observeAgent(agentId: string): void {
    if (this.#stopped) return;
    const held = this.#store.get(agentId);
    if (held === undefined) return;
    this.#apply(held.name, held.observed.domain, this.#agentOf(held.name, held.observed.domain));
  }

  #agentOf(name: string, domain: ObservedDomain | null): ObservedAgent | null {
    const a = this.#o.agents?.get(name);
    if (a === undefined) return null;
    if (domain?.instance_id !== null && domain?.instance_id !== undefined && a.instance_id !== domain.instance_id) return null;
    return { connected: a.status !== 'Disconnected', status: a.status, instance_id: a.instance_id };
  }

  #observe(name: string, dom: DomainInfo | null): void {
    const domain = dom === null ? null : observedDomain(dom);
    this.#apply(name, domain, this.#agentOf(name, domain));
  }

  /** Records an observation of one workload (a change only when it differs from the one held). */
  #apply(name: string, domain: ObservedDomain | null, agent: ObservedAgent | null): void {
    this.#store.update(name, (held) => {
      const desired = held?.desired ?? null;
      if (desired === null && domain === null) return null;
      const before = held?.observed;
      const same = before !== undefined && JSON.stringify([before.domain, before.agent]) === JSON.stringify([domain, agent]);
      const observed: ObservedRecord = same ? before : { domain, agent, changedAtMs: this.#now() };
      const d: DesiredRecord | null =
        desired !== null && desired.host === null && domain !== null ? { ...desired, host: domain.host } : desired;
      const next = content(d, observed, held?.lastReconcile ?? null);
      return held !== undefined && same && d === desired ? contentOf(held) : next;
    });
  }

  async #sweep(): Promise<void> {
    if (this.#stopped) return;
    let domains: DomainInfo[];
    try {
      domains = await this.#o.hypervisor.list();
    } catch (err) {
      this.#sweepError = errorMessage(err);
      throw err;
    }
    this.#sweepError = null;
    this.#lastSweepMs = this.#now();
    const byName = new Map(domains.map((d) => [d.name, d]));
    if (!this.#store.adopted()) this.#adopt(domains);
    for (const d of domains) this.#observe(d.name, d);
    // list() leaves out hosts that did not answer: a domain is absent only when get() says so
    // (it rejects while a host that might have it is down), never because its host was silent —
    // else a reconcile would remake on another host a VM that still runs.
    const absent = this.#store.list().filter((r) => !byName.has(r.name) && r.observed.domain !== null);
    await Promise.all(
      absent.map(async (r) => {
        const dom = await this.#o.hypervisor.get(r.name).catch(() => undefined);
        if (dom !== undefined) this.#observe(r.name, dom);
      }),
    );
  }

  #adopt(domains: readonly DomainInfo[]): void {
    const now = this.#now();
    const adopted: string[] = [];
    for (const dom of domains) {
      if (dom.metadata.instanceId === undefined || this.#store.get(dom.name)?.desired) continue;
      const desired: DesiredRecord = {
        state: dom.state === 'running' || dom.state === 'paused' ? 'running' : 'stopped',
        profile: dom.metadata.profile ?? 'svc-dev',
        loadout: null,
        vcpus: dom.vcpus,
        memoryMiB: dom.memoryMiB,
        diskGiB: dom.metadata.diskGiB ?? 50,
        agentshare: dom.metadata.labels?.['sandboxd/agentshare'] !== 'false',
        host: dom.host,
        owner: { actor: null, mode: 'system' },
        labels: { 'sandboxd/adopted': 'first-sweep' },
        sinceMs: now,
        origin: 'adopted',
        operationId: null,
        checkpointId: null,
        pool: null,
        pendingOperationId: null,
      };
      this.#store.update(dom.name, (held) =>
        content(desired, held?.observed ?? { domain: null, agent: null, changedAtMs: null }, held?.lastReconcile ?? null),
      );
      adopted.push(dom.name);
    }
    this.#store.markAdopted();
    if (adopted.length > 0) this.#o.logger.info({ vms: adopted }, 'fleet: adopted the sandboxd VMs already present as desired');
  }
}

export function observedDomain(d: DomainInfo): ObservedDomain {
  return {
    state: d.state,
    uuid: d.uuid,
    host: d.host,
    vcpus: d.vcpus,
    memory_mb: d.memoryMiB,
    instance_id: d.metadata.instanceId ?? null,
    managed: d.metadata.instanceId !== undefined,
    labels: { ...(d.metadata.labels ?? {}) },
  };
}

/**
 * The create request that remakes a missing workload from its recorded spec (with its loadout,
 * where the VM feature takes one: startup profiles and loadouts, src/profiles).
 */
function createRequest(name: string, d: DesiredRecord): CreateVmRequest {
  const req = {
    name,
    profile: d.profile,
    vcpus: d.vcpus,
    memoryMiB: d.memoryMiB,
    diskGiB: d.diskGiB,
    agentshare: d.agentshare,
    start: d.state === 'running',
    enrollment: 'mtls',
    sshKeys: [],
    warnings: [],
    ...(d.loadout !== null && { loadout: d.loadout }),
  };
  return req as CreateVmRequest;
}
