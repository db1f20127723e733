/**
 * Mission dispatch (spec 4.16) and the executor and mission routes (ours; README "Missions and
 * dispatch"). The v2 routes resolve their caller through the one operator-identity function:
 * `executors.write` to register and delete executors, `missions.read` to list executors and
 * missions. The dispatch route authenticates by its bearer token alone (spec part 5).
 *
 * | method | path | answer |
 * |---|---|---|
 * | POST | /api/v1/sessions/{id}/dispatch | 202 {mission_id, executor_id, status, estimated_start}; 400, 401, 404, 409, 500, 503 |
 * | POST | /api/v2/executors | 201 {executor, token} (the only answer holding the token) |
 * | GET | /api/v2/executors | 200 {executors} (?agent_id=) |
 * | GET | /api/v2/executors/{id} | 200 executor |
 * | DELETE | /api/v2/executors/{id} | 200 {executor_id, deleted: true} |
 * | GET | /api/v2/missions | 200 {missions} (?agent_id=, status=, limit= 1-1000, default 100: the newest, oldest first) |
 * | GET | /api/v2/missions/{mission_id} | 200 mission |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { parseIntParam, parseStringParam } from '../http/body.js';
import type { Router } from '../http/router.js';
import { MISSION_RECORD_STATUSES } from '../wire/missions.js';
import type { MissionService } from './mission-service.js';
import { kMaxDispatchBodyBytes } from './requests.js';

const ACCEPTED_SCHEMA = {
  type: 'object',
  properties: {
    mission_id: { type: 'string' },
    executor_id: { type: 'string' },
    status: { type: 'string' },
    estimated_start: { type: 'string' },
  },
  required: ['mission_id', 'executor_id', 'status', 'estimated_start'],
};

export function registerMissionRoutes(
  router: Router,
  deps: { service: MissionService; identity: Pick<OperatorIdentity, 'require'> },
): void {
  const { service, identity } = deps;
  router.add({
    method: 'POST',
    path: '/api/v1/sessions/:id/dispatch',
    maxBodyBytes: kMaxDispatchBodyBytes,
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => {
      const sessionId = req.params['id'] ?? '';
      const { accepted, replayed } = await service.dispatch(sessionId, req.headers['authorization'], req.body);
      return {
        status: 202,
        headers: { location: `/api/v2/missions/${accepted.mission_id}`, ...(replayed && { 'idempotency-replayed': 'true' }) },
        json: accepted,
      };
    },
  });
  router.add({
    method: 'POST',
    path: '/api/v2/executors',
    maxBodyBytes: 64 * 1024,
    handler: (req) => {
      const who = identity.require(req, 'executors.write');
      const registered = service.register(req.body, who.actor ?? 'unknown');
      return { status: 201, headers: { location: `/api/v2/executors/${registered.executor.executor_id}` }, json: registered };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v2/executors',
    handler: (req) => {
      identity.require(req, 'missions.read');
      const agentId = parseStringParam(req.query, 'agent_id', { maxLength: 128 });
      return { status: 200, json: { executors: service.executors(agentId) } };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v2/executors/:id',
    handler: (req) => {
      identity.require(req, 'missions.read');
      return { status: 200, json: service.executor(req.params['id'] ?? '') };
    },
  });
  router.add({
    method: 'DELETE',
    path: '/api/v2/executors/:id',
    handler: (req) => {
      identity.require(req, 'executors.write');
      const id = req.params['id'] ?? '';
      service.deleteExecutor(id);
      return { status: 200, json: { executor_id: id, deleted: true } };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v2/missions',
    handler: (req) => {
      identity.require(req, 'missions.read');
      const agentId = parseStringParam(req.query, 'agent_id', { maxLength: 128 });
      const status = parseStringParam(req.query, 'status', {
        maxLength: 16,
        pattern: new RegExp(`^(${MISSION_RECORD_STATUSES.join('|')})$`),
      });
      const limit = parseIntParam(req.query, 'limit', { min: 1, max: 1000, default: 100 });
      return {
        status: 200,
        json: {
          missions: service.missions({ ...(agentId !== undefined && { agentId }), ...(status !== undefined && { status }), limit }),
        },
      };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v2/missions/:mission_id',
    handler: (req) => {
      identity.require(req, 'missions.read');
      return { status: 200, json: service.mission(req.params['mission_id'] ?? '') };
    },
  });
}
