/**
 * Validation of the dispatch body (spec 4.16) and of an executor registration. Bad input is 400
 * request.invalid naming the field, never a crash.
 *
 * Dispatch decisions (README "Missions and dispatch"): mission_id (a UUID, any version, either
 * case; kept lower-case) and objective are required; long_running defaults to false,
 * executor_filter and metadata to {}, completion to '' — as the reference's executor contract
 * does, so orchestrators written for it work unchanged. Unknown top-level fields and unknown
 * executor_filter keys are ignored (the orchestration server's contract may grow), but a known
 * field of the wrong type is refused.
 */
import { SvcError } from '../core/errors.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Session ids, executor ids, agent ids, names and capabilities. */
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

/** Objective at most this many bytes (it reaches the command as an environment variable). */
export const kMaxObjectiveBytes = 32 * 1024;
export const kMaxCompletionBytes = 8 * 1024;
export const kMaxMetadataBytes = 16 * 1024;
/** Dispatch body limit (bytes). */
export const kMaxDispatchBodyBytes = 64 * 1024;

export interface DispatchInput {
  readonly missionId: string;
  readonly objective: string;
  readonly completion: string;
  readonly longRunning: boolean;
  readonly filter: { readonly agentId?: string; readonly executorId?: string; readonly capabilities: readonly string[] };
  readonly metadata: Record<string, unknown>;
}

export interface ExecutorInput {
  readonly agentId: string;
  readonly name: string;
  readonly capabilities: readonly string[];
  readonly command: readonly string[] | null;
}

function invalid(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

function objectOf(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(`${what} must be a JSON object`);
  return v as Record<string, unknown>;
}

function text(v: unknown, field: string, maxBytes: number, required: boolean): string {
  if (v === undefined || (v === null && !required)) {
    if (required) throw invalid(`${field} is required`);
    return '';
  }
  if (typeof v !== 'string') throw invalid(`${field} must be a string`);
  if (required && v.trim() === '') throw invalid(`${field} must not be empty`);
  if (v.includes('\0')) throw invalid(`${field} must not contain NUL`);
  if (Buffer.byteLength(v, 'utf8') > maxBytes) throw invalid(`${field} must be at most ${maxBytes} bytes`);
  return v;
}

function id(v: unknown, field: string): string {
  if (typeof v !== 'string' || !ID_RE.test(v))
    throw invalid(`${field} must be 1-128 characters of A-Z a-z 0-9 . _ : @ - (starting with a letter or digit)`);
  return v;
}

function ids(v: unknown, field: string, max: number): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > max) throw invalid(`${field} must be an array of at most ${max} names`);
  const out = v.map((x, i) => id(x, `${field}[${i}]`));
  return [...new Set(out)];
}

/** The `{id}` of /api/v1/sessions/{id}/dispatch: the orchestration server's session id. */
export function parseSessionId(raw: string): string {
  return id(raw, 'the session id of the path');
}

export function parseDispatch(body: unknown): DispatchInput {
  const b = objectOf(body, 'the body');
  const missionId = b['mission_id'];
  if (typeof missionId !== 'string' || !UUID_RE.test(missionId)) throw invalid('mission_id must be a UUID string');
  const objective = text(b['objective'], 'objective', kMaxObjectiveBytes, true);
  const completion = text(b['completion'], 'completion', kMaxCompletionBytes, false);
  const lr = b['long_running'];
  if (lr !== undefined && typeof lr !== 'boolean') throw invalid('long_running must be a boolean');
  const f = b['executor_filter'] === undefined || b['executor_filter'] === null ? {} : objectOf(b['executor_filter'], 'executor_filter');
  const filter: DispatchInput['filter'] = {
    ...(f['agent_id'] !== undefined && f['agent_id'] !== null && { agentId: id(f['agent_id'], 'executor_filter.agent_id') }),
    ...(f['executor_id'] !== undefined && f['executor_id'] !== null && { executorId: id(f['executor_id'], 'executor_filter.executor_id') }),
    capabilities: ids(f['capabilities'], 'executor_filter.capabilities', 32),
  };
  const metadata = b['metadata'] === undefined || b['metadata'] === null ? {} : objectOf(b['metadata'], 'metadata');
  if (JSON.stringify(metadata).length > kMaxMetadataBytes) throw invalid(`metadata must be at most ${kMaxMetadataBytes} bytes of JSON`);
  return { missionId: missionId.toLowerCase(), objective, completion, longRunning: lr === true, filter, metadata };
}

const EXECUTOR_FIELDS = new Set(['agent_id', 'name', 'capabilities', 'command']);

/** POST /api/v2/executors: an operator's request, so unknown fields are refused (a typo must not pass silently). */
export function parseExecutorRegistration(body: unknown): ExecutorInput {
  const b = objectOf(body, 'the body');
  const unknown = Object.keys(b).filter((k) => !EXECUTOR_FIELDS.has(k));
  if (unknown.length > 0) throw invalid(`unknown field(s): ${unknown.join(', ')}`);
  const agentId = id(b['agent_id'], 'agent_id');
  const name = b['name'] === undefined || b['name'] === null ? agentId : id(b['name'], 'name');
  const capabilities = ids(b['capabilities'], 'capabilities', 32);
  let command: string[] | null = null;
  const c = b['command'];
  if (c !== undefined && c !== null) {
    if (
      !Array.isArray(c) ||
      c.length === 0 ||
      c.length > 64 ||
      !c.every((x) => typeof x === 'string' && x !== '' && !x.includes('\0') && x.length <= 4096)
    ) {
      throw invalid('command must be an array of 1-64 non-empty strings (an argv, run without a shell)');
    }
    command = c as string[];
  }
  return { agentId, name, capabilities, command };
}
