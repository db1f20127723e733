/**
 * The HTTP API's wire shapes, declared once (this folder): health (spec 4.1). The server's
 * routes answer these and the client, the CLI and the dashboard read them. src/wire is a leaf:
 * pure types and the few value lists both sides need; it imports nothing outside src/wire.
 */

/** GET /healthz, /api/v1/health. */
export interface HealthStatus {
  status: string;
}

/** GET /readyz (200 when ready, 503 otherwise; both carry this body). */
export interface Readiness {
  ready: boolean;
  reason: string;
}

/** GET /healthz/deep: the spec's fields plus ours (ready, uws, actors, degraded_reasons). */
export interface DeepHealth {
  /** `ok`, or `degraded` with reasons. */
  status: string;
  uptime_seconds: number;
  agent_count: number;
  active_tasks: number;
  ready: boolean;
  uws: { native: boolean; detail: string };
  actors: { mode: string; shards: number; restarts: number };
  degraded_reasons: string[];
}
