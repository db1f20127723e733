/**
 * How each session backend/class pair runs on an agent (spec 4.2, issue 15 item 4): the argv of
 * the PTY command that starts the session, of the PTY command that re-attaches to it after the
 * agent lost the first one, of the one-shot has-session check and of the one-shot kill. Like
 * src/core/tmux-argv.ts, no shell parses our arguments: the agent execs these argvs, and user
 * text only ever reaches a script as a positional parameter (`"$@"`), never inside its text.
 *
 * | pair | start | re-attach | kill |
 * |---|---|---|---|
 * | tmux/managed | `tmux new-session -A` on the private `-L sandboxd` server (tmux-argv.ts) | `tmux attach-session` | tmux-argv.ts's script |
 * | screen/managed | `screen -S <name> <program>` (attaches instead when the name exists) | `screen -d -r <pid>.<name>` | window sessions signalled, `-X quit` |
 * | native/direct | the program itself is the PTY command | none: the session ends with its PTY command | the PTY command's terminal session signalled |
 *
 * GNU screen (checked against 4.9.0, Debian 12), and why the script is as it is:
 * - Sockets live in a private directory (`SCREENDIR=<runtime dir>/screen`, 0700), so `screen -ls`
 *   lists only sandboxd's sessions and the user's own are never touched; the runtime directory
 *   defaults to `/tmp/sandboxd-<uid>` on the agent (tests pass their own, as they do tmux sockets).
 * - `-S name`, `-r name`, `-X` and `-ls name` match session names by PREFIX (`-S pair` reaches
 *   `1234.pair2` when no `pair` exists), so every command resolves the exact `<pid>.<name>` from
 *   `screen -ls` first (session names are `[A-Za-z0-9_-]`, never a dot) and addresses that.
 * - Configuration: `SYSSCREENRC=/dev/null` and `-c <runtime dir>/screenrc` (rewritten at each
 *   start, atomically): no system or user screenrc changes a managed session. In it: no command
 *   character (`escape ""`: every key reaches the program, like tmux's prefix None), no status or
 *   hardstatus line (the window is the whole PTY, so `stty size` inside equals the PTY size), no
 *   startup message, no utmp entry (`deflogin off`), no flow control (^S/^Q reach the program),
 *   50,000 lines of scrollback, `TERM=screen-256color`. `-U`: the display speaks UTF-8 whatever
 *   the agent's locale.
 * - The session survives its PTY command: a hangup detaches the display (autodetach, the default).
 *   The window's processes are the SCREEN server's children, each leading its own terminal session.
 *
 * native/direct: the PTY command's leader writes `<pid> <start time>` (from /proc) to
 * `<runtime dir>/native/<name>.pid` and execs the program, so the kill finds the terminal session
 * (its id is the leader's pid) and a reused pid is never mistaken for it.
 *
 * The kill scripts exit like tmux-argv.ts's (0 killed, 3 no such session, 4 survivors remained)
 * and share its /proc-only functions (no procps needed): signal every
 * process of the session's terminal sessions, KILL what is left after the grace period, end the
 * multiplexer, wait (≤ 5 s) until none is alive (zombies do not count).
 */
import type { SessionBackend, SessionClass } from './binding/codes.js';
import {
  SESSION_SHELL_NAME,
  TERMINAL_SESSION_FUNCS_SH,
  tmuxAttachArgv,
  tmuxCreateArgv,
  tmuxHasSessionArgv,
  tmuxKillArgv,
  type TmuxSocket,
} from '../core/tmux-argv.js';

/** First signal of a kill; survivors get KILL after the grace period. */
export type BackendKillSignal = 'TERM' | 'KILL' | 'INT' | 'HUP';

/** Where the plans' sessions live on the agent. */
export interface BackendContext {
  /** The tmux server; default `-L sandboxd`. */
  readonly tmuxSocket?: TmuxSocket;
  /** screen sockets and rc, native pid files; default `/tmp/sandboxd-<uid>` on the agent. */
  readonly runtimeDir?: string;
}

