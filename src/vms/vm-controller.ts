/**
 * What the VM routes do (spec 4.3), independent of HTTP: reads go straight to the hypervisor
 * port; every change goes through the VM's queue actor (vm-ops-bridge.ts), so changes to one VM
 * apply one at a time, in order.
 *
 * Decisions the spec leaves open:
 * - start/stop/destroy on an unknown VM: 404 VM_NOT_FOUND (idempotency covers the VM's state,
 *   not its existence).
 * - stop answers state `shutdown` when it initiated a shutdown (the spec's wording; the guest
 *   may take a while), and the actual state when the VM was not running.
 * - start/stop/destroy/delete wait for their job (they answer 200 with the outcome); create,
 *   restart and deploy-agent answer 202 at once with the pending operation.
 * - list `state=stopped` means not running: stopped or crashed.
 */
import { randomUUID } from 'node:crypto';
import { SvcError, fromWire } from '../core/errors.js';
import type { HypervisorPort, VmState } from '../hypervisor/port.js';
import { operationJson } from '../core/operation-state.js';
import { publicTypeOf, type JobParams } from '../../actors/protocol/vm-frames.js';
import type { AgentLookup } from './agent-lookup.js';
import type { CreateVmRequest, RestartRequest } from './create-request.js';
import type { JobSnapshot, VmOpsBridge } from './vm-ops-bridge.js';
import type { OperationAccepted, VmDeleteResult, VmDetail, VmLifecycleResult, VmList } from '../wire/vms.js';
import { vmDetailJson, vmJson } from './vm-view.js';

export type ListStateFilter = 'running' | 'stopped' | 'all';
export type LifecycleAction = 'start' | 'stop' | 'destroy';

/** The VM operations the routes call. */
export interface VmApi {
  list(q: { state: ListStateFilter; prefix: string }): Promise<VmList>;
  detail(name: string): Promise<VmDetail>;
  create(req: CreateVmRequest): Promise<OperationAccepted>;
  lifecycle(name: string, action: LifecycleAction): Promise<VmLifecycleResult>;
  restart(name: string, req: RestartRequest): Promise<OperationAccepted>;
  remove(name: string, opts: { force: boolean; deleteDisk: boolean }): Promise<VmDeleteResult>;
  deployAgent(name: string): Promise<OperationAccepted>;
}

const STATES_OF: Record<ListStateFilter, readonly VmState[] | undefined> = {
  running: ['running'],
  stopped: ['stopped', 'crashed'],
  all: undefined,
};

export class VmController implements VmApi {
  readonly #hv: HypervisorPort;
  readonly #bridge: VmOpsBridge;
  readonly #agents: AgentLookup;
  readonly #syncTimeoutMs: number;

  /** @param syncTimeoutMs how long the synchronous routes wait for their job before 503 server.timeout. */
  constructor(opts: { hypervisor: HypervisorPort; bridge: VmOpsBridge; agents: AgentLookup; syncTimeoutMs: number }) {
    this.#hv = opts.hypervisor;
    this.#bridge = opts.bridge;
    this.#agents = opts.agents;
    this.#syncTimeoutMs = opts.syncTimeoutMs;
  }

