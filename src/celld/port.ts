/**
 * The cell backend port: what Celld asks of the machinery a cell is made of. One implementation
 * ships, the libvirt cell (src/celld/libvirt-cell.ts): this server's hypervisor hosts
 * (SVC_HYPERVISOR_URI) as one cell, on the embedded default libvirt `test:///default`. Another
 * backend (a remote Celld daemon, a cloud provider) implements the same interface and is selected by
 * SVC_CELLD_BACKEND.
 *
 * Conventions: reads never change anything (validate, preflight, diagnose and upgrade planning are
 * built on them only); promise-returning methods reject with an SvcError; nothing returned holds a
 * path, URI or secret (status is shown to any operator with a read permission).
 */
import type { CheckResult, ProviderCapabilitySet } from '../wire/celld.js';

/** One VM of the cell as observed now, with its agent (by VM name). */
export interface ObservedVm {
  readonly name: string;
  /** Spec VM state (running, stopped, shutdown, …). */
  readonly state: string;
  readonly memoryMiB: number;
  /** The agent's status (Ready, Busy, Disconnected, …), null when no agent of this VM is known. */
  readonly agentStatus: string | null;
}

export interface CellObservation {
  readonly observedAtMs: number;
  readonly hypervisor: { readonly status: 'ok' | 'degraded' | 'down'; readonly hosts: number };
  readonly vms: readonly ObservedVm[];
  /** Agents whose id names no VM of the cell, with their status. */
  readonly strayAgents: readonly { readonly id: string; readonly status: string }[];
}

/** A mutating per-VM effect and what it did. */
export type VmEffect = 'start' | 'stop' | 'destroy';
export interface VmEffectResult {
  readonly vm: string;
  /** changed: the effect happened; already: the VM was already there (no change). */
  readonly outcome: 'changed' | 'already';
  readonly state: string;
}

export interface CellBackend {
  /** The backend class shown by status (`libvirt`). */
  readonly backendClass: string;
  /** The version of what runs the cell (sandboxd's, for the libvirt cell). */
  runningVersion(): string;
  /** What each host's provider advertises (no URIs). */
  providers(): ProviderCapabilitySet[];
  /** Whether the agent listener (gRPC, mTLS) is accepting connections. */
  agentListening(): boolean;
  /** The hypervisor's state without listing VMs (status; bounded by the hypervisor's read budget). */
  health(): Promise<{ status: 'ok' | 'degraded' | 'down'; hosts: number }>;
  /** VMs, their agents, stray agents. Read-only. */
  observe(): Promise<CellObservation>;
  /** Backend-specific preflight checks (images, capacity of the named VMs, listener). Read-only. */
  preflight(targets: readonly string[]): Promise<CheckResult[]>;
  /** One per-VM effect; idempotent: a VM already in the wanted state is `already`. */
  apply(effect: VmEffect, vm: string): Promise<VmEffectResult>;
}