/** What runs in the session: exactly one of `argv` (exec'd), `command` (`/bin/sh -lc`), neither (login shell). */
export interface SessionProgram {
  readonly argv?: readonly string[];
  readonly command?: string;
}

export interface BackendStart {
  /** Validated (`[A-Za-z0-9][A-Za-z0-9_-]*`): it names the tmux/screen session and the pid file. */
  readonly sessionName: string;
  readonly program: SessionProgram;
  readonly cols: number;
  readonly rows: number;
  /** For tmux also passed with `-e` (its server may predate this client and its environment). */
  readonly env?: Readonly<Record<string, string>>;
}

export interface BackendKill {
  readonly sessionName: string;
  readonly signal: BackendKillSignal;
  /** Seconds between the first signal and KILL, 0..3600. */
  readonly graceSeconds: number;
}

/** One supported backend/class pair. */
export interface SessionBackendPlan {
  readonly backend: SessionBackend;
  readonly sessionClass: SessionClass;
  /** The session outlives its PTY command, and a new PTY command can attach to it. */
  readonly reattachable: boolean;
  /** Programs it needs on the agent besides sh and coreutils (the host probe checks them). */
  readonly requires: readonly string[];
  /** argv of the PTY command that creates the session and attaches to it. */
  startArgv(s: BackendStart): string[];
  /** argv of the PTY command that attaches to the surviving session (undefined: not re-attachable). */
  reattachArgv(sessionName: string): string[] | undefined;
  /** argv of a one-shot command that exits 0 while the session exists (undefined: not re-attachable). */
  hasSessionArgv(sessionName: string): string[] | undefined;
  /** argv of the one-shot kill (exit 0 killed, 3 not found, 4 survivors). */
  killArgv(k: BackendKill): string[];
}

/** The pairs the session host advertises (spec 4.2: native/direct, screen/managed, zellij/managed, tmux/managed). */
export const ADVERTISED_PAIRS: readonly { readonly backend: SessionBackend; readonly sessionClass: SessionClass }[] = [
  { backend: 'tmux', sessionClass: 'managed' },
  { backend: 'screen', sessionClass: 'managed' },
  { backend: 'native', sessionClass: 'direct' },
  { backend: 'zellij', sessionClass: 'managed' },
];

/** Backends whose sessions survive a lost PTY command. */
export const REATTACHABLE_BACKENDS: ReadonlySet<string> = new Set(['tmux', 'screen']);

// The user's login shell: passwd's entry (unless nologin/false), else $SHELL, else bash, else sh.
const LOGIN_SHELL_SCRIPT = `s=$(getent passwd "$(id -u)" 2>/dev/null); s=\${s##*:}
case $s in ''|*/nologin|*/false) s=\${SHELL:-} ;; esac
{ [ -n "$s" ] && [ -x "$s" ]; } || s=/bin/bash
[ -x "$s" ] || s=/bin/sh
exec "$s" -l`;

/** The argv that runs the program: as given, `/bin/sh -lc command`, or the login shell with `-l`. */
export function programArgv(p: SessionProgram): string[] {
  if (p.argv !== undefined && p.command !== undefined) throw new TypeError('give at most one of argv and command');
  if (p.argv !== undefined) {
    if (p.argv.length === 0) throw new TypeError('argv must not be empty');
    return [...p.argv];
  }
  if (p.command !== undefined) return ['/bin/sh', '-lc', p.command, SESSION_SHELL_NAME];
  return ['/bin/sh', '-c', LOGIN_SHELL_SCRIPT, SESSION_SHELL_NAME];
}

// Shared shell parts. $base: the runtime directory ($2; empty means the default).
const PRELUDE = `set -u
base=\${2:-/tmp/sandboxd-$(id -u)}
# A subshell, so that umask 077 does not reach the session's programs.
ensure_dir() (
  umask 077
  mkdir -p "$base/$1" 2>/dev/null
  if [ -L "$base" ] || [ ! -O "$base" ] || [ ! -O "$base/$1" ]; then
    echo "sandboxd: $base/$1 is missing or not owned by $(id -un)" >&2
    exit 1
  fi
  chmod 700 "$base" "$base/$1"
)
starttime() { read -r l <"/proc/$1/stat" 2>/dev/null || return 0; set -- \${l##*) }; echo "\${20}"; }
state() { read -r l <"/proc/$1/stat" 2>/dev/null || return 0; set -- \${l##*) }; echo "$1"; }
${TERMINAL_SESSION_FUNCS_SH}`;

