/**
 * tmux command lines for managed sessions. No shell is involved anywhere: the agent runs these
 * argvs directly (spawn / forkpty without a shell), so the only interpreter of our arguments is
 * tmux itself, and this module is the one place that knows its rules (checked against tmux 3.3a):
 *
 * - tmux splits its own argv into commands at every argument that ENDS in `;`, and turns a final
 *   `\;` into a literal `;`. {@link tmuxArg} escapes any argument carrying user text that way,
 *   which round-trips exactly (`x;` → `x\;` → `x;`, `x\;` → `x\\;` → `x\;`).
 * - `new-session -c` IS format-expanded (`#{…}`, `#(cmd)` would run a command): user directories
 *   never go there; the PTY command's working_dir (the tmux client's cwd) sets the session's.
 * - The shell command, `-e` values and the session name given here are not format-expanded;
 *   session names are validated anyway (letters, digits, `_`, `-`).
 * - The user command runs as `/bin/sh -c <command> sandboxd-session` (three arguments or more,
 *   so tmux execs it directly instead of through the user's default-shell, whose syntax may not
 *   be POSIX sh). A join argv runs as `/bin/sh -c 'exec "$@"' sandboxd-session <argv…>`.
 *
 * Managed sessions live on a private tmux server, socket name `sandboxd` (`tmux -L sandboxd`),
 * started with `-f /dev/null`: user configuration never changes how a managed session behaves, and
 * the user's own tmux sessions are not touched. Server options ({@link MANAGED_OPTIONS}): status
 * line off (the pane is the whole PTY, so `stty size` inside equals the PTY size), prefix None
 * (tmux is transparent: every key reaches the program), window-size latest, remain-on-exit off
 * (the session ends with its command), history-limit 50,000 lines, escape-time 0,
 * default-terminal screen-256color (present in every ncurses-base), exit-empty off (the server
 * stays up, idle, after its last session ended: otherwise a create racing the last session's end
 * connects to a dying server and fails with "server exited unexpectedly").
 *
 * Killing ({@link tmuxKillArgv}) needs nothing besides tmux and a POSIX shell: it reads /proc.
 */
import { execFile } from 'node:child_process';

export const DEFAULT_TMUX_SOCKET_NAME = 'sandboxd';
/** `$0` of the session's shell (visible in ps). */
export const SESSION_SHELL_NAME = 'sandboxd-session';
export const DEFAULT_HISTORY_LIMIT_LINES = 50_000;

/** Which tmux server: `-L name` (under TMUX_TMPDIR) or `-S path`. Default `-L sandboxd`. */
export type TmuxSocket = { readonly name: string } | { readonly path: string };

/** Server options set before every create: [flag, option, value]. */
export const MANAGED_OPTIONS: readonly (readonly [string, string, string])[] = [
  ['-g', 'status', 'off'],
  ['-g', 'prefix', 'None'],
  ['-g', 'window-size', 'latest'],
  ['-g', 'remain-on-exit', 'off'],
  ['-s', 'escape-time', '0'],
  ['-s', 'exit-empty', 'off'],
  ['-s', 'default-terminal', 'screen-256color'],
];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An argument for tmux's argv: a trailing `;` is escaped so tmux does not read a separator. */
export function tmuxArg(value: string): string {
  return value.endsWith(';') ? `${value.slice(0, -1)}\\;` : value;
}

export function socketArgs(socket: TmuxSocket = { name: DEFAULT_TMUX_SOCKET_NAME }): string[] {
  return 'path' in socket ? ['-S', socket.path] : ['-L', socket.name];
}

/** `=name`: exact-match target (tmux otherwise also accepts prefixes and patterns). */
export function exactTarget(sessionName: string): string {
  return `=${sessionName}`;
}

export interface TmuxCreateOptions {
  readonly socket?: TmuxSocket;
  /** Validated session name (it becomes the tmux name). */
  readonly sessionName: string;
  /** A shell command (sh -c). Exactly one of command / argv. */
  readonly command?: string;
  /** A program and its arguments, exec'd without a shell. */
  readonly argv?: readonly string[];
  readonly cols: number;
  readonly rows: number;
  /** Extra environment for the session's processes (names must be shell identifiers). */
  readonly env?: Readonly<Record<string, string>>;
  /** Default {@link DEFAULT_HISTORY_LIMIT_LINES}. */
  readonly historyLimitLines?: number;
}

/**
 * argv (starting with `tmux`) that the agent runs in a PTY to create the managed session, or
 * attach to it when it exists (`new-session -A`): a re-run after a lost PTY re-attaches.
 */
