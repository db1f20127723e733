/**
 * The aiwg bridge routes (spec 4.16), over the orchestration link (README "Orchestration link
 * and aiwg bridge"). v1 routes: local-host operator access, like the rest of /api/v1 (spec part 5).
 *
 * | method | path | answer |
 * |---|---|---|
 * | GET | /api/v1/aiwg/status | 200 bridge status (src/wire/aiwg.ts) |
 * | POST | /api/v1/aiwg/reconnect | 200 {ok: true}: the link reconnects now; 409 aiwg.not_configured without ORCH_SERVE_ENDPOINT |
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { BridgeReconnect, BridgeStatus } from '../wire/aiwg.js';
import type { OrchLink } from './orch-link.js';

export interface BridgeDeps {
  /** The link; null when ORCH_SERVE_ENDPOINT is unset. */
  readonly link: OrchLink | null;
  /** Live interactive sessions (the session registry's size; 0 without the sessions component). */
  readonly sessionCount: () => number;
  readonly now?: () => number;
}

const INT = { type: 'integer' };
const STATUS_SCHEMA = {
  type: 'object',
  properties: {
    connected: { type: 'boolean' },
    session_count: INT,
    last_event_secs: INT,
    configured: { type: 'boolean' },
    state: { type: 'string' },
    endpoint: { type: ['string', 'null'] },
    events_sent: INT,
    events_dropped: INT,
    queued: INT,
    connections: INT,
  },
  required: [
    'connected',
    'session_count',
    'last_event_secs',
    'configured',
    'state',
    'endpoint',
    'events_sent',
    'events_dropped',
    'queued',
    'connections',
  ],
};

/** The status record (also what `sbx aiwg status` prints). */
export function bridgeStatus(deps: BridgeDeps): BridgeStatus {
  const sessions = deps.sessionCount();
  const link = deps.link;
  if (link === null) {
    return {
      connected: false,
      session_count: sessions,
      last_event_secs: -1,
      configured: false,
      state: 'disabled',
      endpoint: null,
      events_sent: 0,
      events_dropped: 0,
      queued: 0,
      connections: 0,
    };
  }
  const s = link.status();
  const nowMs = (deps.now ?? Date.now)();
  return {
    connected: s.connected,
    session_count: sessions,
    last_event_secs: s.lastEventSentAtMs === null ? -1 : Math.max(0, Math.floor((nowMs - s.lastEventSentAtMs) / 1000)),
    configured: true,
    state: s.state,
    endpoint: link.endpoint,
    events_sent: s.eventsSent,
    events_dropped: s.eventsDropped,
    queued: s.queued,
    connections: s.connections,
  };
}

export function registerBridgeRoutes(router: Router, deps: BridgeDeps): void {
  router.add({
    method: 'GET',
    path: '/api/v1/aiwg/status',
    responseSchema: STATUS_SCHEMA,
    handler: () => ({ status: 200, json: bridgeStatus(deps) }),
  });
  router.add({
    method: 'POST',
    path: '/api/v1/aiwg/reconnect',
    body: 'none',
    responseSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
    handler: () => {
      if (deps.link === null) {
        throw new SvcError(
          'aiwg.not_configured',
          'ORCH_SERVE_ENDPOINT is not set: this server runs standalone, there is no bridge to reconnect',
        );
      }
      deps.link.reconnectNow();
      const json: BridgeReconnect = { ok: true };
      return { status: 200, json };
    },
  });
}
