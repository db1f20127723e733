/**
 * The HTTP API's wire shapes, declared once: events (spec 4.5, part 6).
 * A leaf: imports nothing outside src/wire.
 */

/** One event as GET /api/v1/events serves it: the spec's v1 record plus our cursor `id`. */
export interface EventRecord {
  /** Ours: the monotonic cursor, from 1, never reused while the server runs (poll or resume with since=id). */
  id: number;
  event_type: string;
  vm_name: string;
  timestamp: string;
  details: Record<string, unknown>;
  agent_id: string;
  trace_id: string | null;
}

export interface EventPage {
  events: EventRecord[];
  /** Matching events retained in the store (before limit). */
  total_count: number;
  /** Id of the newest event in the store (0 when empty): poll with since=last_event_id. */
  last_event_id: number;
}

/** The spec's VM lifecycle event types (part 6). */
export const VM_EVENT_TYPES = [
  'vm.started',
  'vm.stopped',
  'vm.crashed',
  'vm.shutdown',
  'vm.rebooted',
  'vm.suspended',
  'vm.resumed',
  'vm.defined',
  'vm.undefined',
  'vm.pmsuspended',
] as const;
export type VmEventType = (typeof VM_EVENT_TYPES)[number];
