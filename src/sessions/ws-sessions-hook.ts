/**
 * The sessions side of the dashboard WebSocket's fleet and session messages
 * (src/streaming/ws-session-messages.ts): the hook the sessions component installs on the WS
 * listener's hub, over the same session service the REST routes use, so a session created,
 * listed or killed over the WebSocket is the one POST, GET and DELETE …/sessions see.
 */
import { SvcError } from '../core/errors.js';
import type { RequestView } from '../http/types.js';
import type { WsSessionsHook } from '../streaming/ws-session-messages.js';
import type { SessionCreated } from '../wire/sessions.js';
import type { SessionRegistry } from './session-registry.js';
import type { SessionService } from './session-service.js';
import type { SessionRecord, SessionUrlBases } from './session-types.js';

export interface WsSessionsHookOptions {
  readonly service: SessionService;
  readonly registry: SessionRegistry;
  /** GET /api/v1/agents's agents. */
  readonly agents: () => readonly unknown[];
  /** The URL bases of a WebSocket caller (its upgrade request reached the WS listener, not the HTTP one). */
  readonly urls: (req: RequestView) => SessionUrlBases;
}

const live = (r: SessionRecord | undefined): SessionRecord | undefined => (r === undefined || r.state === 'closed' ? undefined : r);

export function wsSessionsHook(o: WsSessionsHookOptions): WsSessionsHook {
  return {
    agents: o.agents,
    list: (agentId, req) => o.service.list(agentId, o.urls(req)),
    async create(agentId, body, req) {
      const outcome = await o.service.create(agentId, body, undefined, o.urls(req));
      if (outcome.status !== 200) throw new SvcError('server.internal', `session create answered ${outcome.status}`);
      return outcome.json as SessionCreated;
    },
    kill: (agentId, sessionId, signal) => o.service.kill(agentId, sessionId, signal),
    find(q) {
      let r: SessionRecord | undefined;
      if ('sessionId' in q) r = o.registry.get(q.sessionId);
      else if ('commandId' in q) r = o.registry.byCommandId(q.commandId);
      else r = o.registry.listByAgent(q.agentId).find((s) => s.sessionName === q.sessionName && s.state !== 'closed');
      r = live(r);
      if (r === undefined || ('agentId' in q && r.agentId !== q.agentId)) return undefined;
      return { sessionId: r.sessionId, agentId: r.agentId, commandId: r.commandId, sessionName: r.sessionName };
    },
    hub: (sessionId) => o.service.hub(sessionId),
  };
}
