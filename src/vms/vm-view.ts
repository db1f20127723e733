/**
 * The spec's VM JSON (part 2; the shapes Vm and VmDetail are in src/wire/vms.ts) from what the
 * hypervisor and the agents registry know.
 *
 * - ip_address: the static address in the VM's metadata, else the one its agent reported, else
 *   "" (the spec types it as a string, so unknown is the empty string, never null).
 * - uptime_seconds: integer, or null when not running or started before sandboxd saw it.
 * - detail only: agent {connected, connected_at (Unix ms), hostname} — connected false and no
 *   other field when no agent of this VM is known; plus our host, profile, disk_gb and accelerator
 *   (kvm | tcg as the VM was defined on a qemu host; null on the test driver).
 */
import type { DomainInfo } from '../hypervisor/port.js';
import type { Vm, VmDetail } from '../wire/vms.js';
import type { AgentPresence } from './agent-lookup.js';

export function vmJson(d: DomainInfo, agent: AgentPresence | null): Vm {
  return {
    name: d.name,
    state: d.state,
    uuid: d.uuid,
    vcpus: d.vcpus,
    memory_mb: d.memoryMiB,
    ip_address: d.ipAddress ?? agent?.ip_address ?? '',
    uptime_seconds: d.uptimeSeconds,
  };
}

export function vmDetailJson(d: DomainInfo, agent: AgentPresence | null): VmDetail {
  const a: VmDetail['agent'] = { connected: agent?.connected === true };
  if (agent !== null && agent.connected_at !== null) a.connected_at = agent.connected_at;
  if (agent !== null && agent.hostname !== null) a.hostname = agent.hostname;
  return {
    ...vmJson(d, agent),
    agent: a,
    host: d.host,
    profile: d.metadata.profile ?? null,
    disk_gb: d.metadata.diskGiB ?? null,
    accelerator: d.metadata.accelerator ?? null,
  };
}

const VM_PROPS = {
  name: { type: 'string' },
  state: { type: 'string' },
  uuid: { type: 'string' },
  vcpus: { type: 'integer' },
  memory_mb: { type: 'integer' },
  ip_address: { type: 'string' },
  uptime_seconds: { type: ['integer', 'null'] },
} as const;

/** fast-json-stringify schemas of the list and the detail. */
export const VM_LIST_SCHEMA: Record<string, unknown> = {
  type: 'object',
  properties: { vms: { type: 'array', items: { type: 'object', properties: VM_PROPS } }, total: { type: 'integer' } },
  required: ['vms', 'total'],
};

export const VM_DETAIL_SCHEMA: Record<string, unknown> = {
  type: 'object',
  properties: {
    ...VM_PROPS,
    agent: {
      type: 'object',
      properties: { connected: { type: 'boolean' }, connected_at: { type: 'integer' }, hostname: { type: 'string' } },
      required: ['connected'],
    },
    host: { type: 'string' },
    profile: { type: ['string', 'null'] },
    disk_gb: { type: ['integer', 'null'] },
    accelerator: { type: ['string', 'null'], enum: ['kvm', 'tcg', null] },
  },
};
