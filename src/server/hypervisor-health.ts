/**
 * GET /healthz/hypervisor (spec 4.1).
 *
 * 200 {status: 'ok' | 'degraded', hypervisor, circuit, hosts: [{host, status, circuit, latency_ms,
 *   accelerator ('kvm' | 'tcg' for new VMs on a qemu host, null on the test driver), accelerator_reason}]}
 *   when at least one host answered its probe within the read budget (degraded: some did not;
 *   VMs on the hosts that answer keep working).
 * 503 with Retry-After when no host did: libvirt down, slower than its read budget, or every
 *   circuit open. The body is the VM error envelope {error: {code: 'HYPERVISOR_UNAVAILABLE',
 *   message}} plus status, hypervisor, circuit and hosts for dashboards.
 */
import { envelope } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { HostHealth, HypervisorPort } from '../hypervisor/port.js';

export function registerHypervisorHealthRoute(router: Router, deps: { hypervisor: Pick<HypervisorPort, 'health'> }): void {
  router.add({
    method: 'GET',
    path: '/healthz/hypervisor',
    handler: async () => {
      const h = await deps.hypervisor.health();
      const body = { status: h.status, hypervisor: h.hypervisor, circuit: h.circuit, hosts: h.hosts.map(hostJson) };
      if (h.status !== 'down') return { status: 200, json: body };
      const retryAfterSeconds = Math.max(1, Math.ceil(h.retryAfterSeconds ?? 1));
      const reasons = h.hosts.map((x) => `${x.host}: ${x.error?.message ?? 'down'}`).join('; ');
      return {
        status: 503,
        headers: { 'retry-after': String(retryAfterSeconds), 'cache-control': 'no-store' },
        json: { ...envelope('HYPERVISOR_UNAVAILABLE', `hypervisor unavailable (${reasons})`), ...body },
      };
    },
  });
}

function hostJson(h: HostHealth): Record<string, unknown> {
  return {
    host: h.host,
    status: h.status,
    circuit: h.circuit,
    latency_ms: h.latencyMs,
    accelerator: h.accelerator,
    accelerator_reason: h.acceleratorReason,
    ...(h.error !== undefined ? { error: h.error } : {}),
    ...(h.retryAfterSeconds !== undefined ? { retry_after_seconds: h.retryAfterSeconds } : {}),
  };
}
