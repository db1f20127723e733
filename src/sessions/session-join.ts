/**
 * The selection of a pty.join_session that starts a session (spec 4.2, issue 15 item 4), checked
 * before anything runs: the hub decodes the frame (binding/decode.ts) and hands the selection to
 * SessionService.startForJoin, which calls {@link checkJoinStart} and then the host's pairs.
 *
 * Rules (README, "Session backends"): the session id is a UUID (8-4-4-4-12 hex, any case, kept as
 * given; it is the id in the URL the client joined); at most one of argv and command, argv not
 * empty; env names are shell identifiers; cols and rows 1..1024; no NUL anywhere. A backend or
 * class name outside spec 4.2's lists is `*.not_implemented` like an unavailable one.
 */
import { SvcError } from '../core/errors.js';
import { LIMITS } from './binding/codes.js';
import type { SessionProgram } from './session-backends.js';
import type { JoinSelection } from './session-hub.js';
import { SESSION_BACKENDS, SESSION_CLASSES, type SessionBackendName, type SessionClassName } from './session-types.js';

/** What a starting join selected: the hub's JoinSelection. */
export type JoinStart = JoinSelection;

/** A join's selection, checked. */
export interface CheckedJoin {
  readonly backend: SessionBackendName;
  readonly sessionClass: SessionClassName;
  readonly program: SessionProgram;
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly cols: number;
  readonly rows: number;
  /** The record's `command`: the command, the argv shell-quoted, or empty (login shell). */
  readonly display: string;
}

export const SESSION_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PLAIN_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/;

function invalid(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

function noNul(value: string, what: string): string {
  if (value.includes('\0')) throw invalid(`${what} contains NUL`);
  return value;
}

/** One argument as sh would read it back (plain when safe, else single-quoted). */
export function shellQuote(arg: string): string {
  return PLAIN_WORD.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** Checks a starting join's selection. Throws SvcError request.invalid or `*.not_implemented`. */
export function checkJoinStart(sessionId: string, sel: JoinStart): CheckedJoin {
  if (!SESSION_ID_PATTERN.test(sessionId)) throw invalid(`session id ${JSON.stringify(sessionId.slice(0, 64))} is not a UUID`);
  if (!(SESSION_BACKENDS as readonly string[]).includes(sel.backend))
    throw new SvcError('session_backend.not_implemented', `unknown session_backend ${JSON.stringify(sel.backend.slice(0, 32))}`);
  if (!(SESSION_CLASSES as readonly string[]).includes(sel.class))
    throw new SvcError('session_class.not_implemented', `unknown session_class ${JSON.stringify(sel.class.slice(0, 32))}`);
  for (const [what, n] of [
    ['cols', sel.cols],
    ['rows', sel.rows],
  ] as const) {
    if (!(Number.isInteger(n) && n >= 1 && n <= LIMITS.maxTerminalDim))
      throw invalid(`${what} must be an integer 1..${LIMITS.maxTerminalDim}`);
  }
  if (sel.argv !== undefined && sel.command !== undefined) throw invalid('argv and command are exclusive');
  let program: SessionProgram = {};
  let display = '';
  if (sel.argv !== undefined) {
    if (sel.argv.length < 1 || sel.argv.length > LIMITS.maxArgs) throw invalid(`argv must hold 1..${LIMITS.maxArgs} strings`);
    if (sel.argv[0] === '') throw invalid('argv[0] must not be empty');
    sel.argv.forEach((a, i) => noNul(a, `argv[${i}]`));
    program = { argv: [...sel.argv] };
    display = sel.argv.map(shellQuote).join(' ');
  } else if (sel.command !== undefined) {
    if (sel.command.trim() === '') throw invalid('command must not be blank');
    program = { command: noNul(sel.command, 'command') };
    display = sel.command;
  }
  let env: Record<string, string> | undefined;
  if (sel.env !== undefined) {
    const names = Object.keys(sel.env);
    if (names.length > LIMITS.maxEnvVars) throw invalid(`env: at most ${LIMITS.maxEnvVars} variables`);
    env = {};
    for (const name of names) {
      if (!ENV_NAME.test(name)) throw invalid(`env: bad variable name ${JSON.stringify(name.slice(0, 64))}`);
      const value = sel.env[name];
      if (typeof value !== 'string') throw invalid(`env.${name} must be a string`);
      Object.defineProperty(env, name, { value: noNul(value, `env.${name}`), enumerable: true, writable: true, configurable: true });
    }
  }
  if (sel.cwd !== undefined && (sel.cwd === '' || sel.cwd.length > LIMITS.maxCwdChars))
    throw invalid(`cwd must be 1..${LIMITS.maxCwdChars} characters`);
  return {
    backend: sel.backend as SessionBackendName,
    sessionClass: sel.class as SessionClassName,
    program,
    ...(sel.cwd !== undefined && { cwd: noNul(sel.cwd, 'cwd') }),
    ...(env !== undefined && { env }),
    cols: sel.cols,
    rows: sel.rows,
    display,
  };
}
