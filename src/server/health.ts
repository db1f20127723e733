/**
 * Health routes (spec 4.1): liveness, readiness and a deep check. /healthz/hypervisor belongs to
 * the hypervisor work and is registered there.
 *
 * /healthz/deep adds to the spec's fields: `ready`, `uws` (native binary or slow fallback),
 * `actors` (mode, shards, restarts) and `degraded_reasons`; status is `degraded` when the uWS
 * fallback is loaded or the server is not ready.
 */
import type { Router } from '../http/router.js';
import type { DeepHealth, HealthStatus, Readiness } from '../wire/health.js';

/** What the health routes read; every number is read per request, so keep these cheap. */
export interface HealthDeps {
  /** Readiness (listeners and actors up, not shutting down) and its reason (`ok` when ready). */
  readiness(): { ready: boolean; reason: string };
  /** Wall-clock start of the server, in ms since the epoch (for uptime_seconds). */
  readonly startedAtMs: number;
  agentCount(): number | Promise<number>;
  activeTasks(): number | Promise<number>;
  /** uwsRuntimeInfo() of src/http. */
  uws(): { native: boolean; detail: string };
  actors(): ActorsHealth | Promise<ActorsHealth>;
  /** Clock for tests; default Date.now. */
  nowMs?: () => number;
}

export interface ActorsHealth {
  mode: 'workers' | 'inline';
  shards: number;
  /** Shard restarts since start. */
  restarts: number;
}

const statusSchema = {
  type: 'object',
  properties: { status: { type: 'string' } },
  required: ['status'],
};

const readySchema = {
  type: 'object',
  properties: { ready: { type: 'boolean' }, reason: { type: 'string' } },
  required: ['ready', 'reason'],
};

const deepSchema = {
  type: 'object',
  properties: {
    status: { type: 'string' },
    uptime_seconds: { type: 'integer' },
    agent_count: { type: 'integer' },
    active_tasks: { type: 'integer' },
    ready: { type: 'boolean' },
    uws: { type: 'object', properties: { native: { type: 'boolean' }, detail: { type: 'string' } }, required: ['native', 'detail'] },
    actors: {
      type: 'object',
      properties: { mode: { type: 'string' }, shards: { type: 'integer' }, restarts: { type: 'integer' } },
      required: ['mode', 'shards', 'restarts'],
    },
    degraded_reasons: { type: 'array', items: { type: 'string' } },
  },
  required: ['status', 'uptime_seconds', 'agent_count', 'active_tasks', 'ready', 'uws', 'actors', 'degraded_reasons'],
};

/** Register GET /healthz, /api/v1/health, /readyz and /healthz/deep. */
export function registerHealthRoutes(router: Router, deps: HealthDeps): void {
  const now = deps.nowMs ?? Date.now;
  const ok = () => ({ status: 200, json: { status: 'ok' } satisfies HealthStatus });
  router.add({ method: 'GET', path: '/healthz', handler: ok, responseSchema: statusSchema });
  router.add({ method: 'GET', path: '/api/v1/health', handler: ok, responseSchema: statusSchema });

  router.add({
    method: 'GET',
    path: '/readyz',
    responseSchema: readySchema,
    handler: () => {
      const { ready, reason } = deps.readiness();
      return { status: ready ? 200 : 503, json: { ready, reason } satisfies Readiness };
    },
  });

  router.add({
    method: 'GET',
    path: '/healthz/deep',
    responseSchema: deepSchema,
    handler: async () => {
      const [agentCount, activeTasks, actors] = await Promise.all([deps.agentCount(), deps.activeTasks(), deps.actors()]);
      const uws = deps.uws();
      const readiness = deps.readiness();
      const reasons: string[] = [];
      if (!uws.native) reasons.push(`uWebSockets.js fallback loaded: ${uws.detail}`);
      if (!readiness.ready) reasons.push(`not ready: ${readiness.reason}`);
      return {
        status: 200,
        json: {
          status: reasons.length === 0 ? 'ok' : 'degraded',
          uptime_seconds: Math.max(0, Math.floor((now() - deps.startedAtMs) / 1000)),
          agent_count: agentCount,
          active_tasks: activeTasks,
          ready: readiness.ready,
          uws,
          actors,
          degraded_reasons: reasons,
        } satisfies DeepHealth,
      };
    },
  });
}
