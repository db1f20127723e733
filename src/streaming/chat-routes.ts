/**
 * GET /api/v1/agent-output/chat (spec 4.7): a read-only, message-oriented projection of one
 * command's stream-json output (Claude Code `--output-format stream-json`) as server-sent events
 * delta, tool_call, tool_result, status, done, error and raw (actors/chat/). It confers no input
 * authority: there is no way to write to the command through it.
 *
 * Query: command_id (required), session_id (default: the session mapped from the command, else
 * the command id), replay (true: the events projected so far before live ones), last_event_id.
 * Ids are `{session}-{seq}` with a monotonic seq; Last-Event-ID resumes after one. An unknown or
 * expired command ends with an `error` event whose code is STREAM_INTERRUPTED. Bad input is a 400
 * `request.invalid` envelope (src/streaming/query.ts).
 */
import type { Router } from '../http/router.js';
import type { SseSink } from '../http/types.js';
import { parseChatQuery, type ChatQuery } from './query.js';

export interface ChatRoutesDeps {
  /** Subscribes `sink` per the query (OutputJoins.joinChat). */
  join(sink: SseSink, query: ChatQuery): Promise<void>;
}

export function registerChatRoutes(router: Router, deps: ChatRoutesDeps): void {
  router.add({
    method: 'GET',
    path: '/api/v1/agent-output/chat',
    handler: (req) => {
      const query = parseChatQuery(req.query, req.headers);
      return { sse: (sink) => deps.join(sink, query) };
    },
  });
}
