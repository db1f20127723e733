/**
 * GET /api/v2/admin/hypervisor/capabilities (permission admin.read): what each hypervisor host's
 * provider advertises (snapshot, checkpoint, fork, warm_pool) and, per VM, the capabilities of
 * the host it lives on. The dashboard shows a VM's checkpoint and warm-pool actions from it; the
 * checkpoint and warm-pool routes refuse what is not advertised (provider.capability_unavailable).
 * Host URIs are not shown (a test-driver URI may hold a path): hosts are numbered in
 * SVC_HYPERVISOR_URI order.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { ProviderCapabilities } from '../hypervisor/provider-capabilities.js';
import type { Router } from '../http/router.js';
import type { CapabilitiesResponse } from '../wire/celld.js';

export const CAPABILITIES_PATH = '/api/v2/admin/hypervisor/capabilities';

export function registerCapabilityRoutes(
  router: Router,
  deps: { capabilities: ProviderCapabilities; identity: Pick<OperatorIdentity, 'require'> },
): void {
  router.add({
    method: 'GET',
    path: CAPABILITIES_PATH,
    handler: async (req) => {
      deps.identity.require(req, 'admin.read');
      const json: CapabilitiesResponse = { providers: deps.capabilities.all(), vms: await deps.capabilities.byVm() };
      return { status: 200, headers: { 'cache-control': 'no-store' }, json };
    },
  });
}
