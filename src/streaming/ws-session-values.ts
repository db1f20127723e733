/**
 * Field checks for the dashboard WebSocket's session messages (ws-session-messages.ts): a bad
 * field is an SvcError `request.invalid` naming it, which the connection gets as an error message.
 */
import { SvcError } from '../core/errors.js';
import { DEFAULT_SESSION_COMMAND } from '../sessions/session-types.js';
import type { SessionSignal } from '../wire/sessions.js';

/** A decoded JSON message. */
export type Fields = Readonly<Record<string, unknown>>;

const kMaxIdChars = 256;
/** No control characters in ids and names. */
const kIdPattern = /^\P{Cc}+$/u;

export function isSvcError(err: unknown): err is SvcError {
  return err instanceof SvcError;
}

/** A required string field (an id or name unless `allowEmpty`: 1..256 characters, no control characters). */
export function field(m: Fields, key: string, o: { allowEmpty?: boolean; maxLength?: number } = {}): string {
  const v = m[key];
  const max = o.maxLength ?? kMaxIdChars;
  if (typeof v !== 'string') throw new SvcError('request.invalid', `${key} must be a string`);
  if (v.length > max) throw new SvcError('request.invalid', `${key} is longer than ${max} characters`);
  if (o.allowEmpty !== true && !kIdPattern.test(v))
    throw new SvcError('request.invalid', `${key} must be 1-${max} characters without control characters`);
  return v;
}

/** An optional integer field in [min, max]; undefined when absent. */
export function optionalInt(m: Fields, key: string, min: number, max: number): number | undefined {
  const v = m[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new SvcError('request.invalid', `${key} must be an integer from ${min} to ${max}`);
  }
  return v;
}

/** The reference's numeric kill signal (absent: TERM). */
export function signalOf(v: unknown): SessionSignal {
  if (v === undefined || v === null) return 'TERM';
  const byNumber: Record<number, SessionSignal> = { 1: 'HUP', 2: 'INT', 9: 'KILL', 15: 'TERM' };
  const s = typeof v === 'number' ? byNumber[v] : undefined;
  if (s === undefined) throw new SvcError('request.invalid', 'signal must be 1 (HUP), 2 (INT), 9 (KILL) or 15 (TERM)');
  return s;
}

/** A word as /bin/sh reads it literally. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * create_session's command, args and working_dir as one `/bin/sh -c` command line (the sessions
 * API's `command`): each word quoted, `cd` first when a working directory is given; undefined
 * (the default shell) when neither a command nor a directory is given.
 */
export function commandLine(m: Fields): string | undefined {
  const command = m['command'] ?? '';
  const args = m['args'] ?? [];
  const dir = m['working_dir'] ?? null;
  if (typeof command !== 'string') throw new SvcError('request.invalid', 'command must be a string');
  if (!Array.isArray(args) || !args.every((a): a is string => typeof a === 'string')) {
    throw new SvcError('request.invalid', 'args must be an array of strings');
  }
  if (dir !== null && typeof dir !== 'string') throw new SvcError('request.invalid', 'working_dir must be a string or null');
  if (command === '' && args.length > 0) throw new SvcError('request.invalid', 'args need a command');
  const words = command === '' ? [] : [command, ...args].map(shellQuote);
  if (dir === null || dir === '') return words.length === 0 ? undefined : words.join(' ');
  return `cd -- ${shellQuote(dir)} && exec ${words.length === 0 ? DEFAULT_SESSION_COMMAND : words.join(' ')}`;
}
