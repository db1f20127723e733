/**
 * The hypervisor port: everything sandboxd asks of a hypervisor, in one interface. It has one
 * implementation, libvirt (src/hypervisor/libvirt/), whose in-process test driver
 * (`test:///default`) is the embedded default and the hypervisor of the tests: there is no
 * home-made fake behind this interface.
 *
 * Conventions every implementation keeps:
 * - Every method that returns a promise rejects (never throws) with an SvcError:
 *   VM_NOT_FOUND, VM_ALREADY_EXISTS, VM_RUNNING, VM_NOT_RUNNING for domain state,
 *   HYPERVISOR_UNAVAILABLE (with `details.retryAfterSeconds`) when a host is down, too slow or
 *   its circuit is open, LIBVIRT_ERROR for any other hypervisor failure (libvirt's message),
 *   request.invalid for a bad spec or an unknown host.
 * - Names are unique across all hosts; a VM lives on exactly one host.
 * - Lifecycle calls are strict (starting a running VM is VM_RUNNING): callers that want the
 *   spec's idempotent start/stop/destroy treat that code as "already there", race-free.
 * - Every state change the port makes is reported to `onEvent` listeners once, with its reason;
 *   changes made behind sandboxd's back are reported by the implementation's event source.
 */
import type { VmEventType } from '../wire/events.js';
import type { VmState } from '../wire/vms.js';

/** The spec's VM states (part 2): declared with the API's wire shapes (src/wire/vms.ts). */
export { VM_STATES } from '../wire/vms.js';
export type { VmState };

/** The spec's VM lifecycle event types (part 6): declared with the API's wire shapes (src/wire/events.ts). */
export { VM_EVENT_TYPES } from '../wire/events.js';
export type { VmEventType };

/** What sandboxd records in a domain's `<metadata>` (and reads back). */
export interface DomainMetadata {
  /** Provisioning profile (spec: svc-dev or basic). */
  profile?: string;
  /** Disk size asked for at creation, GiB. */
  diskGiB?: number;
  /** The agent's instance id (usually the VM uuid). */
  instanceId?: string;
  /** Static address assigned at provisioning, if any; shown as the VM's ip_address. */
  ipAddress?: string;
  /** What the domain was defined to run on (qemu hosts): `kvm` or `tcg`. Written by the hypervisor. */
  accelerator?: 'kvm' | 'tcg';
  /** Free-form labels (bounded by the caller). */
  labels?: Readonly<Record<string, string>>;
}

/** One VM as the hypervisor sees it. */
export interface DomainInfo {
  readonly name: string;
  readonly uuid: string;
  readonly state: VmState;
  readonly vcpus: number;
  /** Configured (maximum) memory, MiB. */
  readonly memoryMiB: number;
  /** The host URI the VM lives on (redacted: no password, no secret query values). */
  readonly host: string;
  /**
   * Seconds since sandboxd saw the VM start; null when it is not running or was already running
   * when sandboxd first saw it (libvirt's binding exposes no boot time).
   */
  readonly uptimeSeconds: number | null;
  /** From the metadata (static assignment); null when unknown. The agent reports the live one. */
  readonly ipAddress: string | null;
  /** What sandboxd wrote into the domain's metadata; empty for foreign domains. */
  readonly metadata: Readonly<DomainMetadata>;
}

/** A disk attached to a qemu/kvm domain. */
export interface DiskSpec {
  /** Host path of the image (a qcow2 overlay for the root disk). */
  path: string;
  /** Default qcow2. */
  format?: 'qcow2' | 'raw';
  /** A cloud-init seed or a shared tools disk is attached read-only (raw, virtio; no cdrom bus needed). */
  readOnly?: boolean;
}

