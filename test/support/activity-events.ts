/**
 * activity.event/v1 records for tests and the bench: a collector that numbers its events from 1,
 * with UUIDv7-shaped ids, in one scope. Records are built from the schema's field list (the
 * reference's published envelope), not from the server's types, so they also check that the wire
 * type and the validator agree with what a foreign collector sends.
 */
import { randomBytes } from 'node:crypto';

export interface TestActivityScope {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  collector_id: string;
}

export const kTestScope: TestActivityScope = {
  tenant_id: 'tenant-a',
  host_id: 'host-1',
  instance_id: 'vm-1',
  agent_id: 'agent-1',
  collector_id: 'runtime',
};

/** The five X-Svc-* scope headers of an ingest request (the first four for reads). */
export function scopeHeaders(scope: TestActivityScope, withCollector = true): Record<string, string> {
  return {
    'x-svc-tenant-id': scope.tenant_id,
    'x-svc-host-id': scope.host_id,
    'x-svc-instance-id': scope.instance_id,
    'x-svc-agent-id': scope.agent_id,
    ...(withCollector ? { 'x-svc-collector-id': scope.collector_id } : {}),
  };
}

/** A UUIDv7-shaped id (time-ordered prefix, random rest). */
export function uuidV7(now = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export interface TestEventOptions {
  event_name?: string;
  occurred_at?: string;
  payload?: Record<string, unknown>;
  correlation?: Record<string, string>;
  event_id?: string;
}

/** One event of `scope` with collector sequence `sequence`. */
export function activityEvent(scope: TestActivityScope, sequence: number, o: TestEventOptions = {}): Record<string, unknown> {
  const at = o.occurred_at ?? new Date().toISOString();
  return {
    schema_version: 'activity.event/v1',
    event_id: o.event_id ?? uuidV7(),
    event_name: o.event_name ?? 'command.started',
    plane: 'runtime',
    occurred_at: at,
    observed_at: at,
    source: { collector: scope.collector_id, layer: 'host', runtime: 'host', trust: 'observed' },
    correlation: {
      tenant_id: scope.tenant_id,
      host_id: scope.host_id,
      instance_id: scope.instance_id,
      agent_id: scope.agent_id,
      ...o.correlation,
    },
    outcome: { status: 'started' },
    sensitivity: 'metadata',
    retention_class: 'standard',
    payload: o.payload ?? { argv0: 'make', cwd_depth: 2, n: sequence },
    integrity: { collector_sequence: sequence },
  };
}

/** A collector: hands out consecutive sequences from `next`. */
export class TestCollector {
  next: number;
  constructor(
    readonly scope: TestActivityScope,
    first = 1,
  ) {
    this.next = first;
  }
  /** `n` consecutive events. */
  batch(n: number, o: (i: number) => TestEventOptions = () => ({})): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (let i = 0; i < n; i++) out.push(activityEvent(this.scope, this.next++, o(i)));
    return out;
  }
  /** Skips `n` sequence numbers (a lost batch). */
  skip(n: number): void {
    this.next += n;
  }
}