// $pids: leaders of the terminal sessions to end. Needs sig and grace set.
const KILL_SESSIONS = `signal_sessions "$sig" "$grace"\n`;

const SCREEN_RC = [
  'startup_message off',
  'escape ""',
  'deflogin off',
  'hardstatus off',
  'vbell off',
  'bell_msg ""',
  'defflow off',
  'defutf8 on',
  'altscreen on',
  'autodetach on',
  'defscrollback 50000',
  'term screen-256color',
];

// $1 mode: start | attach | has | kill; $2 runtime dir; $3 session name;
// start: $4… the window's argv; kill: $4 signal, $5 grace seconds.
const SCREEN_SCRIPT = `${PRELUDE}mode=$1 name=$3
shift 3
ensure_dir screen || exit 125
export SCREENDIR="$base/screen" SYSSCREENRC=/dev/null
rc=$base/screenrc
sessions() { screen -ls 2>/dev/null | sed -n "/(Dead/d; s/^[[:space:]]*\\([0-9][0-9]*\\)\\.$name[[:space:]].*/\\1/p"; }
first=
for s in $(sessions); do first=$s; break; done
case $mode in
has) [ -n "$first" ] && exit 0; exit 1 ;;
start | attach)
  printf '%s\\n' ${SCREEN_RC.map((l) => `'${l.replace(/'/g, `'\\''`)}'`).join(' ')} >"$rc.$$" && mv -f "$rc.$$" "$rc" || exit 125
  [ -n "$first" ] && exec screen -U -c "$rc" -d -r "$first.$name"
  [ "$mode" = attach ] && { echo "sandboxd: no screen session $name" >&2; exit 1; }
  exec screen -U -c "$rc" -S "$name" /bin/sh -c 'unset SYSSCREENRC; exec "$@"' ${SESSION_SHELL_NAME} "$@" ;;
kill)
  sig=$1 grace=$2
  servers=$(sessions)
  [ -n "$servers" ] || exit 3
  pids=
  for s in $servers; do pids="$pids $(children_of "$s")"; done
${KILL_SESSIONS}  for s in $servers; do screen -S "$s.$name" -X quit >/dev/null 2>&1; done
  up() {
    alive && return 0
    for s in $servers; do st=$(state "$s"); [ -n "$st" ] && [ "$st" != Z ] && return 0; done
    return 1
  }
  i=0
  while up && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  screen -wipe >/dev/null 2>&1
  if up; then exit 4; fi
  exit 0 ;;
