/**
 * libvirt domain states (virDomainState) → the spec's VM states.
 *
 * | libvirt              | value | VM state   | note                                                          |
 * |----------------------|-------|------------|---------------------------------------------------------------|
 * | VIR_DOMAIN_NOSTATE     | 0   | unknown    |                                                               |
 * | VIR_DOMAIN_RUNNING     | 1   | running    |                                                               |
 * | VIR_DOMAIN_BLOCKED     | 2   | running    | blocked on a resource; still a running guest                  |
 * | VIR_DOMAIN_PAUSED      | 3   | paused     | vCPUs stopped by the management side (virsh suspend)          |
 * | VIR_DOMAIN_SHUTDOWN    | 4   | shutdown   | the guest is shutting down (after an ACPI request)            |
 * | VIR_DOMAIN_SHUTOFF     | 5   | stopped    | whatever the reason: the binding has no virDomainGetState, so |
 * |                        |     |            | a shut-off-after-crash is also stopped (see on_crash below)   |
 * | VIR_DOMAIN_CRASHED     | 6   | crashed    | kept by on_crash='preserve' (our qemu XML with a pvpanic)     |
 * | VIR_DOMAIN_PMSUSPENDED | 7   | suspended  | guest power-management suspend (S3)                           |
 * | anything else          |     | unknown    |                                                               |
 */
import type { VmState } from '../port.js';

const TABLE: readonly VmState[] = ['unknown', 'running', 'running', 'paused', 'shutdown', 'stopped', 'crashed', 'suspended'];

export function vmStateOf(libvirtState: number): VmState {
  return (Number.isInteger(libvirtState) ? TABLE[libvirtState] : undefined) ?? 'unknown';
}
