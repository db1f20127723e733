/**
 * The A2A JSON shapes sandboxd reads and writes (README "A2A"), written from the A2A
 * specification: task states in both protocol generations (0.3 lowercase `working`, 1.0 ProtoJSON
 * `TASK_STATE_WORKING`), the Task and TaskStatusUpdateEvent objects as A2A 1.0 ProtoJSON (what the
 * pty-ws.v1 binding carries: "JSON encodings of the A2A canonical proto messages"), the parsing
 * of an incoming Message (0.3 `kind`-discriminated parts and 1.0 member-discriminated parts both
 * accepted), and the google.rpc.Status error body of A2A 1.0 HTTP+JSON.
 */

/** A2A task states (the 0.3 wire names; 1.0 adds the TASK_STATE_ prefix in upper case). */
export const TASK_STATES = [
  'submitted',
  'working',
  'input-required',
  'completed',
  'canceled',
  'failed',
  'rejected',
  'auth-required',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** States a task never leaves (A2A: completed, canceled, failed, rejected). */
export const TERMINAL_STATES: readonly TaskState[] = ['completed', 'canceled', 'failed', 'rejected'];

export function isTerminal(s: TaskState): boolean {
  return TERMINAL_STATES.includes(s);
}

/** `working` → `TASK_STATE_WORKING` (A2A 1.0 ProtoJSON enum names). */
export function v10State(s: TaskState): string {
  return `TASK_STATE_${s.toUpperCase().replace('-', '_')}`;
}

/** The A2A versions sandboxd negotiates (A2A-Version). */
export type A2aVersion = '0.3' | '1.0';

/** A text message as A2A 1.0 ProtoJSON writes it. */
export interface A2aMessageJson {
  messageId: string;
  role: 'ROLE_USER' | 'ROLE_AGENT';
  parts: { text: string }[];
  contextId?: string;
  taskId?: string;
}

/** A Task as A2A 1.0 ProtoJSON (the pty-ws.v1 binding's payloads). */
export interface A2aTaskJson {
  id: string;
  contextId: string;
  status: { state: string; timestamp: string; message?: A2aMessageJson };
  history?: A2aMessageJson[];
  /** sandboxd's: instance_id, command_id, exit_code (null while running), artifact_count, output_bytes, output_truncated. */
  metadata: Record<string, unknown>;
}

/** TaskStatusUpdateEvent (A2A 1.0 ProtoJSON) plus `final`, which 0.3 clients read. */
export interface A2aStatusUpdateJson {
  taskId: string;
  contextId: string;
  status: A2aTaskJson['status'];
  final: boolean;
}

/** An incoming message, reduced to what sandboxd acts on. */
export interface ParsedMessage {
  readonly messageId: string;
  /** Every text part, joined with a newline. */
  readonly text: string;
  readonly contextId: string | undefined;
  readonly taskId: string | undefined;
}

/** Largest text a message may carry (characters): the binding's command limit. */
export const kMaxMessageTextChars = 65536;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const ID_TEXT = /^[\x21-\x7e]{1,256}$/;

/**
 * Parses an A2A Message (0.3 or 1.0 shape). Returns the reason when it is not one sandboxd can
 * run: no text part, a non-user role, ids that are not 1..256 printable characters, text too long.
 */
export function parseMessage(v: unknown): ParsedMessage | string {
  if (!isRecord(v)) return 'message must be an object';
  const role = v['role'];
  if (role !== undefined && role !== 'user' && role !== 'ROLE_USER') return 'message.role must be user (ROLE_USER)';
  const messageId = v['messageId'] ?? v['message_id'];
  if (typeof messageId !== 'string' || !ID_TEXT.test(messageId)) return 'message.messageId must be 1..256 printable characters';
  const parts = v['parts'];
  if (!Array.isArray(parts) || parts.length === 0 || parts.length > 64) return 'message.parts must be 1..64 parts';
  const texts: string[] = [];
  for (const [i, p] of parts.entries()) {
    if (!isRecord(p)) return `message.parts[${i}] must be an object`;
    const kind = p['kind'];
    if (kind !== undefined && kind !== 'text' && kind !== 'file' && kind !== 'data') return `message.parts[${i}].kind is unknown`;
    if (typeof p['text'] === 'string') texts.push(p['text']);
    else if (kind === 'text') return `message.parts[${i}].text must be a string`;
  }
  if (texts.length === 0) return 'message has no text part: sandboxd runs the text of a message as a command';
  const text = texts.join('\n');
  if (text.trim() === '') return 'message text is empty';
  if (text.length > kMaxMessageTextChars) return `message text is longer than ${kMaxMessageTextChars} characters`;
  if (text.includes('\0')) return 'message text must not contain NUL';
  const ctx = v['contextId'] ?? v['context_id'];
  const task = v['taskId'] ?? v['task_id'];
  if (ctx !== undefined && (typeof ctx !== 'string' || !ID_TEXT.test(ctx))) return 'message.contextId must be 1..256 printable characters';
  if (task !== undefined && (typeof task !== 'string' || !ID_TEXT.test(task))) return 'message.taskId must be 1..256 printable characters';
  return { messageId, text, contextId: ctx, taskId: task };
}

/** google.rpc.Status code names by HTTP status (the A2A 1.0 HTTP+JSON mapping). */
const STATUS_NAME: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  404: 'NOT_FOUND',
  409: 'FAILED_PRECONDITION',
  415: 'INVALID_ARGUMENT',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

/** The google.rpc.Status body of an A2A 1.0 HTTP+JSON error, with its ErrorInfo reason. */
export function rpcStatus(
  httpStatus: number,
  reason: string,
  message: string,
  metadata: Record<string, string> = {},
): { error: { code: number; status: string; message: string; details: Record<string, unknown>[] } } {
  return {
    error: {
      code: httpStatus,
      status: STATUS_NAME[httpStatus] ?? 'UNKNOWN',
      message,
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'a2a-protocol.org', metadata }],
    },
  };
}
