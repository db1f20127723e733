/**
 * The terminal view's connection state (the pty-ws.v1 binding), as a reducer so the rules are
 * testable without a browser:
 *
 *   connecting ──role_assigned──► attached (observer | controller)
 *        ▲                            │ socket closed unexpectedly
 *        └──────── retry ◄── waiting ◄┘
 *   attached ──exit──► ended          any ──user closes──► closed
 *
 * Roles change on a live connection (pty.request_role). A controller request answered with
 * observer is "downgraded" (RoleAssigned says so): another client holds the lease; the view shows
 * why and offers "Take control" again. Input is only sent while the granted role is controller.
 * A reconnect resumes with replay_from = the last connection's lastSequence; the connection
 * (src/client/pty-ws.ts) skips what the screen already shows and hands over keyframes to redraw.
 * A close after binding_goodbye `server_shutdown` or `rate_limited` reconnects too.
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
  /** Highest session sequence received by the last connection (-1 before any): the next replay_from. */
  readonly lastSequence: number;
  /** Who controls and who watches (MembershipChanged), null before the first. */
  readonly members: { readonly controllers: number; readonly observers: number } | null;
  /** binding_goodbye's reason on this connection, until the next connect. */
  readonly goodbye: string | null;
}

export type TerminalEvent =
  /** `lastSequence`: the replaced connection's, when one was still open. */
  | { readonly type: 'connect'; readonly role: Role; readonly lastSequence?: number | undefined }
  | { readonly type: 'request_role'; readonly role: Role }
  | {
      readonly type: 'role_assigned';
      readonly granted: Role;
      readonly requested?: Role | undefined;
      readonly downgraded?: boolean | undefined;
      readonly reason?: string | undefined;
    }
  | { readonly type: 'membership'; readonly controllers: number; readonly observers: number }
  | { readonly type: 'error'; readonly code: string; readonly message: string }
  | { readonly type: 'exit'; readonly exitCode: number | null }
  | { readonly type: 'goodbye'; readonly reason: string }
  /** `lastSequence`: the closed connection's, kept for the next replay_from. */
  | { readonly type: 'socket_closed'; readonly code: number; readonly reason: string; readonly lastSequence?: number | undefined }
  | { readonly type: 'user_closed' };

export function initialTerminalState(role: Role = 'observer'): TerminalState {
  return {
    phase: 'connecting',
    requested: role,
    granted: null,
    downgraded: false,
    message: '',
    failures: 0,
    lastSequence: -1,
    members: null,
    goodbye: null,
  };
}

/**
 * Close codes after which reconnecting cannot help: 1000 (the session ended, or we left), 1008,
 * 4400 (a frame it refused), 4401/4403 (not allowed), 4404 (no such session). 1001 (server
 * stopping), 1006, 1011 (server error, missed pongs), 4413 (slow consumer) and 4429 (rate
 * limited) reconnect and resume.
 */
const FINAL_CLOSE_CODES = new Set([1000, 1008, 4400, 4401, 4403, 4404]);
/** binding_goodbye reasons whose 1000 close is not the end of the session. */
const TRANSIENT_GOODBYES = new Set(['server_shutdown', 'rate_limited']);

/** Readable text of a downgrade's reason (the binding leaves it optional). */
function reasonText(reason: string | undefined): string {
  if (reason === undefined || reason === '' || /lease|held/i.test(reason)) return 'another client holds the controller lease';
  return reason.replace(/_/g, ' ');
}

function afterClose(s: TerminalState, code: number, reason: string): TerminalState {
  if (s.phase === 'ended' || s.phase === 'closed') return s;
  const transient = code === 1000 && s.goodbye !== null && TRANSIENT_GOODBYES.has(s.goodbye);
  if (FINAL_CLOSE_CODES.has(code) && !transient)
    return { ...s, phase: 'ended', granted: null, message: reason !== '' ? reason : `the server closed the terminal (${code})` };
  const why = transient
    ? `the server said goodbye (${(s.goodbye ?? '').replace(/_/g, ' ')})`
    : reason !== ''
      ? reason
      : s.phase === 'connecting'
        ? 'cannot connect'
        : 'connection lost';
  return {
    ...s,
    phase: 'waiting',
    granted: null,
    failures: s.failures + 1,
    message: s.message !== '' && s.phase === 'connecting' ? s.message : why,
  };
}

export function reduceTerminal(s: TerminalState, ev: TerminalEvent): TerminalState {
  switch (ev.type) {
    case 'connect':
      return {
        ...s,
        phase: 'connecting',
        requested: ev.role,
        granted: null,
        downgraded: false,
        message: '',
        goodbye: null,
        lastSequence: ev.lastSequence ?? s.lastSequence,
      };
    case 'request_role':
      return { ...s, requested: ev.role };
    case 'role_assigned': {
      const requested = ev.requested ?? s.requested;
      const downgraded = ev.downgraded === true || (requested === 'controller' && ev.granted === 'observer');
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
    case 'membership':
      return { ...s, members: { controllers: ev.controllers, observers: ev.observers } };
    case 'error':
      return { ...s, message: `${ev.code}: ${ev.message}` };
    case 'exit':
      return {
        ...s,
        phase: 'ended',
        granted: null,
        message: ev.exitCode === null ? 'the session ended' : `the session ended (exit code ${ev.exitCode})`,
      };
    case 'goodbye':
      return { ...s, goodbye: ev.reason };
    case 'socket_closed':
      return afterClose(ev.lastSequence === undefined ? s : { ...s, lastSequence: ev.lastSequence }, ev.code, ev.reason);
    case 'user_closed':
      return { ...s, phase: 'closed', granted: null };
  }
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

/** The membership line of the header ('' before the first MembershipChanged). */
export function membersText(s: TerminalState): string {
  if (s.members === null) return '';
  const { controllers, observers } = s.members;
  return ` · ${controllers > 0 ? '1 controller' : 'no controller'}, ${observers} ${observers === 1 ? 'observer' : 'observers'}`;
}

/** replay_from for a (re)connection: the last sequence received, or undefined for a fresh screen. */
export function replayFromOf(s: TerminalState): number | undefined {
  return s.lastSequence >= 0 ? s.lastSequence : undefined;
}