esac
exit 2
`;

// $1 mode: start | kill; $2 runtime dir; $3 session name;
// start: $4… the program's argv (exec'd by the PTY command's leader); kill: $4 signal, $5 grace seconds.
const NATIVE_SCRIPT = `${PRELUDE}mode=$1 name=$3
shift 3
ensure_dir native || exit 125
f=$base/native/$name.pid
case $mode in
start)
  for g in "$base/native"/*.pid; do
    [ -f "$g" ] && read -r p s <"$g" && [ "$(starttime "$p")" != "$s" ] && rm -f "$g"
  done
  printf '%s %s\\n' "$$" "$(starttime $$)" >"$f.$$" && mv -f "$f.$$" "$f" || exit 125
  exec "$@" ;;
kill)
  sig=$1 grace=$2
  [ -f "$f" ] && read -r pid start <"$f" || exit 3
  now=$(starttime "$pid")
  # A live process of another start time reuses the pid: ours is gone, and so is its session
  # (a session id is never reused while a process of that session lives).
  if [ -n "$now" ] && [ "$now" != "$start" ]; then rm -f "$f"; exit 3; fi
  pids=$pid
  if [ -z "$now" ] && ! alive; then rm -f "$f"; exit 3; fi
${KILL_SESSIONS}  i=0
  while alive && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  if alive; then exit 4; fi
  rm -f "$f"
  exit 0 ;;
esac
exit 2
`;

function checkGrace(graceSeconds: number): string {
  if (!(Number.isInteger(graceSeconds) && graceSeconds >= 0 && graceSeconds <= 3600))
    throw new RangeError('graceSeconds must be an integer 0..3600');
  return String(graceSeconds);
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

function checkName(sessionName: string): string {
  if (!NAME.test(sessionName)) throw new TypeError(`bad session name ${JSON.stringify(sessionName.slice(0, 80))}`);
  return sessionName;
}

function tmuxPlan(ctx: BackendContext): SessionBackendPlan {
  const socket = ctx.tmuxSocket === undefined ? {} : { socket: ctx.tmuxSocket };
  return {
    backend: 'tmux',
    sessionClass: 'managed',
    reattachable: true,
    requires: ['tmux'],
    startArgv: (s) =>
      tmuxCreateArgv({
        ...socket,
        sessionName: checkName(s.sessionName),
        argv: programArgv(s.program),
        cols: s.cols,
        rows: s.rows,
        ...(s.env !== undefined && { env: s.env }),
      }),
    reattachArgv: (sessionName) => tmuxAttachArgv({ ...socket, sessionName: checkName(sessionName) }),
    hasSessionArgv: (sessionName) => tmuxHasSessionArgv({ ...socket, sessionName: checkName(sessionName) }),
    killArgv: (k) => tmuxKillArgv({ ...socket, sessionName: checkName(k.sessionName), signal: k.signal, graceSeconds: k.graceSeconds }),
  };
}

function screenPlan(ctx: BackendContext): SessionBackendPlan {
  const script = (mode: string, sessionName: string, ...rest: string[]): string[] => [
    '/bin/sh',
    '-c',
    SCREEN_SCRIPT,
    'sandboxd-screen',
    mode,
    ctx.runtimeDir ?? '',
    checkName(sessionName),
    ...rest,
  ];
  return {
    backend: 'screen',
    sessionClass: 'managed',
    reattachable: true,
    requires: ['screen'],
    startArgv: (s) => script('start', s.sessionName, ...programArgv(s.program)),
    reattachArgv: (sessionName) => script('attach', sessionName),
    hasSessionArgv: (sessionName) => script('has', sessionName),
    killArgv: (k) => script('kill', k.sessionName, k.signal, checkGrace(k.graceSeconds)),
  };
}

function nativePlan(ctx: BackendContext): SessionBackendPlan {
  const script = (mode: string, sessionName: string, ...rest: string[]): string[] => [
    '/bin/sh',
    '-c',
    NATIVE_SCRIPT,
    'sandboxd-native',
    mode,
    ctx.runtimeDir ?? '',
    checkName(sessionName),
    ...rest,
  ];
  return {
    backend: 'native',
    sessionClass: 'direct',
    reattachable: false,
    requires: [],
    startArgv: (s) => script('start', s.sessionName, ...programArgv(s.program)),
    reattachArgv: () => undefined,
    hasSessionArgv: () => undefined,
    killArgv: (k) => script('kill', k.sessionName, k.signal, checkGrace(k.graceSeconds)),
  };
}

/**
 * The plan of a backend/class pair, or undefined when sandboxd cannot run it (zellij/managed: no
 * Debian 12 package, so nothing installs or tests it; any other pairing, e.g. native/managed).
 */
export function sessionBackendPlan(backend: string, sessionClass: string, ctx: BackendContext = {}): SessionBackendPlan | undefined {
  if (backend === 'tmux' && sessionClass === 'managed') return tmuxPlan(ctx);
  if (backend === 'screen' && sessionClass === 'managed') return screenPlan(ctx);
  if (backend === 'native' && sessionClass === 'direct') return nativePlan(ctx);
  return undefined;
}