  async list(q: { state: ListStateFilter; prefix: string }): Promise<VmList> {
    const states = STATES_OF[q.state];
    const domains = await this.#hv.list({ prefix: q.prefix, ...(states !== undefined ? { states } : {}) });
    const vms = domains.map((d) => vmJson(d, this.#agents.byVm(d.name, d.metadata.instanceId ?? null)));
    return { vms, total: vms.length };
  }

  async detail(name: string): Promise<VmDetail> {
    const d = await this.#hv.get(name);
    if (d === null) throw notFound(name);
    return vmDetailJson(d, this.#agents.byVm(d.name, d.metadata.instanceId ?? null));
  }

  async create(req: CreateVmRequest): Promise<OperationAccepted> {
    const params: JobParams = {
      kind: 'create',
      create: {
        uuid: randomUUID(),
        vcpus: req.vcpus,
        memoryMiB: req.memoryMiB,
        diskGiB: req.diskGiB,
        profile: req.profile,
        agentshare: req.agentshare,
        start: req.start,
        enrollment: req.enrollment,
        sshKeys: req.sshKeys,
        ...(req.loadout !== undefined && { loadout: req.loadout }),
      },
    };
    const env = await this.#accept(req.name, params);
    return req.warnings.length > 0 ? { ...env, warnings: req.warnings } : env;
  }

  async lifecycle(name: string, action: LifecycleAction): Promise<VmLifecycleResult> {
    const final = await this.#runToEnd(name, { kind: action });
    const r = final.result ?? {};
    const vm = (r['vm'] ?? { name, state: 'unknown' }) as { name: string; state: string };
    const already = r['already'] === true;
    if (action === 'start') return { vm, message: already ? `VM '${name}' is already running` : `VM '${name}' started` };
    if (action === 'stop') {
      return already
        ? { vm, message: `VM '${name}' is not running (${vm.state}); nothing to shut down` }
        : { vm: { name, state: 'shutdown' }, message: `graceful shutdown initiated for VM '${name}' (ACPI)` };
    }
    return { vm, message: already ? `VM '${name}' is already stopped` : `VM '${name}' was forcibly stopped (destroyed)` };
  }

  restart(name: string, req: RestartRequest): Promise<OperationAccepted> {
    return this.#accept(name, { kind: 'restart', mode: req.mode, gracefulTimeoutMs: req.timeoutSeconds * 1000 });
  }

  async remove(name: string, opts: { force: boolean; deleteDisk: boolean }): Promise<VmDeleteResult> {
    const final = await this.#runToEnd(name, { kind: 'delete', force: opts.force, deleteDisk: opts.deleteDisk });
    const r = final.result ?? {};
    return { deleted: r['deleted'] === true, name, disk_deleted: r['disk_deleted'] === true };
  }

  deployAgent(name: string): Promise<OperationAccepted> {
    return this.#accept(name, { kind: 'deploy_agent' });
  }

  /**
   * The name of the VM agent `agentId` runs in: the VM of that name, or the VM whose instance id
   * it is. VM_NOT_FOUND when no VM runs that agent.
   */
  async vmOfAgent(agentId: string): Promise<string> {
    const vm = (await this.#hv.get(agentId)) ?? (await this.#hv.list()).find((d) => d.metadata.instanceId === agentId);
    if (vm === undefined) throw new SvcError('VM_NOT_FOUND', `no VM runs agent '${agentId}'`);
    return vm.name;
  }

  async #observe(name: string): Promise<{ exists: boolean; state: VmState | null }> {
    const d = await this.#hv.get(name);
    return { exists: d !== null, state: d?.state ?? null };
  }

  async #accept(name: string, params: JobParams): Promise<OperationAccepted> {
    const { job } = await this.#bridge.submit(name, params, await this.#observe(name));
    const type = publicTypeOf(job.type);
    if (type === null) throw new SvcError('server.internal', `job ${job.type} is not an operation`);
    return { operation: operationJson({ ...job, type }), vm: null };
  }

  async #runToEnd(name: string, params: JobParams): Promise<JobSnapshot> {
    const { job, done } = await this.#bridge.submit(name, params, await this.#observe(name));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new SvcError(
              'server.timeout',
              `${job.id} on VM '${name}' did not finish within ${this.#syncTimeoutMs} ms; it is still queued or running`,
            ),
          ),
        this.#syncTimeoutMs,
      );
      timer.unref();
    });
    try {
      const final = await Promise.race([done, timeout]);
      if (final.status === 'failed')
        throw final.error !== null ? fromWire(final.error) : new SvcError('server.internal', `${job.id} failed`);
      return final;
    } finally {
      clearTimeout(timer);
    }
  }
}

function notFound(name: string): SvcError {
  return new SvcError('VM_NOT_FOUND', `VM '${name}' not found`);
}
