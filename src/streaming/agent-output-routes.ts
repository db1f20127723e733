/**
 * GET /api/v1/agent-output/stream (spec 4.7): agent output as server-sent events.
 *
 * Query: agent_id, command_id (exact filters), stream (stdout | stderr | log), replay (true:
 * replay the buffered output of command_id before live data; command_id required), limit (chunks
 * replayed, 1–1000, default 100), last_event_id (for clients that cannot send the Last-Event-ID
 * header). Bad input is a 400 `request.invalid` envelope naming the parameter, before the stream
 * starts (src/streaming/query.ts).
 *
 * Events: `agent_output` (live chunk), `agent_output.replay` (buffered chunk), and
 * `agent_output.error` (codes output_gap, slow_subscriber, stream_end, resume_not_exact,
 * replay_unavailable; actors/protocol/chunk-events.ts, output-events.ts and output-join.ts). Every chunk and gap event has an id
 * `<clock>-<seq>`; Last-Event-ID resumes exactly after it (src/streaming/output-join.ts).
 */
import type { Router } from '../http/router.js';
import type { SseSink } from '../http/types.js';
import { parseAgentOutputQuery, type AgentOutputQuery } from './query.js';

export interface AgentOutputRoutesDeps {
  /** Subscribes `sink` per the query (OutputJoins.joinOutput). */
  join(sink: SseSink, query: AgentOutputQuery): Promise<void>;
}

export function registerAgentOutputRoutes(router: Router, deps: AgentOutputRoutesDeps): void {
  router.add({
    method: 'GET',
    path: '/api/v1/agent-output/stream',
    handler: (req) => {
      const query = parseAgentOutputQuery(req.query, req.headers);
      return { sse: (sink) => deps.join(sink, query) };
    },
  });
}
