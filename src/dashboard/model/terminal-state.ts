/**
 * The terminal view's connection state (pty-ws.v1), as a reducer so the rules are testable
 * without a browser:
 *
 *   connecting ──role_assigned──► attached (observer | controller)
 *        ▲                            │ socket closed unexpectedly
 *        └──────── retry ◄── waiting ◄┘
 *   attached ──exit──► ended          any ──user closes──► closed
 *
 * Roles change on a live connection (pty.request_role). A controller request answered with
 * observer is "downgraded": another client holds the lease (reason `lease_held`); the view shows
 * why and offers "Take control" again. Input is only sent while the granted role is controller.
 * A reconnect resumes with replay_from = lastSeq + 1, and output at or below lastSeq is skipped,
 * so the same bytes are never printed twice.
 */

export type Role = 'controller' | 'observer';

export type TerminalPhase = 'connecting' | 'attached' | 'waiting' | 'ended' | 'closed';

export interface TerminalState {
  readonly phase: TerminalPhase;
  /** The role asked for on the current (or next) connection. */
  readonly requested: Role;
  /** The role granted (null until role_assigned on this connection). */
  readonly granted: Role | null;
  /** True when a controller request was granted as observer. */
  readonly downgraded: boolean;
  /** Why we are waiting / ended / the last server error. */
  readonly message: string;
  /** Consecutive failed connections (drives the backoff). */
  readonly failures: number;
  /** Highest output seq written to the screen (-1 before any). */
  readonly lastSeq: number;
}

export type TerminalEvent =
  | { readonly type: 'connect'; readonly role: Role }
  | { readonly type: 'request_role'; readonly role: Role }
  | { readonly type: 'role_assigned'; readonly granted: Role; readonly requested?: Role | undefined; readonly reason?: string | undefined }
  | { readonly type: 'replay_reset'; readonly fromSeq: number }
  | { readonly type: 'output'; readonly seq: number | undefined }
  | { readonly type: 'error'; readonly code: string; readonly message: string }
  | { readonly type: 'exit'; readonly exitCode: number | null }
  | { readonly type: 'socket_closed'; readonly code: number; readonly reason: string }
  | { readonly type: 'user_closed' };

export function initialTerminalState(role: Role = 'observer'): TerminalState {
  return { phase: 'connecting', requested: role, granted: null, downgraded: false, message: '', failures: 0, lastSeq: -1 };
}

/**
 * Close codes after which reconnecting cannot help: 1000 (the server ended the terminal), 1008,
 * 4400 (a frame it refused), 4404 (no such session), 4501 (unsupported backend). 1001 (server
 * stopping), 1006, 4408 (pong timeout) and 4413 (slow consumer) reconnect and resume.
 */
const FINAL_CLOSE_CODES = new Set([1000, 1008, 4400, 4404, 4501]);

/** Readable text of a role_assigned reason. */
function reasonText(reason: string | undefined): string {
  if (reason === undefined || reason === '' || reason === 'lease_held') return 'another client holds the controller lease';
  return reason.replace(/_/g, ' ');
}

export function reduceTerminal(s: TerminalState, ev: TerminalEvent): TerminalState {
  switch (ev.type) {
    case 'connect':
      return { ...s, phase: 'connecting', requested: ev.role, granted: null, downgraded: false, message: '' };
    case 'request_role':
      return { ...s, requested: ev.role };
    case 'role_assigned': {
      const requested = ev.requested ?? s.requested;
      const downgraded = requested === 'controller' && ev.granted === 'observer';
      return {
        ...s,
        phase: 'attached',
        requested,
        granted: ev.granted,
        downgraded,
        failures: 0,
        message: downgraded ? reasonText(ev.reason) : '',
      };
    }
    case 'replay_reset':
      // The server could not resume from our cursor: the screen is cleared and redrawn from fromSeq.
      return { ...s, lastSeq: ev.fromSeq - 1 };
    case 'output':
      return ev.seq !== undefined && ev.seq > s.lastSeq ? { ...s, lastSeq: ev.seq } : s;
    case 'error':
      return { ...s, message: `${ev.code}: ${ev.message}` };
    case 'exit':
      return {
        ...s,
        phase: 'ended',
        granted: null,
        message: ev.exitCode === null ? 'the session ended' : `the session ended (exit code ${ev.exitCode})`,
      };
    case 'socket_closed': {
      if (s.phase === 'ended' || s.phase === 'closed') return s;
      if (FINAL_CLOSE_CODES.has(ev.code))
        return {
          ...s,
          phase: 'ended',
          granted: null,
          message: ev.reason !== '' ? ev.reason : `the server closed the terminal (${ev.code})`,
        };
      const why = ev.reason !== '' ? ev.reason : s.phase === 'connecting' ? 'cannot connect' : 'connection lost';
      return {
        ...s,
        phase: 'waiting',
        granted: null,
        failures: s.failures + 1,
        message: s.message !== '' && s.phase === 'connecting' ? s.message : why,
      };
    }
    case 'user_closed':
      return { ...s, phase: 'closed', granted: null };
  }
}

/** True when an output frame should be written (not already shown from an earlier connection). */
export function isNewOutput(s: TerminalState, seq: number | undefined): boolean {
  return seq === undefined || seq > s.lastSeq;
}

/** The status line of the terminal view. */
export function terminalStatusText(s: TerminalState, nowMs = 0, retryAtMs = 0): string {
  switch (s.phase) {
    case 'connecting':
      return s.requested === 'controller' ? 'Connecting as controller…' : 'Connecting as observer…';
    case 'attached':
      if (s.granted === 'controller') return 'Controlling: your keystrokes and window size reach the terminal';
      return s.downgraded ? `Watching — control refused: ${s.message}` : 'Watching (read-only)';
    case 'waiting': {
      const secs = Math.max(0, Math.ceil((retryAtMs - nowMs) / 1000));
      return `Disconnected (${s.message}) — reconnecting${secs > 0 ? ` in ${secs}s` : '…'}`;
    }
    case 'ended':
      return `Ended: ${s.message}`;
    case 'closed':
      return 'Closed';
  }
}

/** replay_from for a (re)connection: the first seq not yet shown, or undefined for a fresh screen. */
export function replayFromOf(s: TerminalState): number | undefined {
  return s.lastSeq >= 0 ? s.lastSeq + 1 : undefined;
}
