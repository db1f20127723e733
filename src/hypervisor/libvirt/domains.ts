/**
 * Reading domains through the binding. Each read runs inside one lane slot and makes its native
 * calls one after another, so a slot never holds more than one libuv thread (see call-lane.ts).
 */
import type { Domain, Hypervisor } from '@unraid/libvirt';
import type { DomainMetadata } from '../port.js';
import type { SeenDomain } from '../event-tracker.js';
import { classifyFailure } from './errors.js';
import { parseMetadata } from './domain-xml.js';
import { vmStateOf } from './state-map.js';

/** A domain as read: what the tracker needs plus size. */
export interface RawDomain extends SeenDomain {
  readonly vcpus: number;
  readonly memoryMiB: number;
}

export async function readDomain(d: Domain): Promise<RawDomain> {
  const name = await d.getName();
  const uuid = await d.getUUIDString();
  const info = await d.getInfo();
  const state = vmStateOf(info.state);
  // Inactive domains have no id (the binding resolves undefined).
  const id = state === 'stopped' ? null : ((await d.getID()) ?? null);
  return { name, uuid, state, id, vcpus: info.nrVirtCpu, memoryMiB: Math.round(info.maxMem / 1024) };
}

/** The domain called `name`, or null when the host has none (other failures reject). */
export async function lookupDomain(conn: Hypervisor, name: string): Promise<Domain | null> {
  try {
    return await conn.domainLookupByName(name);
  } catch (err) {
    if (classifyFailure(err) === 'not-found') return null;
    throw err;
  }
}

/** `readDomain` of a looked-up domain, or null when it vanished meanwhile. */
export async function readDomainOrNull(d: Domain): Promise<RawDomain | null> {
  try {
    return await readDomain(d);
  } catch (err) {
    if (classifyFailure(err) === 'not-found') return null;
    throw err;
  }
}

/**
 * Every domain of a host. Domains that disappear between the list and their read are skipped;
 * `metadataFor` is called (within the same slot) for domains whose metadata is not cached yet.
 */
export async function sweepHost(
  conn: Hypervisor,
  needsMetadata: (uuid: string) => boolean,
  onMetadata: (uuid: string, m: DomainMetadata) => void,
): Promise<RawDomain[]> {
  const out: RawDomain[] = [];
  for (const d of await conn.connectListAllDomains()) {
    const raw = await readDomainOrNull(d);
    if (raw === null) continue;
    if (needsMetadata(raw.uuid)) {
      try {
        onMetadata(raw.uuid, parseMetadata(await d.getXMLDesc()));
      } catch (err) {
        if (classifyFailure(err) !== 'not-found') throw err;
        continue;
      }
    }
    out.push(raw);
  }
  return out;
}
