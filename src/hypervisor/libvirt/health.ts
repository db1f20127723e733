/**
 * The hypervisor health probe: one cheap call per host (the ids of running domains) within the
 * read budget, through the host's breaker. A host whose circuit is open is reported down at once,
 * without a probe (that is the point of failing fast).
 */
import { toWire } from '../../core/errors.js';
import type { CircuitState, HostHealth, HypervisorHealth } from '../port.js';
import type { HostLink } from './host-link.js';

const SEVERITY: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

/** The accelerator a host's new VMs get (null on test-driver hosts). */
export type AcceleratorOf = (uri: string) => { accelerator: 'kvm' | 'tcg' | null; reason: string | null };

export async function probeHealth(links: readonly HostLink[], acceleratorOf: AcceleratorOf): Promise<HypervisorHealth> {
  const hosts = await Promise.all(
    links.map(async (link) => {
      const acc = acceleratorOf(link.uri);
      return { ...(await probeHost(link)), accelerator: acc.accelerator, acceleratorReason: acc.reason };
    }),
  );
  const up = hosts.filter((h) => h.status === 'ok').length;
  const status = up === hosts.length ? 'ok' : up > 0 ? 'degraded' : 'down';
  const circuit = hosts.map((h) => h.circuit).reduce<CircuitState>((a, b) => (SEVERITY[b] > SEVERITY[a] ? b : a), 'closed');
  const base = { status, hypervisor: links.map((l) => l.label).join(','), hosts, circuit } as const;
  if (status !== 'down') return base;
  return { ...base, retryAfterSeconds: Math.min(...hosts.map((h) => h.retryAfterSeconds ?? 1)) };
}

async function probeHost(link: HostLink): Promise<Omit<HostHealth, 'accelerator' | 'acceleratorReason'>> {
  if (link.circuit === 'open') {
    const retryAfterSeconds = link.retryAfterSeconds();
    return {
      host: link.label,
      status: 'down',
      circuit: 'open',
      latencyMs: null,
      error: { code: 'HYPERVISOR_UNAVAILABLE', message: `circuit open; retry in ${retryAfterSeconds} s` },
      retryAfterSeconds,
    };
  }
  const t0 = performance.now();
  try {
    await link.call('read', 'health probe', (conn) => conn.connectListDomains());
    return { host: link.label, status: 'ok', circuit: link.circuit, latencyMs: Math.round((performance.now() - t0) * 10) / 10 };
  } catch (err) {
    const wire = toWire(err);
    const retry = wire.details?.['retryAfterSeconds'];
    return {
      host: link.label,
      status: 'down',
      circuit: link.circuit,
      latencyMs: null,
      error: { code: wire.code, message: wire.message },
      retryAfterSeconds: typeof retry === 'number' ? retry : link.retryAfterSeconds(),
    };
  }
}
