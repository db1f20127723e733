/**
 * What each hypervisor provider advertises (spec 4.13: snapshot, checkpoint, fork and warm-pool
 * actions exist only when the selected provider advertises the capability). The provider of a VM
 * is the libvirt driver of the host it lives on; what it advertises is what sandboxd really does on
 * that kind of host, not what libvirt could do:
 *
 * | provider | checkpoint | warm_pool | snapshot | fork |
 * |---|---|---|---|---|
 * | test, this host (`test:///…`) | yes: libvirt save/restore of the in-process driver | yes (pools hold checkpoints) | no | no |
 * | qemu on this host (`qemu:///…`, `qemu+unix`) | yes when SVC_BOOTSTRAP_CONSUME_URL is set (restored guests enroll through it) | like checkpoint | no | no |
 * | any remote host (`+ssh`, `+tcp`, `+tls`, …) | no: save images and overlays are written on this host | no | no | no |
 * | other drivers | no | no | no | no |
 *
 * snapshot and fork are advertised by no provider: sandboxd implements neither (a pre-enrollment
 * checkpoint is single-use by design, so a restore is not a fork). An operator can withhold more
 * (SVC_HYPERVISOR_WITHHELD_CAPABILITIES), never add what a provider lacks.
 */
import { SvcError } from '../core/errors.js';
import { PROVIDER_CAPABILITIES, type ProviderCapability, type ProviderCapabilitySet } from '../wire/celld.js';
import type { HypervisorPort } from './port.js';
import { uriDriver, uriTransport } from './uri.js';

export type { ProviderCapability, ProviderCapabilitySet };

export interface ProviderCapabilityOptions {
  /** SVC_BOOTSTRAP_CONSUME_URL (null when unset): qemu checkpoints need it. */
  readonly guestConsumeUrl: string | null;
  /** SVC_HYPERVISOR_WITHHELD_CAPABILITIES. */
  readonly withheld: readonly ProviderCapability[];
}

const LOCAL_TRANSPORTS = new Set(['', 'unix']);
const NOT_IMPLEMENTED = 'sandboxd implements no such action on any provider';

/** The capability set of one host, from its (redacted) URI. */
export function capabilitiesOfHost(host: string, index: number, opts: ProviderCapabilityOptions): ProviderCapabilitySet {
  const provider = uriDriver(host) || 'unknown';
  const local = LOCAL_TRANSPORTS.has(uriTransport(host));
  const reasons: Partial<Record<ProviderCapability, string>> = { snapshot: NOT_IMPLEMENTED, fork: NOT_IMPLEMENTED };
  let checkpoint = false;
  if (!local) reasons.checkpoint = 'save images and disk overlays are written on this host; a remote host cannot use them';
  else if (provider === 'test') checkpoint = true;
  else if (provider === 'qemu' || provider === 'kvm') {
    checkpoint = opts.guestConsumeUrl !== null;
    if (!checkpoint) reasons.checkpoint = 'restored qemu guests enroll through SVC_BOOTSTRAP_CONSUME_URL, which is not set';
  } else reasons.checkpoint = `no checkpoint support for the ${provider} driver`;
  const capabilities: Record<ProviderCapability, boolean> = { snapshot: false, checkpoint, fork: false, warm_pool: checkpoint };
  if (!checkpoint) reasons.warm_pool = 'warm pools hold checkpoints, which this provider does not advertise';
  for (const c of opts.withheld) {
    if (capabilities[c]) {
      capabilities[c] = false;
      reasons[c] = 'withheld by SVC_HYPERVISOR_WITHHELD_CAPABILITIES';
    }
  }
  if (!capabilities.checkpoint && capabilities.warm_pool) {
    capabilities.warm_pool = false;
    reasons.warm_pool = 'warm pools hold checkpoints, which are withheld';
  }
  return { provider, host_index: index, capabilities, reasons };
}

/** The capability sets of a hypervisor's hosts, and the refusal of an action a host lacks. */
export class ProviderCapabilities {
  readonly #hv: Pick<HypervisorPort, 'hosts' | 'get' | 'list'>;
  readonly #opts: ProviderCapabilityOptions;

  constructor(hypervisor: Pick<HypervisorPort, 'hosts' | 'get' | 'list'>, opts: ProviderCapabilityOptions) {
    this.#hv = hypervisor;
    this.#opts = opts;
  }

  /** One set per configured host, in configuration order. */
  all(): ProviderCapabilitySet[] {
    return this.#hv.hosts().map((h, i) => capabilitiesOfHost(h, i, this.#opts));
  }

  /** The set of the host with this (redacted) URI; an unknown host advertises nothing. */
  ofHost(host: string): ProviderCapabilitySet {
    const i = this.#hv.hosts().indexOf(host);
    return capabilitiesOfHost(i < 0 ? 'unknown:' : host, i, this.#opts);
  }

  /** Names of what the host advertises. */
  advertised(host: string): ProviderCapability[] {
    const set = this.ofHost(host);
    return PROVIDER_CAPABILITIES.filter((c) => set.capabilities[c]);
  }

  /** Each VM's advertised capabilities, by name. */
  async byVm(): Promise<Record<string, ProviderCapability[]>> {
    const out: Record<string, ProviderCapability[]> = {};
    for (const d of await this.#hv.list()) out[d.name] = this.advertised(d.host);
    return out;
  }

  /** Throws 409 provider.capability_unavailable when the host does not advertise `capability`. */
  require(host: string, capability: ProviderCapability): void {
    const set = this.ofHost(host);
    if (set.capabilities[capability]) return;
    throw new SvcError(
      'provider.capability_unavailable',
      `the ${set.provider} provider of this host does not advertise ${capability}: ${set.reasons[capability] ?? 'not supported'}`,
      { capability, provider: set.provider },
    );
  }

  /** The same for the host a VM lives on (VM_NOT_FOUND when there is none). */
  async requireForVm(vm: string, capability: ProviderCapability): Promise<void> {
    const info = await this.#hv.get(vm);
    if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
    this.require(info.host, capability);
  }
}
