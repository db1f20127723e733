/**
 * Agent routes (spec 4.2): the list, reprovision and the retired rotate-secret. The session and
 * legacy proxy routes of 4.2 are registered by their own modules.
 *
 *   GET  /api/v1/agents                      200 {agents: [Agent]} (spec part 2 shape, sorted by id)
 *   POST /api/v1/agents/{id}/reprovision     202 {operation_id: "op-<uuid>", status: "queued"}: a
 *                                            vm_create operation of the one operations store;
 *                                            404 agent.not_found for an agent that is not listed
 *   POST /api/v1/agents/{id}/rotate-secret   410 route.retired (agents use transport identity)
 */
import { SvcError } from '../core/errors.js';
import { AGENT_JSON_SCHEMA, type AgentRegistry } from './agent-registry.js';
import type { ReprovisionAcceptedJson } from '../core/operation-state.js';
import type { Router } from '../http/router.js';
import type { AgentList } from '../wire/agents.js';

const listSchema = {
  type: 'object',
  properties: { agents: { type: 'array', items: AGENT_JSON_SCHEMA } },
  required: ['agents'],
};

const queuedSchema = {
  type: 'object',
  properties: { operation_id: { type: 'string' }, status: { type: 'string' } },
  required: ['operation_id', 'status'],
};

export interface AgentRoutesDeps {
  readonly registry: Pick<AgentRegistry, 'list' | 'get'>;
  /** Queues the reprovision of a listed agent's VM (the VM feature's `reprovision`). */
  readonly reprovision: (agentId: string) => Promise<ReprovisionAcceptedJson>;
}

export function registerAgentRoutes(router: Router, deps: AgentRoutesDeps): void {
  router.add({
    method: 'GET',
    path: '/api/v1/agents',
    responseSchema: listSchema,
    handler: () => ({ status: 200, json: { agents: deps.registry.list() } satisfies AgentList }),
  });

  router.add({
    method: 'POST',
    path: '/api/v1/agents/:id/reprovision',
    responseSchema: queuedSchema,
    handler: async (req) => {
      const id = req.params['id'] ?? '';
      if (deps.registry.get(id) === undefined) throw new SvcError('agent.not_found', `no agent ${JSON.stringify(id.slice(0, 128))}`);
      return { status: 202, json: await deps.reprovision(id) };
    },
  });

  router.add({
    method: 'POST',
    path: '/api/v1/agents/:id/rotate-secret',
    body: 'none',
    handler: () => {
      throw new SvcError(
        'route.retired',
        'rotate-secret is retired: agents authenticate with their mTLS certificate (sandboxd certs issue-agent)',
      );
    },
  });
}
