/**
 * Test records of the fleet inventory (src/fleet/records.ts), shared by the SQLite and PostgreSQL
 * store tests.
 */
import type { DesiredRecord } from '../../src/fleet/records.js';

/** A desired workload (running, profile basic, 1 vCPU, 256 MiB) with `over` laid on it. */
export const desired = (over: Partial<DesiredRecord> = {}): DesiredRecord => ({
  state: 'running',
  profile: 'basic',
  loadout: null,
  vcpus: 1,
  memoryMiB: 256,
  diskGiB: 1,
  agentshare: true,
  host: null,
  owner: { actor: 'alice', mode: 'mtls' },
  labels: {},
  sinceMs: 1,
  origin: 'vm_create',
  operationId: 'op-1',
  checkpointId: null,
  pool: null,
  pendingOperationId: null,
  ...over,
});