export function tmuxCreateArgv(o: TmuxCreateOptions): string[] {
  const hasCommand = o.command !== undefined;
  if (hasCommand === (o.argv !== undefined)) throw new TypeError('give exactly one of command and argv');
  if (o.argv !== undefined && o.argv.length === 0) throw new TypeError('argv must not be empty');
  if (!(Number.isInteger(o.cols) && o.cols > 0 && Number.isInteger(o.rows) && o.rows > 0))
    throw new RangeError('cols and rows must be positive integers');
  const argv = ['tmux', ...socketArgs(o.socket), '-f', '/dev/null', 'start-server', ';'];
  argv.push('set-option', '-g', 'history-limit', String(o.historyLimitLines ?? DEFAULT_HISTORY_LIMIT_LINES), ';');
  for (const [flag, name, value] of MANAGED_OPTIONS) argv.push('set-option', flag, name, value, ';');
  argv.push('new-session', '-A', '-s', o.sessionName, '-x', String(o.cols), '-y', String(o.rows));
  for (const [k, v] of Object.entries(o.env ?? {})) {
    if (!ENV_NAME.test(k)) throw new TypeError(`bad environment variable name ${JSON.stringify(k)}`);
    if (v.includes('\0')) throw new TypeError(`environment variable ${k} contains NUL`);
    argv.push('-e', tmuxArg(`${k}=${v}`));
  }
  argv.push('--', '/bin/sh', '-c');
  if (o.command !== undefined) argv.push(tmuxArg(o.command), SESSION_SHELL_NAME);
  else argv.push('exec "$@"', SESSION_SHELL_NAME, ...(o.argv ?? []).map(tmuxArg));
  return argv;
}

/** Attach to an existing session only (exits non-zero at once when it is gone). For re-attach. */
export function tmuxAttachArgv(o: { socket?: TmuxSocket; sessionName: string }): string[] {
  return ['tmux', ...socketArgs(o.socket), 'attach-session', '-t', exactTarget(o.sessionName)];
}

/** Exit 0 when the session exists. */
export function tmuxHasSessionArgv(o: { socket?: TmuxSocket; sessionName: string }): string[] {
  return ['tmux', ...socketArgs(o.socket), 'has-session', '-t', exactTarget(o.sessionName)];
}

const LIST_FORMAT = ['#{session_created}', '#{pane_pid}', '#{pane_width}', '#{pane_height}', '#{session_name}'].join('\t');

/** Every pane of every session on the server (parse with {@link parseTmuxPanes}). */
export function tmuxListPanesArgv(o: { socket?: TmuxSocket } = {}): string[] {
  return ['tmux', ...socketArgs(o.socket), 'list-panes', '-a', '-F', LIST_FORMAT];
}

export interface TmuxSessionInfo {
  readonly name: string;
  readonly createdAtSecs: number;
  readonly panePids: number[];
  /** Size of the first listed pane. */
  readonly cols: number;
  readonly rows: number;
}

/** Output of {@link tmuxListPanesArgv} → sessions (malformed lines are skipped). */
export function parseTmuxPanes(stdout: string): TmuxSessionInfo[] {
  const byName = new Map<string, TmuxSessionInfo>();
  for (const line of stdout.split('\n')) {
    const parts = line.split('\t');
    if (parts.length < 5) continue;
    const [created, pid, w, h] = parts.slice(0, 4).map(Number);
    const name = parts.slice(4).join('\t');
    if (![created, pid, w, h].every((n) => Number.isSafeInteger(n) && (n ?? -1) >= 0) || name === '') continue;
    const s = byName.get(name);
    if (s === undefined) byName.set(name, { name, createdAtSecs: created ?? 0, panePids: [pid ?? 0], cols: w ?? 0, rows: h ?? 0 });
    else s.panePids.push(pid ?? 0);
  }
  return [...byName.values()];
}

/** True for tmux's complaint that no server runs on the socket (an empty list, not an error). */
export function isNoServerError(stderr: string): boolean {
  return /no server running|error connecting to|No such file or directory/.test(stderr);
}

/** `<cols> <rows>` of the session's active pane (what `stty size` inside reports, swapped). */
export function tmuxPaneSizeArgv(o: { socket?: TmuxSocket; sessionName: string }): string[] {
  return ['tmux', ...socketArgs(o.socket), 'display-message', '-p', '-t', `${exactTarget(o.sessionName)}:`, '#{pane_width} #{pane_height}'];
}

/** The visible screen of the active pane as text. */
export function tmuxCapturePaneArgv(o: { socket?: TmuxSocket; sessionName: string }): string[] {
  return ['tmux', ...socketArgs(o.socket), 'capture-pane', '-p', '-t', `${exactTarget(o.sessionName)}:`];
}

/** Exit codes of {@link tmuxKillArgv}. */
export const TmuxKillExit = { killed: 0, notFound: 3, survivors: 4 } as const;

