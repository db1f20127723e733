/**
 * sbx exit codes, documented in `sbx --help` and the README, and how errors map to them.
 */
import { ApiError } from '../client/api-error.js';
import { UsageError } from './args.js';
import { ConfigFileError } from './config.js';

export const ExitCode = {
  OK: 0,
  /** Anything not covered below (403, 410, a local I/O error, ...). */
  OTHER: 1,
  /** Bad command line, bad contexts file, or input the server rejected as invalid (400, 413). */
  USAGE: 2,
  /** The thing named does not exist (404). */
  NOT_FOUND: 3,
  /** It exists but is in the wrong state, or the name is taken (409). */
  CONFLICT: 4,
  /** The server failed (5xx), is unreachable, or did not answer in time. */
  SERVER: 5,
  /** The command worked but what it waited for failed: an operation or task ended failed or cancelled. */
  FAILED: 6,
  /** Ctrl-C (or SIGTERM) while waiting; what was waited for goes on. Following a stream ends with 0. */
  INTERRUPTED: 130,
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** The table printed by `sbx --help`. */
export const EXIT_CODE_TABLE: readonly { code: ExitCodeValue; meaning: string }[] = [
  { code: ExitCode.OK, meaning: 'success' },
  { code: ExitCode.OTHER, meaning: 'other error (403, 410, local I/O, ...)' },
  { code: ExitCode.USAGE, meaning: 'usage: bad command line or contexts file, or the server rejected the input (400, 413)' },
  { code: ExitCode.NOT_FOUND, meaning: 'not found (404)' },
  { code: ExitCode.CONFLICT, meaning: 'conflict: wrong state or name in use (409; also cancelling a finished task)' },
  { code: ExitCode.SERVER, meaning: 'server error (5xx), unreachable, or timed out' },
  { code: ExitCode.FAILED, meaning: 'the operation or task waited for failed (or was cancelled)' },
  { code: ExitCode.INTERRUPTED, meaning: 'interrupted while waiting (Ctrl-C); ending a tail or --follow with Ctrl-C is 0' },
];

/**
 * An operation or task that ended badly (exit code 6); code/message are the server's. With
 * --json the command prints the final operation or task before throwing it, and no error
 * envelope follows.
 */
export class OutcomeFailedError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'OutcomeFailedError';
    this.code = code;
  }
}

/** The exit code of an HTTP status. */
export function exitCodeForStatus(status: number): ExitCodeValue {
  if (status === 0 || status >= 500) return ExitCode.SERVER;
  if (status === 404) return ExitCode.NOT_FOUND;
  if (status === 409) return ExitCode.CONFLICT;
  if (status === 400 || status === 413 || status === 422) return ExitCode.USAGE;
  return ExitCode.OTHER;
}

/** Error codes that are state conflicts although the spec gives them another status (task cancel: 400). */
const CONFLICT_CODES: ReadonlySet<string> = new Set(['task.not_cancellable']);

/** The exit code of anything a command threw. */
export function exitCodeFor(err: unknown): ExitCodeValue {
  if (err instanceof UsageError || err instanceof ConfigFileError) return ExitCode.USAGE;
  if (err instanceof ApiError) return CONFLICT_CODES.has(err.code) ? ExitCode.CONFLICT : exitCodeForStatus(err.status);
  if (err instanceof OutcomeFailedError) return ExitCode.FAILED;
  return ExitCode.OTHER;
}

/** The line printed for an error: `sbx: VM_NOT_FOUND: VM 'agent-x' not found`. */
export function errorLine(err: unknown): string {
  if (err instanceof ApiError || err instanceof OutcomeFailedError) return `sbx: ${err.code}: ${err.message}`;
  if (err instanceof UsageError) return `sbx: ${err.message}${err.hint !== undefined ? `\n${err.hint}` : ''}`;
  if (err instanceof Error) return `sbx: ${err.message}`;
  return `sbx: ${String(err)}`;
}
