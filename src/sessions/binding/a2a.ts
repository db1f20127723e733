/**
 * The A2A core operations on pty-ws.v1 (binding spec section 4), the binding's side: which ops
 * they are, how their payloads are validated, how their answers are framed, and the port through
 * which the routes hand them to whoever serves them (src/a2a's handler; README.md "A2A core
 * operations"). Without a handler the routes keep answering UNSUPPORTED_OPERATION and
 * binding_hello leaves the ops out, as before.
 *
 * Answers and TaskStatusUpdate frames are connection-local (not part of the session's PTY stream,
 * never replayed): like the binding's Error frames, they repeat the connection's position as
 * their `sequence`.
 */
import type { ErrorCode } from './codes.js';
import { newFrameId, nowTs } from './values.js';

/** The six A2A core operations, plus Unsubscribe (section 4.6), that a handler serves. */
export const A2A_SERVED_OPS = [
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'ListTasks',
  'CancelTask',
  'SubscribeToTask',
  'Unsubscribe',
] as const;
export type A2aServedOp = (typeof A2A_SERVED_OPS)[number];

/** The ops binding_hello's supported_operations lists when a handler is wired. */
export const A2A_ADVERTISED_OPS: readonly string[] = A2A_SERVED_OPS;

/** A validated A2A request frame. */
export type A2aRequest =
  | { op: 'SendMessage' | 'SendStreamingMessage'; id: string; payload: { message: unknown; configuration?: Record<string, unknown> } }
  | { op: 'GetTask'; id: string; payload: { task_id: string; history_length?: number } }
  | { op: 'ListTasks'; id: string; payload: { page_size?: number; page_token?: string | null; filter?: Record<string, unknown> | null } }
  | { op: 'CancelTask' | 'Unsubscribe'; id: string; payload: { task_id: string } }
  | { op: 'SubscribeToTask'; id: string; payload: { task_id: string }; replay_from?: number | null };

/** One connection as the A2A handler sees it. */
export interface A2aConnection {
  /** Process-unique connection number. */
  readonly connId: number;
  readonly sessionId: string;
  /** The instance id of an agent-scoped URL (`/agents/{instance_id}/…`). */
  readonly instanceId: string | undefined;
  /** The agent of the session behind the URL. */
  readonly agentId: string | undefined;
  /** Sends a frame, built for the connection's current position (its `sequence`). */
  send(build: (sequence: number) => Record<string, unknown>): void;
  /** Sends the binding's Error frame answering `requestId`. */
  error(code: ErrorCode, message: string, requestId: string): void;
}

/** What serves the A2A ops (src/a2a/binding-handler.ts). */
export interface A2aBindingHandler {
  handle(conn: A2aConnection, req: A2aRequest): void;
  /** The connection closed: its subscriptions end. */
  closed(connId: number): void;
}

const served: ReadonlySet<string> = new Set(A2A_SERVED_OPS);

export function isA2aServedOp(op: unknown): op is A2aServedOp {
  return typeof op === 'string' && served.has(op);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const TASK_ID = /^[\x21-\x7e]{1,256}$/;

function only(p: Record<string, unknown>, keys: readonly string[], op: string): string | undefined {
  for (const k of Object.keys(p)) if (!keys.includes(k)) return `${op} payload: unknown field ${JSON.stringify(k)}`;
  return undefined;
}

/**
 * Validates an A2A frame whose envelope decodeClientFrame already accepted (it answered
 * UNSUPPORTED_OPERATION for it). Returns the request, or the reason it is INVALID_REQUEST.
 */
export function decodeA2aRequest(raw: Record<string, unknown>): A2aRequest | string {
  const op = raw['op'];
  const id = raw['id'] as string;
  const p = raw['payload'] ?? {};
  if (!isA2aServedOp(op)) return `${String(op)} is not an A2A operation sandboxd serves`;
  if (!isRecord(p)) return `${op}: payload must be an object`;
  const taskId = (): string | undefined => (typeof p['task_id'] === 'string' && TASK_ID.test(p['task_id']) ? p['task_id'] : undefined);
  switch (op) {
    case 'SendMessage':
    case 'SendStreamingMessage': {
      const bad = only(p, ['message', 'configuration', 'metadata'], op);
      if (bad !== undefined) return bad;
      if (!isRecord(p['message'])) return `${op} payload.message must be an object (an A2A Message)`;
      const conf = p['configuration'];
      if (conf !== undefined && !isRecord(conf)) return `${op} payload.configuration must be an object`;
      return { op, id, payload: { message: p['message'], ...(conf !== undefined && { configuration: conf }) } };
    }
    case 'GetTask': {
      const bad = only(p, ['task_id', 'history_length'], op);
      if (bad !== undefined) return bad;
      const t = taskId();
      if (t === undefined) return 'GetTask payload.task_id must be 1..256 printable characters';
      const h = p['history_length'];
      if (h !== undefined && (typeof h !== 'number' || !Number.isSafeInteger(h) || h < 0))
        return 'GetTask payload.history_length must be an integer ≥ 0';
      return { op, id, payload: { task_id: t, ...(typeof h === 'number' && { history_length: h }) } };
    }
    case 'ListTasks': {
      const bad = only(p, ['page_size', 'page_token', 'filter'], op);
      if (bad !== undefined) return bad;
      const size = p['page_size'];
      if (size !== undefined && (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1 || size > 100))
        return 'ListTasks payload.page_size must be an integer in 1..100';
      const token = p['page_token'];
      if (token !== undefined && token !== null && (typeof token !== 'string' || token.length > 256))
        return 'ListTasks payload.page_token must be a string or null';
      const filter = p['filter'];
      if (filter !== undefined && filter !== null && !isRecord(filter)) return 'ListTasks payload.filter must be an object or null';
      return {
        op,
        id,
        payload: {
          ...(typeof size === 'number' && { page_size: size }),
          ...(token !== undefined && { page_token: token }),
          ...(filter !== undefined && { filter }),
        },
      };
    }
    case 'CancelTask':
    case 'Unsubscribe':
    case 'SubscribeToTask': {
      const bad = only(p, ['task_id'], op);
      if (bad !== undefined) return bad;
      const t = taskId();
      if (t === undefined) return `${op} payload.task_id must be 1..256 printable characters`;
      if (op === 'SubscribeToTask') {
        const rf = raw['replay_from'];
        return { op, id, payload: { task_id: t }, ...(typeof rf === 'number' && { replay_from: rf }) };
      }
      return { op, id, payload: { task_id: t } };
    }
  }
}

/** An answer frame (`<op>.Response` / `.Accepted`) echoing the request id. */
export function a2aAnswerFrame(op: string, requestId: string, sequence: number, payload: Record<string, unknown>): Record<string, unknown> {
  return { op, id: requestId, ts: nowTs(), sequence, payload };
}

/** A server-initiated TaskStatusUpdate frame (fresh id). */
export function taskStatusUpdateFrame(sequence: number, payload: { task: unknown; delta: unknown }): Record<string, unknown> {
  return { op: 'TaskStatusUpdate', id: newFrameId(), ts: nowTs(), sequence, payload };
}
