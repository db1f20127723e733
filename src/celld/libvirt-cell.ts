/**
 * The libvirt cell: this server's hypervisor hosts (SVC_HYPERVISOR_URI; the embedded default is
 * libvirt's in-process `test:///default`) as one cell. Reads go to the hypervisor port and the
 * agent registry; per-VM effects go through the VM feature's lifecycle calls (the same queue,
 * events and local agents as POST /api/v1/vms/{name}/start|stop|destroy).
 */
import { existsSync } from 'node:fs';
import { totalmem } from 'node:os';
import { SvcError } from '../core/errors.js';
import type { ProviderCapabilities } from '../hypervisor/provider-capabilities.js';
import type { DomainInfo, HypervisorPort } from '../hypervisor/port.js';
import { isTestDriverUri, uriTransport } from '../hypervisor/uri.js';
import type { CheckResult, ProviderCapabilitySet } from '../wire/celld.js';
import type { CellBackend, CellObservation, ObservedVm, VmEffect, VmEffectResult } from './port.js';

/** What the libvirt cell reads and drives. */
export interface LibvirtCellDeps {
  readonly hypervisor: Pick<HypervisorPort, 'list' | 'health' | 'hosts'>;
  /** The agent registry: every known agent (id = VM name for sandboxd's VMs, instance_id its uuid). */
  readonly agents: () => readonly { readonly id: string; readonly status: string; readonly instance_id?: string }[];
  /** The VM feature's idempotent start/stop/destroy (absent: the cell cannot apply effects). */
  readonly lifecycle?: (name: string, action: VmEffect) => Promise<{ vm: { name: string; state: string }; message: string }>;
  /** The bound gRPC agent listener port, 0 when it is not listening. */
  readonly agentListenerPort: () => number;
  readonly capabilities: ProviderCapabilities;
  /** SVC_VM_BASE_IMAGE (qemu hosts need it). */
  readonly baseImage: string | null;
  readonly version: string;
}

const ALREADY = /already|not running|nothing to/i;

export class LibvirtCell implements CellBackend {
  readonly backendClass = 'libvirt';
  readonly #d: LibvirtCellDeps;

  constructor(deps: LibvirtCellDeps) {
    this.#d = deps;
  }

  runningVersion(): string {
    return this.#d.version;
  }

  providers(): ProviderCapabilitySet[] {
    return this.#d.capabilities.all();
  }

  agentListening(): boolean {
    return this.#d.agentListenerPort() > 0;
  }

  async health(): Promise<{ status: 'ok' | 'degraded' | 'down'; hosts: number }> {
    const h = await this.#d.hypervisor.health();
    return { status: h.status, hosts: h.hosts.length };
  }

  async observe(): Promise<CellObservation> {
    const [health, domains] = await Promise.all([this.#d.hypervisor.health(), this.#d.hypervisor.list()]);
    const agents = this.#d.agents();
    const byId = new Map(agents.map((a) => [a.id, a]));
    const byInstance = new Map(agents.filter((a) => a.instance_id !== undefined).map((a) => [a.instance_id, a]));
    const claimed = new Set<string>();
    const vms: ObservedVm[] = domains.map((d) => {
      const a = byId.get(d.name) ?? byInstance.get(d.metadata.instanceId ?? d.uuid);
      if (a !== undefined) claimed.add(a.id);
      return { name: d.name, state: d.state, memoryMiB: d.memoryMiB, agentStatus: a?.status ?? null };
    });
    return {
      observedAtMs: Date.now(),
      hypervisor: { status: health.status, hosts: health.hosts.length },
      vms,
      strayAgents: agents.filter((a) => !claimed.has(a.id)).map((a) => ({ id: a.id, status: a.status })),
    };
  }

  async preflight(targets: readonly string[]): Promise<CheckResult[]> {
    const checks: CheckResult[] = [];
    const health = await this.#d.hypervisor.health();
    checks.push({
      name: 'hypervisor',
      status: health.status === 'ok' ? 'pass' : health.status === 'degraded' ? 'warn' : 'fail',
      detail: `${health.hosts.filter((h) => h.status === 'ok').length} of ${health.hosts.length} host(s) answer`,
    });
    checks.push({
      name: 'agent_listener',
      status: this.agentListening() ? 'pass' : 'fail',
      detail: this.agentListening()
        ? 'the agent listener (gRPC, mTLS) accepts connections'
        : 'the agent listener is not listening: agents cannot connect',
    });
    const domains = health.status === 'down' ? [] : await this.#d.hypervisor.list();
    checks.push(this.#images(domains));
    checks.push(...this.#targets(domains, targets));
    return checks;
  }

  async apply(effect: VmEffect, vm: string): Promise<VmEffectResult> {
    if (this.#d.lifecycle === undefined) throw new SvcError('server.unavailable', 'this cell has no VM feature to apply effects with');
    const r = await this.#d.lifecycle(vm, effect);
    return { vm, outcome: ALREADY.test(r.message) ? 'already' : 'changed', state: r.vm.state };
  }

  /** qemu hosts boot overlays of SVC_VM_BASE_IMAGE; test-driver VMs boot nothing. */
  #images(domains: readonly DomainInfo[]): CheckResult {
    const hosts = this.#d.hypervisor.hosts();
    const qemu = hosts.filter((h) => !isTestDriverUri(h));
    if (qemu.length === 0) return { name: 'images', status: 'skip', detail: 'test-driver hosts boot no image' };
    const image = this.#d.baseImage;
    if (image === null)
      return { name: 'images', status: 'fail', detail: `SVC_VM_BASE_IMAGE is not set; ${qemu.length} qemu host(s) need it` };
    const remote = qemu.filter((h) => !['', 'unix'].includes(uriTransport(h))).length;
    if (!existsSync(image)) return { name: 'images', status: 'fail', detail: 'SVC_VM_BASE_IMAGE names no readable file on this host' };
    return {
      name: 'images',
      status: remote > 0 ? 'warn' : 'pass',
      detail: `the base image is present on this host${remote > 0 ? `; ${remote} remote host(s) not checked` : ''} (${domains.length} VM(s) defined)`,
    };
  }

  /** Each named VM exists; starting the stopped ones fits in this host's memory. */
  #targets(domains: readonly DomainInfo[], targets: readonly string[]): CheckResult[] {
    const byName = new Map(domains.map((d) => [d.name, d]));
    const missing = targets.filter((t) => !byName.has(t));
    const out: CheckResult[] = [];
    if (targets.length > 0) {
      out.push({
        name: 'targets',
        status: missing.length === 0 ? 'pass' : 'fail',
        detail: missing.length === 0 ? `all ${targets.length} VM(s) exist` : `no VM named ${missing.slice(0, 5).join(', ')}`,
      });
    }
    const runningMiB = domains.filter((d) => d.state === 'running').reduce((s, d) => s + d.memoryMiB, 0);
    const startingMiB = targets
      .map((t) => byName.get(t))
      .filter((d): d is DomainInfo => d !== undefined && d.state !== 'running')
      .reduce((s, d) => s + d.memoryMiB, 0);
    const hostMiB = Math.floor(totalmem() / 1024 / 1024);
    const want = runningMiB + startingMiB;
    out.push({
      name: 'capacity',
      status: want <= hostMiB ? 'pass' : 'warn',
      detail: `${want} MiB of running VMs after this command (${startingMiB} MiB to start), ${hostMiB} MiB on this host${want > hostMiB ? ' (overcommitted)' : ''}`,
    });
    return out;
  }
}
