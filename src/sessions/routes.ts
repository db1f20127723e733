/**
 * Session routes (spec 4.2; validation rules in src/sessions/session-request.ts):
 *
 *   POST   /api/v1/agents/{id}/sessions               200 create record (spec part 2);
 *          header Idempotency-Key (≤ 255 visible ASCII): a replay answers the stored record with
 *          Idempotency-Replayed: true; 400 request.invalid, 404 agent.not_found, 409
 *          session.name_in_use / idempotency.key_conflict / idempotency.in_progress (Retry-After:
 *          1), 501 session_backend.not_implemented / session_class.not_implemented, 503
 *          server.unavailable (agent not connected)
 *   GET    /api/v1/agents/{id}/sessions               200 {agent_id, sessions: [entry]}; 404 for an
 *                                                     agent that is neither listed nor has sessions
 *   DELETE /api/v1/agents/{id}/sessions/{session}     ?signal=TERM|KILL|INT|HUP (default TERM);
 *          200 {killed: true} once no process of the session is left; 404 session.not_found;
 *          503 agent not connected (the session is kept); 500 when processes survived
 *
 * The WebSocket routes of a session are in src/sessions/pty-ws-routes.ts.
 */
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';
import { parseIdempotencyKey } from '../idempotency/idempotency.js';
import { parseKillSignal } from './session-request.js';
import type { SessionService } from './session-service.js';
import type { SessionUrlBases } from './session-types.js';

const str = { type: 'string' } as const;
const bool = { type: 'boolean' } as const;
const int = { type: 'integer' } as const;
const strings = { type: 'array', items: str } as const;

const ACCESS_PROPERTIES = {
  ws_endpoint: str,
  join_message: { type: 'object', properties: { type: str, session_id: str, role: str }, required: ['type', 'session_id', 'role'] },
  pty_ws_url: str,
  pty_ws_subprotocol: str,
  orchestrator_observer_url: str,
  orchestrator_controller_url: str,
  default_role: str,
  controller_policy: str,
  session_backend: str,
  session_class: str,
  chat_source: str,
  chat_stream_url: { type: ['string', 'null'] },
} as const;

/** The create record (spec part 2). */
export const SESSION_CREATE_SCHEMA = {
  type: 'object',
  properties: {
    session_id: str,
    instance_id: str,
    command_id: str,
    session_name: str,
    ...ACCESS_PROPERTIES,
    supported_session_backends: strings,
    supported_session_classes: strings,
    observe_supported: bool,
    drive_supported: bool,
    reattach_supported: bool,
  },
  required: [
    'session_id',
    'instance_id',
    'command_id',
    'session_name',
    ...Object.keys(ACCESS_PROPERTIES),
    'supported_session_backends',
    'supported_session_classes',
    'observe_supported',
    'drive_supported',
    'reattach_supported',
  ],
};

/** A list entry (spec part 2, plus instance_id and state). */
export const SESSION_ENTRY_SCHEMA = {
  type: 'object',
  properties: {
    session_id: str,
    instance_id: str,
    command_id: str,
    session_name: str,
    session_type: str,
    command: str,
    created_at_secs: int,
    has_screen: bool,
    state: str,
    ...ACCESS_PROPERTIES,
    membership: {
      type: 'object',
      properties: { controllers: strings, observers: strings, attachment_count: int },
      required: ['controllers', 'observers', 'attachment_count'],
    },
    liveness: {
      type: 'object',
      properties: { agent_connected: bool, has_screen: bool, replay_newest_seq: int, max_client_lag: int },
      required: ['agent_connected', 'has_screen', 'replay_newest_seq', 'max_client_lag'],
    },
  },
  required: [
    'session_id',
    'command_id',
    'session_name',
    'session_type',
    'command',
    'created_at_secs',
    'has_screen',
    'membership',
    'liveness',
    ...Object.keys(ACCESS_PROPERTIES),
  ],
};

export interface SessionRoutesDeps {
  readonly sessions: Pick<SessionService, 'create' | 'list' | 'kill'>;
  /** The URL bases of the caller of a request (its Host, or a trusted proxy's forwarded headers). */
  readonly urls: (req: RequestView) => SessionUrlBases;
}

export function registerSessionRoutes(router: Router, deps: SessionRoutesDeps): void {
  router.add({
    method: 'POST',
    path: '/api/v1/agents/:id/sessions',
    responseSchema: SESSION_CREATE_SCHEMA,
    handler: async (req) => {
      const key = parseIdempotencyKey(req.headers);
      const r = await deps.sessions.create(req.params['id'] ?? '', req.body, key, deps.urls(req));
      return { status: r.status, json: r.json, ...(r.replayed && { headers: { 'idempotency-replayed': 'true' } }) };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v1/agents/:id/sessions',
    responseSchema: {
      type: 'object',
      properties: { agent_id: str, sessions: { type: 'array', items: SESSION_ENTRY_SCHEMA } },
      required: ['agent_id', 'sessions'],
    },
    handler: (req) => ({ status: 200, json: deps.sessions.list(req.params['id'] ?? '', deps.urls(req)) }),
  });

  router.add({
    method: 'DELETE',
    path: '/api/v1/agents/:id/sessions/:session',
    body: 'none',
    responseSchema: { type: 'object', properties: { killed: bool }, required: ['killed'] },
    handler: async (req) => {
      const signal = parseKillSignal(req.query);
      return { status: 200, json: await deps.sessions.kill(req.params['id'] ?? '', req.params['session'] ?? '', signal) };
    },
  });
}