/** Devices and boot of a qemu/kvm domain; ignored on test-driver hosts. */
export interface QemuDomainSpec {
  /** Disks in order (the first is vda); the root disk first. */
  disks?: readonly DiskSpec[];
  /** libvirt network to attach one virtio NIC to; none when omitted. */
  network?: string;
  /** Default: derived from the name (52:54:00:xx:xx:xx), so a re-created VM keeps its MAC/lease. */
  macAddress?: string;
  /** virtio-vsock with this guest CID (3 or more); none when omitted. */
  vsockCid?: number;
  /** Serial console (ttyS0) appended to this file; a pty when omitted. */
  serialLogPath?: string;
  /** Direct kernel boot (image build output); boots from the first disk when omitted. */
  kernel?: { path: string; initrdPath?: string; cmdline?: string };
  /** fw_cfg entries read by the guest (name → host file; never inline values, they land on the command line). */
  fwCfgFiles?: Readonly<Record<string, string>>;
  /** TCG translation cache cap, MiB (type qemu only). */
  tcgCacheMiB?: number;
  /** Default pc. */
  machine?: 'pc' | 'q35';
  /**
   * Host directories shared into the guest over virtio-9p (`<filesystem accessmode='mapped'>`,
   * works under TCG and KVM without a daemon), each mounted by the guest with its tag (at most
   * 31 characters: the 9p mount_tag limit). The agent share's inbox and outbox (src/storage/agentshare.ts).
   */
  shares?: readonly { readonly hostPath: string; readonly tag: string; readonly readOnly?: boolean }[];
}

/** What `define` needs. Values are escaped when they become XML. */
export interface DomainSpec {
  /** 1-64 characters of [A-Za-z0-9_.+-] (the API narrows it to ^agent-[a-z0-9-]+$). */
  name: string;
  /** Generated when omitted. */
  uuid?: string;
  /** 1-256. */
  vcpus: number;
  /** 16 MiB - 4 TiB. */
  memoryMiB: number;
  metadata?: DomainMetadata;
  qemu?: QemuDomainSpec;
}

export interface ListOptions {
  /** Only VMs whose names start with this (no wildcard; '' or omitted = all). */
  prefix?: string;
  /** Only VMs in these states. */
  states?: readonly VmState[];
  /** Only this host. */
  host?: string;
}

/** Where a lifecycle event came from. */
export type EventSource = 'sandboxd' | 'poller' | 'virsh-event';

/** A VM lifecycle event (becomes a v1 event record with vm_name, see toEventRecordInput). */
export interface HypervisorEvent {
  readonly type: VmEventType;
  readonly vmName: string;
  readonly uuid: string | null;
  readonly host: string;
  /** libvirt-style detail: booted, shutdown, destroyed, crashed, paused, unpaused, added, removed, ... or unknown. */
  readonly reason: string;
  readonly source: EventSource;
  /** State after the change (null once undefined). */
  readonly state: VmState | null;
  readonly previousState: VmState | null;
  /** Uptime when it stopped/rebooted (seconds), when known. */
  readonly uptimeSeconds: number | null;
  readonly timestampMs: number;
}

export type HypervisorEventListener = (event: HypervisorEvent) => void;

export type CircuitState = 'closed' | 'open' | 'half-open';

export interface HostHealth {
  readonly host: string;
  readonly status: 'ok' | 'down';
  readonly circuit: CircuitState;
  /** Round trip of the probe, ms (null when not probed or failed). */
  readonly latencyMs: number | null;
  /** Set when down. */
  readonly error?: { code: string; message: string };
  /** Set when down: when a retry may succeed. */
  readonly retryAfterSeconds?: number;
  /** qemu hosts: the accelerator new VMs get (`kvm`, or `tcg` without usable KVM) and why; null on test-driver hosts. */
  readonly accelerator: 'kvm' | 'tcg' | null;
  readonly acceleratorReason: string | null;
}

export interface HypervisorHealth {
  /** ok: every host answered within the read budget; degraded: some did; down: none did. */
  readonly status: 'ok' | 'degraded' | 'down';
  /** The host URIs, comma-separated (redacted). */
  readonly hypervisor: string;
  readonly hosts: readonly HostHealth[];
  /** The worst circuit among the hosts. */
  readonly circuit: CircuitState;
  /** Set when down: the soonest a retry may succeed. */
  readonly retryAfterSeconds?: number;
}

export interface HypervisorCapabilities {
  /** The binding exposes no snapshot calls. */
  readonly snapshots: boolean;
  readonly managedSave: boolean;
  /** How changes made outside sandboxd are noticed. */
  readonly events: 'callbacks' | 'polling' | 'polling+virsh-event';
}

