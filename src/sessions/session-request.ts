/**
 * Validation of the sessions routes' input (spec 4.2).
 *
 * POST /api/v1/agents/{id}/sessions, body (all optional; no body = `{}`):
 *   command          string, 1..8192 characters, not blank, no NUL or control characters other
 *                    than tab and newline; default `bash`. Run as `/bin/sh -c <command>`.
 *   session_name     ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ (it is also the tmux session name, and tmux
 *                    forbids `.` and `:`); default `terminal-<8 hex>`.
 *   session_backend  `tmux`; `screen`, `zellij`, `native` → 501 session_backend.not_implemented;
 *                    any other value → 400 request.invalid (a typo is not a missing feature).
 *   session_class    `managed`; any other well-formed name (`direct`, …) → 501
 *                    session_class.not_implemented (the spec: "others fail"); malformed → 400.
 * Unknown fields → 400. Checks run in that order: shape, unknown fields, types, backend, class.
 *
 * DELETE …/sessions/{session}?signal=TERM|KILL|INT|HUP (default TERM; case-insensitive, an
 * optional SIG prefix is accepted); anything else, or the parameter twice → 400.
 */
import { SvcError } from '../core/errors.js';
import type { SessionSignal } from '../wire/sessions.js';
import { DEFAULT_SESSION_COMMAND } from './session-types.js';

export const kMaxCommandChars = 8192;
export const SESSION_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const KNOWN_UNSUPPORTED_BACKENDS = new Set(['screen', 'zellij', 'native']);
const CLASS_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;
const ALLOWED_FIELDS = new Set(['command', 'session_name', 'session_backend', 'session_class']);
// C0 controls except tab (0x09) and newline (0x0a), and DEL.
// eslint-disable-next-line no-control-regex
const BAD_COMMAND_CHARS = /[\x00-\x08\x0b-\x1f\x7f]/;

export interface CreateSessionRequest {
  readonly command: string;
  /** Undefined: the registry generates one. */
  readonly sessionName: string | undefined;
  readonly sessionBackend: 'tmux';
  readonly sessionClass: 'managed';
}

function invalid(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

/** Validates a parsed JSON body (undefined when none was sent). Throws SvcError (400 / 501). */
export function parseCreateSessionBody(body: unknown): CreateSessionRequest {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) throw invalid('the body must be a JSON object');
  const o = body as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !ALLOWED_FIELDS.has(k));
  if (unknown.length > 0) {
    throw invalid(
      `unknown field${unknown.length > 1 ? 's' : ''}: ${unknown
        .slice(0, 5)
        .map((k) => JSON.stringify(k.slice(0, 64)))
        .join(', ')}; allowed: ${[...ALLOWED_FIELDS].join(', ')}`,
    );
  }

  let command = DEFAULT_SESSION_COMMAND;
  if (o['command'] !== undefined) {
    const c = o['command'];
    if (typeof c !== 'string') throw invalid('command must be a string');
    if (c.length > kMaxCommandChars) throw invalid(`command is longer than ${kMaxCommandChars} characters`);
    if (c.trim() === '') throw invalid('command must not be blank');
    if (BAD_COMMAND_CHARS.test(c)) throw invalid('command must not contain NUL or control characters other than tab and newline');
    command = c;
  }

  let sessionName: string | undefined;
  if (o['session_name'] !== undefined) {
    const n = o['session_name'];
    if (typeof n !== 'string' || !SESSION_NAME_PATTERN.test(n)) {
      throw invalid('session_name must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ (letters, digits, _ and -, at most 64)');
    }
    sessionName = n;
  }

  const backend = o['session_backend'];
  const cls = o['session_class'];
  if (backend !== undefined && typeof backend !== 'string') throw invalid('session_backend must be a string');
  if (cls !== undefined && typeof cls !== 'string') throw invalid('session_class must be a string');
  if (backend !== undefined && backend !== 'tmux') {
    if (KNOWN_UNSUPPORTED_BACKENDS.has(backend)) {
      throw new SvcError('session_backend.not_implemented', `session_backend ${backend} is not implemented; supported: tmux`);
    }
    throw invalid(`unknown session_backend ${JSON.stringify(backend.slice(0, 64))}; supported: tmux`);
  }
  if (cls !== undefined && cls !== 'managed') {
    if (CLASS_NAME_PATTERN.test(cls))
      throw new SvcError('session_class.not_implemented', `session_class ${cls} is not implemented; supported: managed`);
    throw invalid(`malformed session_class ${JSON.stringify(cls.slice(0, 64))}; supported: managed`);
  }
  return { command, sessionName, sessionBackend: 'tmux', sessionClass: 'managed' };
}

/** The signals of the `signal` query parameter (src/wire/sessions.ts: SessionSignal) and their numbers. */
export const KILL_SIGNALS = { TERM: 15, KILL: 9, INT: 2, HUP: 1 } as const satisfies Record<SessionSignal, number>;
export type KillSignalName = keyof typeof KILL_SIGNALS;

/** The `signal` query parameter of DELETE. Throws 400 request.invalid. */
export function parseKillSignal(query: URLSearchParams): KillSignalName {
  const all = query.getAll('signal');
  if (all.length === 0) return 'TERM';
  if (all.length > 1) throw invalid('signal given more than once');
  let s = (all[0] ?? '').trim().toUpperCase();
  if (s.startsWith('SIG')) s = s.slice(3);
  if (!Object.hasOwn(KILL_SIGNALS, s))
    throw invalid(`signal must be TERM, KILL, INT or HUP, got ${JSON.stringify((all[0] ?? '').slice(0, 32))}`);
  return s as KillSignalName;
}