/**
 * Shell functions that end terminal sessions, reading /proc alone (no procps: a minimal guest has
 * no pgrep or pkill). `$pids` holds the sessions' leaders (a session id is its leader's pid).
 *   in_sessions        the pids of the live (not zombie) processes of those sessions
 *   children_of P      the pids of P's live children
 *   alive              true while any process of those sessions lives
 *   signal_sessions S G  S to every process of them, KILL to what is left after G seconds
 * Used by every backend's kill (tmux here, screen and native in src/sessions/session-backends.ts).
 */
export const TERMINAL_SESSION_FUNCS_SH = `in_sessions() {
  for f in /proc/[0-9]*/stat; do
    read -r l <"$f" 2>/dev/null || continue
    q=\${f#/proc/}
    q=\${q%/stat}
    set -- \${l##*) }
    [ "$1" = Z ] && continue
    for p in $pids; do [ "$4" = "$p" ] && { echo "$q"; break; }; done
  done
}
children_of() {
  for f in /proc/[0-9]*/stat; do
    read -r l <"$f" 2>/dev/null || continue
    q=\${f#/proc/}
    q=\${q%/stat}
    set -- "$1" \${l##*) }
    [ "$2" != Z ] && [ "$3" = "$1" ] && echo "$q"
  done
}
alive() { [ -n "$(in_sessions)" ]; }
signal_sessions() {
  for q in $(in_sessions); do kill "-$1" "$q" 2>/dev/null; done
  if [ "$1" != KILL ]; then
    i=0
    while alive && [ "$i" -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
  fi
  for q in $(in_sessions); do kill -KILL "$q" 2>/dev/null; done
}
`;

// $1 -L|-S, $2 socket, $3 session name, $4 signal name, $5 grace seconds. Every process whose
// session id is a pane's pid (the pane's whole terminal session: its job-control groups too) gets
// the signal; whatever is left after the grace period gets SIGKILL; then the tmux session goes;
// then we wait (≤ 5 s) until none of them is alive (zombies do not count).
const KILL_SCRIPT = `set -u
flag=$1 sock=$2 name=$3 sig=$4 grace=$5
pids=$(tmux "$flag" "$sock" list-panes -s -t "=$name" -F '#{pane_pid}' 2>/dev/null) || exit 3
[ -n "$pids" ] || exit 3
${TERMINAL_SESSION_FUNCS_SH}signal_sessions "$sig" "$grace"
tmux "$flag" "$sock" kill-session -t "=$name" 2>/dev/null
i=0
while alive && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if alive; then exit 4; fi
exit 0
`;

export interface TmuxKillOptions {
  readonly socket?: TmuxSocket;
  readonly sessionName: string;
  /** First signal; whatever survives `graceSeconds` gets KILL. */
  readonly signal: 'TERM' | 'KILL' | 'INT' | 'HUP';
  /** Default 5. */
  readonly graceSeconds?: number;
}

/**
 * argv of a one-shot (non-PTY) command that kills a managed session with every process of its
 * panes and verifies they are gone. Exit: 0 killed, 3 no such session, 4 survivors remained.
 */
export function tmuxKillArgv(o: TmuxKillOptions): string[] {
  const grace = o.graceSeconds ?? 5;
  if (!(Number.isInteger(grace) && grace >= 0 && grace <= 3600)) throw new RangeError('graceSeconds must be an integer 0..3600');
  const [flag, sock] = socketArgs(o.socket) as [string, string];
  return ['/bin/sh', '-c', KILL_SCRIPT, 'sandboxd-kill', flag, sock, o.sessionName, o.signal, String(grace)];
}

/** Meaning of the kill command's exit code: no such session counts as killed (nothing runs). */
export function killOutcomeOf(exitCode: number): 'killed' | 'not_found' | 'failed' {
  if (exitCode === TmuxKillExit.killed) return 'killed';
  if (exitCode === TmuxKillExit.notFound) return 'not_found';
  return 'failed';
}

export interface ExecResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs an argv locally without a shell (for the agent's tmux work and for tests). Resolves with
 * the exit code (128 + n when a signal ended it); rejects only when it cannot be started.
 */
export function execArgv(
  argv: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
): Promise<ExecResult> {
  const [file, ...args] = argv;
  if (file === undefined) return Promise.reject(new TypeError('empty argv'));
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { env: opts.env, cwd: opts.cwd, timeout: opts.timeoutMs ?? 30_000, maxBuffer: 4 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ exitCode: 0, stdout, stderr });
        const e = err as Error & { code?: unknown; signal?: NodeJS.Signals | null };
        if (typeof e.code === 'number') return resolve({ exitCode: e.code, stdout, stderr });
        if (e.signal) return resolve({ exitCode: 128 + (signalNumbers[e.signal] ?? 0), stdout, stderr });
        reject(e);
      },
    );
  });
}

const signalNumbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