/** Options of a single lifecycle call. */
export interface CallOptions {
  /** Abort waiting (the hypervisor call itself cannot be cancelled; its result is dropped). */
  signal?: AbortSignal;
}

export interface HypervisorPort {
  /** Opens every host connection (failures are reported by health(), not thrown) and starts the event source. Idempotent. */
  start(): Promise<void>;
  /** Stops the event source and closes connections, within the write budget. Idempotent. */
  stop(): Promise<void>;
  /** The configured host URIs (redacted), in configuration order. */
  hosts(): readonly string[];
  capabilities(): HypervisorCapabilities;

  /** Every VM on every reachable host. Rejects HYPERVISOR_UNAVAILABLE only when no host answered. */
  list(opts?: ListOptions): Promise<DomainInfo[]>;
  /** One VM, or null when no host has it. Rejects HYPERVISOR_UNAVAILABLE when a host that might have it is down. */
  get(name: string, opts?: CallOptions): Promise<DomainInfo | null>;
  /** One VM's disks (host paths, for delete_disk) and MACs, from its XML. VM_NOT_FOUND when missing. */
  describe(name: string, opts?: CallOptions): Promise<{ info: DomainInfo; disks: string[]; macAddresses: string[] }>;

  /** Defines (does not start) a VM on `host`, or on the reachable host with the fewest VMs. VM_ALREADY_EXISTS when the name is taken on any host. */
  define(spec: DomainSpec, opts?: CallOptions & { host?: string }): Promise<DomainInfo>;
  /** Starts a defined VM (a crashed one is reset first). VM_RUNNING when it is already active. */
  startDomain(name: string, opts?: CallOptions): Promise<DomainInfo>;
  /** Asks the guest to power off (ACPI). VM_NOT_RUNNING when it is not active. */
  shutdownDomain(name: string, opts?: CallOptions): Promise<DomainInfo>;
  /** Powers off at once. VM_NOT_RUNNING when it is not active. */
  destroyDomain(name: string, opts?: CallOptions): Promise<DomainInfo>;
  /** Pauses the vCPUs. VM_NOT_RUNNING when not running. */
  suspendDomain(name: string, opts?: CallOptions): Promise<DomainInfo>;
  /** Unpauses (or wakes a PM-suspended guest). VM_RUNNING when not paused/suspended. */
  resumeDomain(name: string, opts?: CallOptions): Promise<DomainInfo>;
  /** Removes the definition (disks stay). VM_RUNNING when active unless `force`, which destroys it first. */
  undefine(name: string, opts?: CallOptions & { force?: boolean }): Promise<void>;
  /**
   * Saves a running VM's memory and device state into the image `file` (libvirt virDomainSave:
   * the VM stops) and removes its definition: the image now holds the VM. Returns the host it
   * was on. VM_NOT_RUNNING when it is not running.
   */
  saveDomain(name: string, file: string, opts?: CallOptions): Promise<{ host: string }>;
  /**
   * Restores a save image on `host` (virDomainRestore: the VM runs again from the saved state) and
   * defines it persistently, so it outlives a power-off like any VM. VM_ALREADY_EXISTS when a VM
   * of its name is defined. `instanceId`: on qemu hosts the image's XML gets this instance id in
   * sandboxd's metadata at the restore (test-driver images are rewritten by the caller).
   */
  restoreDomain(file: string, name: string, opts?: CallOptions & { host?: string; instanceId?: string }): Promise<DomainInfo>;

  health(): Promise<HypervisorHealth>;
  /** Subscribes to lifecycle events; returns the unsubscribe function. */
  onEvent(listener: HypervisorEventListener): () => void;
}

/** The v1 event record fields for an event (event store input; spec part 2 "Event record"). */
export function toEventRecordInput(e: HypervisorEvent): {
  event_type: VmEventType;
  vm_name: string;
  timestamp: string;
  details: Record<string, unknown>;
} {
  return {
    event_type: e.type,
    vm_name: e.vmName,
    timestamp: new Date(e.timestampMs).toISOString(),
    details: {
      reason: e.reason,
      source: e.source,
      host: e.host,
      uuid: e.uuid,
      state: e.state,
      previous_state: e.previousState,
      uptime_seconds: e.uptimeSeconds,
    },
  };
}
