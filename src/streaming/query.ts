/**
 * Query and Last-Event-ID parsing for the agent-output streams (spec 4.7). Bad input throws
 * SvcError `request.invalid` (400 envelope naming the parameter).
 *
 * GET /api/v1/agent-output/stream
 *   agent_id, command_id  exact filters (≤ 256 characters, no control characters)
 *   stream                stdout | stderr | log
 *   replay                true: replay the buffered output of command_id before live data
 *                         (command_id required, else 400)
 *   limit                 1–1000 (default 100): chunks replayed (the newest ones); with a
 *                         cursor, the page size of the catch-up
 *   cursor                Last-Event-ID header `<clock>-<seq>`, or the `last_event_id` query
 *                         parameter for clients that cannot set headers (a fresh EventSource);
 *                         the header wins. A cursor resumes exactly after that event,
 *                         whether or not replay is set.
 *
 * GET /api/v1/agent-output/chat
 *   command_id (required), session_id (optional), replay (default false),
 *   Last-Event-ID `{session}-{seq}` (or `last_event_id`); when session_id is given the cursor
 *   must name the same session.
 */
import { parseChatCursor } from '../../actors/protocol/chat-events.js';
import { parseOutputCursor, type OutputCursor } from '../../actors/protocol/output-cursor.js';
import type { OutputStreamName } from '../../actors/protocol/agent-frames.js';
import { SvcError } from '../core/errors.js';
import { parseBoolParam, parseEnumParam, parseIntParam, parseStringParam } from '../http/body.js';

/** Default number of chunks replayed by replay=true. */
export const DEFAULT_REPLAY_LIMIT = 100;
/** Most chunks one replay may ask for (spec part 8). */
export const MAX_REPLAY_LIMIT = 1000;

const kIdPattern = /^\P{Cc}+$/u;
const kIdMaxLength = 256;
const STREAMS: readonly OutputStreamName[] = ['stdout', 'stderr', 'log'];

export interface AgentOutputQuery {
  agentId?: string;
  commandId?: string;
  stream?: OutputStreamName;
  replay: boolean;
  /** 1–1000. */
  limit: number;
  /** Resume after this event (Last-Event-ID). */
  resume?: OutputCursor;
}

export interface ChatQuery {
  commandId: string;
  sessionId?: string;
  replay: boolean;
  /** Resume after this event (Last-Event-ID); its session must be the stream's. */
  resume?: { sessionId: string; seq: number };
}

function idParam(query: URLSearchParams, name: string, required: true): string;
function idParam(query: URLSearchParams, name: string, required?: false): string | undefined;
function idParam(query: URLSearchParams, name: string, required = false): string | undefined {
  const v = parseStringParam(query, name, { required, maxLength: kIdMaxLength, pattern: kIdPattern });
  if (v === '') throw new SvcError('request.invalid', `query parameter ${name} must not be empty`);
  return v;
}

/** The cursor text: the Last-Event-ID header, else the last_event_id query parameter. */
function cursorText(query: URLSearchParams, headers: Readonly<Record<string, string>>): string | undefined {
  const header = headers['last-event-id'];
  if (header !== undefined && header.trim() !== '') return header.trim();
  return parseStringParam(query, 'last_event_id', { maxLength: 600 });
}

/** Parses GET /api/v1/agent-output/stream. Throws SvcError request.invalid. */
export function parseAgentOutputQuery(query: URLSearchParams, headers: Readonly<Record<string, string>>): AgentOutputQuery {
  const agentId = idParam(query, 'agent_id');
  const commandId = idParam(query, 'command_id');
  const stream = parseEnumParam(query, 'stream', STREAMS);
  const replay = parseBoolParam(query, 'replay', { default: false });
  const limit = parseIntParam(query, 'limit', { min: 1, max: MAX_REPLAY_LIMIT, default: DEFAULT_REPLAY_LIMIT });
  if (replay && commandId === undefined)
    throw new SvcError('request.invalid', 'replay=true needs command_id (the command whose output to replay)');
  const out: AgentOutputQuery = { replay, limit };
  if (agentId !== undefined) out.agentId = agentId;
  if (commandId !== undefined) out.commandId = commandId;
  if (stream !== undefined) out.stream = stream;
  const text = cursorText(query, headers);
  if (text !== undefined) {
    const cursor = parseOutputCursor(text);
    if (cursor === null) throw new SvcError('request.invalid', 'Last-Event-ID must be an event id of this stream (<clock>-<seq>)');
    out.resume = cursor;
  }
  return out;
}

/** Parses GET /api/v1/agent-output/chat. Throws SvcError request.invalid. */
export function parseChatQuery(query: URLSearchParams, headers: Readonly<Record<string, string>>): ChatQuery {
  const commandId = idParam(query, 'command_id', true);
  const sessionId = idParam(query, 'session_id');
  const replay = parseBoolParam(query, 'replay', { default: false });
  const out: ChatQuery = { commandId, replay };
  if (sessionId !== undefined) out.sessionId = sessionId;
  const text = cursorText(query, headers);
  if (text !== undefined) {
    const cursor = parseChatCursor(text);
    if (cursor === null) throw new SvcError('request.invalid', 'Last-Event-ID must be a chat event id ({session}-{seq})');
    if (sessionId !== undefined && cursor.sessionId !== sessionId)
      throw new SvcError('request.invalid', `Last-Event-ID belongs to session ${cursor.sessionId}, not ${sessionId}`);
    out.resume = cursor;
  }
  return out;
}
