/**
 * Runs the steps VM queue actors ask for (actors/protocol/vm-frames.ts), on the main thread where the
 * libvirt binding lives. Lifecycle steps are idempotent where the spec wants it: starting a
 * running VM, or stopping/destroying one that is not running, reports `already` instead of
 * failing (the port is strict; its VM_RUNNING / VM_NOT_RUNNING mean "already there").
 */
import { SvcError } from '../core/errors.js';
import type { DomainInfo, HypervisorPort } from '../hypervisor/port.js';
import type { CreateParams, StepRequest, StepResult } from '../../actors/protocol/vm-frames.js';
import type { Provisioner } from './provisioner.js';

/** How often waitStopped looks at the VM, ms. */
const STOP_POLL_MS = 500;

export class StepExecutor {
  readonly #hv: HypervisorPort;
  readonly #prov: Provisioner;

  constructor(hypervisor: HypervisorPort, provisioner: Provisioner) {
    this.#hv = hypervisor;
    this.#prov = provisioner;
  }

  /** Runs one step; rejects with an SvcError (the job then fails with its code and message). */
  async run(req: StepRequest, signal: AbortSignal): Promise<StepResult> {
    const vm = req.vm;
    const a = req.args;
    switch (req.step) {
      case 'check':
        return this.#check(vm, a['require'] === 'running', signal);
      case 'define':
        return this.#prov.define(vm, a as unknown as CreateParams, signal);
      case 'start':
        return this.#idempotent(vm, 'VM_RUNNING', () => this.#hv.startDomain(vm, { signal }), signal);
      case 'shutdown':
        return this.#idempotent(vm, 'VM_NOT_RUNNING', () => this.#hv.shutdownDomain(vm, { signal }), signal);
      case 'destroy':
        return this.#idempotent(vm, 'VM_NOT_RUNNING', () => this.#hv.destroyDomain(vm, { signal }), signal);
      case 'waitStopped':
        return this.#waitStopped(vm, num(a['timeoutMs'], 60_000), signal);
      case 'undefine': {
        const { disks } = await this.#hv.describe(vm, { signal });
        await this.#hv.undefine(vm, { force: a['force'] === true, signal });
        return { disks };
      }
      case 'purgeFiles':
        return this.#prov.purge(
          vm,
          a['deleteDisk'] === true,
          Array.isArray(a['disks']) ? a['disks'].filter((d): d is string => typeof d === 'string') : [],
        );
      case 'agentUp':
        return this.#prov.agentUp(vm, a['restart'] === true, signal);
      case 'agentDown':
        return this.#prov.agentDown(vm);
      case 'agentWait':
        return this.#prov.agentWait(vm, num(a['sinceMs'], 0), req.timeoutMs, signal);
      default:
        throw new SvcError('server.internal', `unknown VM step ${String(req.step)}`);
    }
  }

  async #check(vm: string, requireRunning: boolean, signal: AbortSignal): Promise<StepResult> {
    const info = await this.#hv.get(vm, { signal });
    if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
    if (requireRunning && info.state !== 'running') throw new SvcError('VM_NOT_RUNNING', `VM '${vm}' is ${info.state}, not running`);
    return stepResultOf(info);
  }

  async #idempotent(
    vm: string,
    alreadyCode: 'VM_RUNNING' | 'VM_NOT_RUNNING',
    call: () => Promise<DomainInfo>,
    signal: AbortSignal,
  ): Promise<StepResult> {
    try {
      return { ...stepResultOf(await call()), already: false };
    } catch (err) {
      if (!(err instanceof SvcError) || err.code !== alreadyCode) throw err;
      const info = await this.#hv.get(vm, { signal });
      if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
      return { ...stepResultOf(info), already: true };
    }
  }

  async #waitStopped(vm: string, timeoutMs: number, signal: AbortSignal): Promise<StepResult> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const info = await this.#hv.get(vm, { signal });
      if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' disappeared while shutting down`);
      if (info.state === 'stopped' || info.state === 'crashed') return { ...stepResultOf(info), stopped: true };
      if (Date.now() >= deadline) return { ...stepResultOf(info), stopped: false };
      await new Promise<void>((resolve) => setTimeout(resolve, Math.min(STOP_POLL_MS, Math.max(0, deadline - Date.now()))).unref());
    }
  }
}

function stepResultOf(info: DomainInfo): StepResult {
  return { state: info.state, managed: info.metadata.instanceId !== undefined };
}

function num(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : fallback;
}
