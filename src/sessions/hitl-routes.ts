/**
 * Human-in-the-loop routes (spec 4.16; detection rules in src/sessions/hitl-detector.ts):
 *
 *   GET  /api/v1/hitl                 200 {requests: [{id, session_id, agent_id, command_id,
 *                                     kind, prompt, created_at}]}, oldest first; kind is sudo,
 *                                     password, confirm or press_enter; created_at RFC 3339
 *   POST /api/v1/hitl/{id}/respond    body {response: string} (one line, ≤ 4096 characters, no
 *                                     control characters): the response and Enter are written to
 *                                     the session's PTY, then 200 {resolved: true}; 400 bad body;
 *                                     404 hitl.not_found (unknown, withdrawn or already answered);
 *                                     503 server.unavailable when the agent is not connected
 */
import type { Router } from '../http/router.js';
import type { HitlList, HitlRespondResult } from '../wire/sessions.js';
import { parseHitlResponse, type HitlService } from './hitl.js';

const str = { type: 'string' } as const;

export const HITL_REQUEST_SCHEMA = {
  type: 'object',
  properties: { id: str, session_id: str, agent_id: str, command_id: str, kind: str, prompt: str, created_at: str },
  required: ['id', 'session_id', 'agent_id', 'command_id', 'kind', 'prompt', 'created_at'],
};

export interface HitlRoutesDeps {
  readonly hitl: Pick<HitlService, 'list' | 'respond'>;
}

export function registerHitlRoutes(router: Router, deps: HitlRoutesDeps): void {
  router.add({
    method: 'GET',
    path: '/api/v1/hitl',
    responseSchema: { type: 'object', properties: { requests: { type: 'array', items: HITL_REQUEST_SCHEMA } }, required: ['requests'] },
    handler: () => ({ status: 200, json: { requests: deps.hitl.list() } satisfies HitlList }),
  });

  router.add({
    method: 'POST',
    path: '/api/v1/hitl/:id/respond',
    maxBodyBytes: 64 * 1024,
    responseSchema: { type: 'object', properties: { resolved: { type: 'boolean' } }, required: ['resolved'] },
    handler: async (req) => {
      const response = parseHitlResponse(req.body);
      await deps.hitl.respond(req.params['id'] ?? '', response);
      return { status: 200, json: { resolved: true } satisfies HitlRespondResult };
    },
  });
}
