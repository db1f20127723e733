/**
 * The cell command document (sandboxd.celld-command/v1, schema celld-command-v1.schema.json) and
 * its request hash: sha256 (hex) of the canonical JSON (sorted keys, src/util/canonical-json.ts) of
 * the document without its own `request_hash`. The effect ledger binds an operation_id to that hash,
 * so a replay is recognised whatever order its keys come in, and any other change is a conflict.
 *
 * Validation is pure: it reads nothing but the document and the cell id, and changes nothing.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../util/canonical-json.js';
import {
  CELL_ACTIONS,
  type CellAction,
  type CellCommandDocument,
  type GenerationReconcileRequest,
  type ValidationProblem,
} from '../wire/celld.js';

export const COMMAND_SCHEMA_VERSION = 'sandboxd.celld-command/v1';
export const OPERATION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const VM_NAME_PATTERN = /^agent-[a-z0-9-]{1,57}$/;
export const MAX_TARGETS = 100;
/** The problem message of a request_hash that is not the document's. */
export const HASH_MISMATCH = 'is not the sha256 of the canonical JSON of the document without request_hash';
const HASH_PATTERN = /^[a-f0-9]{64}$/;
const KEYS = new Set(['schema_version', 'operation_id', 'cell_id', 'action', 'targets', 'generation', 'dry_run', 'request_hash']);

/** sha256 hex of the canonical JSON of `value` without a top-level request_hash. */
export function requestHash(value: Record<string, unknown>): string {
  const { request_hash: _ignored, ...rest } = value;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex');
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isGeneration = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

export type Checked<T> = { ok: true; value: T; hash: string } | { ok: false; problems: ValidationProblem[] };

/**
 * Checks a command document against the schema and this cell. `cellId` null: the cell is not
 * configured, so any cell_id is only checked for form.
 */
export function checkCommand(doc: unknown, cellId: string | null): Checked<CellCommandDocument> {
  const problems: ValidationProblem[] = [];
  const bad = (path: string, message: string): void => void problems.push({ path, message });
  if (!isObj(doc)) return { ok: false, problems: [{ path: '', message: 'the document must be a JSON object' }] };
  for (const k of Object.keys(doc)) if (!KEYS.has(k)) bad(`/${k}`, 'unknown field');
  if (doc['schema_version'] !== COMMAND_SCHEMA_VERSION) bad('/schema_version', `must be ${COMMAND_SCHEMA_VERSION}`);
  const opId = doc['operation_id'];
  if (typeof opId !== 'string' || !OPERATION_ID_PATTERN.test(opId)) bad('/operation_id', 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$');
  const cell = doc['cell_id'];
  if (typeof cell !== 'string' || cell === '') bad('/cell_id', 'must be a non-empty string');
  else if (cellId !== null && cell !== cellId) bad('/cell_id', `names cell ${JSON.stringify(cell.slice(0, 64))}, not this cell`);
  const action = doc['action'];
  if (!(CELL_ACTIONS as readonly unknown[]).includes(action)) bad('/action', `must be one of ${CELL_ACTIONS.join(', ')}`);
  const targets = doc['targets'];
  const generation = doc['generation'];
  const dryRun = doc['dry_run'];
  if (action === 'reconcile') {
    if (targets !== undefined) bad('/targets', 'a reconcile names no targets (it converges the whole inventory)');
    if (!isGeneration(generation)) bad('/generation', 'a reconcile needs the previewed inventory revision (an integer >= 0)');
    if (dryRun !== undefined && typeof dryRun !== 'boolean') bad('/dry_run', 'must be a boolean');
  } else if (action !== undefined && (CELL_ACTIONS as readonly unknown[]).includes(action)) {
    if (generation !== undefined) bad('/generation', `only a reconcile carries a generation`);
    if (dryRun !== undefined) bad('/dry_run', 'only a reconcile has a dry run');
    if (!Array.isArray(targets) || targets.length === 0 || targets.length > MAX_TARGETS) {
      bad('/targets', `must list 1 to ${MAX_TARGETS} VM names`);
    } else {
      const seen = new Set<string>();
      targets.forEach((t, i) => {
        if (typeof t !== 'string' || !VM_NAME_PATTERN.test(t)) bad(`/targets/${i}`, 'must match ^agent-[a-z0-9-]+$');
        else if (seen.has(t)) bad(`/targets/${i}`, 'is listed twice');
        else seen.add(t);
      });
    }
  }
  const hash = requestHash(doc);
  const given = doc['request_hash'];
  if (given !== undefined && (typeof given !== 'string' || !HASH_PATTERN.test(given)))
    bad('/request_hash', 'must be 64 lower-case hex digits');
  else if (given !== undefined && given !== hash) bad('/request_hash', HASH_MISMATCH);
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, value: doc as unknown as CellCommandDocument, hash };
}

/** Checks the body of a generation-only reconcile: exactly operation_id and generation. */
export function checkGenerationReconcile(body: unknown): Checked<GenerationReconcileRequest> {
  const problems: ValidationProblem[] = [];
  if (!isObj(body)) return { ok: false, problems: [{ path: '', message: 'the body must be a JSON object' }] };
  for (const k of Object.keys(body)) {
    if (k !== 'operation_id' && k !== 'generation') {
      problems.push({ path: `/${k}`, message: 'unknown field: a generation-only reconcile names only operation_id and generation' });
    }
  }
  const opId = body['operation_id'];
  if (typeof opId !== 'string' || !OPERATION_ID_PATTERN.test(opId)) {
    problems.push({ path: '/operation_id', message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' });
  }
  if (!isGeneration(body['generation'])) problems.push({ path: '/generation', message: 'must be an integer >= 0' });
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, value: body as unknown as GenerationReconcileRequest, hash: requestHash({ ...body, kind: 'generation_only' }) };
}

/** The action a stored request carried (for records read back). */
export function isCellAction(v: unknown): v is CellAction {
  return (CELL_ACTIONS as readonly unknown[]).includes(v);
}
