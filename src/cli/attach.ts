/**
 * `sbx session attach`: this terminal becomes a view of (or, with the controller role, the
 * keyboard of) a session, over the pty-ws.v1 binding (src/client/pty-ws.ts).
 *
 * - stdin in raw mode while attached, restored on every way out (detach, close, error, signal,
 *   process exit);
 * - Ctrl-] (0x1d) detaches; everything else typed goes to the session when controller and is
 *   dropped as observer (with a one-time hint);
 * - the window size follows SIGWINCH (only the controller's size reaches the PTY);
 * - which role was granted is printed on stderr (a --control request may be downgraded);
 * - a Keyframe (the join's screen, or a redraw after a replay gap) resets this terminal (ESC c)
 *   and writes the snapshot, so the screen starts as the session's is, not mid-stream;
 * - a dropped connection (server restart, network, slow-consumer cut) reconnects with backoff
 *   and resumes after the last sequence received, for up to a minute.
 */
import { ApiClient } from '../client/api-client.js';
import { PtyCloseCode, type PtyConnection, type PtyRole, type PtyRoleInfo } from '../client/pty-ws.js';
import { backoffDelayMs } from '../client/sse-stream.js';
import { ExitCode } from './exit-codes.js';
import type { CommandContext } from './io.js';

/** RIS (ESC c): a full terminal reset, written before a keyframe's snapshot. */
const RESET = '\u001bc';
/** Ctrl-] as a byte. */
export const DETACH_BYTE = 0x1d;
export const DETACH_KEY_NAME = 'Ctrl-]';
/** Give up reconnecting after this long without a connection, ms. */
const kReconnectWindowMs = 60_000;
/** Closes after which the session may still be there: reconnect and resume. */
const RECONNECT_CODES: ReadonlySet<number> = new Set([
  PtyCloseCode.goingAway,
  PtyCloseCode.abnormal,
  PtyCloseCode.serverError,
  PtyCloseCode.slowConsumer,
  PtyCloseCode.rateLimited,
]);
/** binding_goodbye reasons before a 1000 close that do not mean the session is over. */
const RECONNECT_GOODBYES: ReadonlySet<string> = new Set(['server_shutdown', 'rate_limited']);

type Ending =
  | { kind: 'detach' }
  | { kind: 'interrupt' }
  | { kind: 'exited'; exitCode: number | null; reason: string }
  | { kind: 'closed'; code: number; reason: string; error: { code: string; message: string } | null };

function roleMessage(sessionId: string, granted: PtyRole, info: PtyRoleInfo, again: boolean): string {
  const verb = again ? 'reattached to' : 'attached to';
  if (granted === 'controller') return `${verb} ${sessionId} as controller; Ctrl-] detaches`;
  if (info.downgraded) {
    // The binding says only that it was downgraded; a reason that is not about the lease is shown.
    const why =
      info.reason === undefined || /lease|held/i.test(info.reason)
        ? 'the controller lease is held by another client'
        : `controller refused (${info.reason.replace(/_/g, ' ')})`;
    return `${why}: ${verb} ${sessionId} as observer (read-only); Ctrl-] detaches`;
  }
  return `${verb} ${sessionId} as observer (read-only; --control to type); Ctrl-] detaches`;
}

/**
 * Attaches until detach, the session's end or a lost connection; resolves with the exit code.
 * `exists` is asked before each reconnection: false (the session is gone) ends the attach with
 * exit 3; a rejection (server still down) keeps trying.
 */
export async function attachTerminal(
  ctx: CommandContext,
  sessionId: string,
  control: boolean,
  exists?: () => Promise<boolean>,
): Promise<number> {
  const { io } = ctx;
  if (io.webSocket === undefined) throw new Error('no WebSocket implementation available');
  const WebSocketCtor = await io.webSocket();
  // The ws base may differ from the HTTP server (a context's `ws`): a client for it.
  const wsApi = new ApiClient({ baseUrl: ctx.settings.ws.replace(/^ws(s?):/i, 'http$1:'), WebSocket: WebSocketCtor });
  const requested: PtyRole = control ? 'controller' : 'observer';
  // A terminal of unknown size reports 0 (or nothing): assume 80x24 rather than shrink the PTY.
  const dim = (v: number | undefined, dflt: number): number => (v !== undefined && v > 0 ? Math.min(1000, v) : dflt);
  const size = (): { cols: number; rows: number } => ({ cols: dim(io.stdout.columns, 80), rows: dim(io.stdout.rows, 24) });
  const stdin = io.stdin;
  const raw = stdin.isTTY === true && typeof stdin.setRawMode === 'function';

  let conn: PtyConnection | null = null;
  /** The last connection got a role: it worked, so the reconnect budget starts over. */
  let joined: boolean;
  let hinted = false;
  let finishUser: ((e: Ending) => void) | null = null;

  const onData = (chunk: Buffer | string): void => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const at = bytes.indexOf(DETACH_BYTE);
    const before = at === -1 ? bytes : bytes.subarray(0, at);
    if (before.length > 0 && conn !== null && !conn.input(before) && conn.role === 'observer' && !hinted) {
      hinted = true;
      io.stderr.write('\r\nsbx: observer: typing is ignored (attach with --control to drive the session)\r\n');
    }
    if (at !== -1) finishUser?.({ kind: 'detach' });
  };
  const restore = (): void => {
    if (raw) stdin.setRawMode?.(false);
  };
  if (raw) stdin.setRawMode?.(true);
  process.once('exit', restore);
  stdin.on('data', onData);
  stdin.resume();
  const offResize = io.onResize?.(() => {
    const s = size();
    conn?.resize(s.cols, s.rows);
  });
  let interrupted = false;
  const offInterrupt = io.onInterrupt?.(() => {
    interrupted = true;
    finishUser?.({ kind: 'interrupt' });
  });

  /** One connection, until it ends. */
  const attachOnce = (replayFrom: number | undefined, again: boolean): Promise<Ending> =>
    new Promise<Ending>((resolve) => {
      let lastError: { code: string; message: string } | null = null;
      let exited: { exitCode: number | null; reason: string } | null = null;
      let goodbye: string | null = null;
      finishUser = (e) => {
        resolve(e);
        conn?.close(1000, 'detached');
      };
      if (interrupted) {
        resolve({ kind: 'interrupt' });
        return;
      }
      conn = wsApi.openPty(sessionId, {
        role: requested,
        ...size(),
        ...(replayFrom !== undefined ? { replayFrom } : {}),
        clientLabel: `sbx ${ctx.settings.actor}`,
        onRole: (granted, info) => {
          joined = true;
          io.stderr.write(`\r\nsbx: ${roleMessage(sessionId, granted, info, again)}\r\n`);
        },
        onKeyframe: (k) => {
          // The session's screen as it is now: start from a reset terminal and draw it.
          io.stdout.write(RESET);
          io.stdout.write(k.snapshot);
        },
        onOutput: (bytes) => {
          io.stdout.write(bytes);
        },
        onExit: (info) => {
          exited = { exitCode: info.exitCode, reason: info.reason === 'normal' ? '' : info.reason };
        },
        onError: (code, message, info) => {
          // A replay gap is mended by the keyframe that follows; a PTY hiccup does not end the attach.
          if (info.scope === 'binding' && code !== 'REPLAY_OUT_OF_RANGE') lastError = { code, message };
        },
        onGoodbye: (reason) => {
          goodbye = reason;
        },
        onClose: (code, reason) => {
          if (exited !== null) resolve({ kind: 'exited', ...exited });
          // "Closed after goodbye" is 1000; a server going down or shedding load is not the session's end.
          else if (code === PtyCloseCode.normal && goodbye !== null && RECONNECT_GOODBYES.has(goodbye))
            resolve({ kind: 'closed', code: PtyCloseCode.goingAway, reason: goodbye, error: null });
          else resolve({ kind: 'closed', code, reason, error: lastError });
        },
      });
    });

  let ending: Ending;
  try {
    let replayFrom: number | undefined;
    let downSinceMs: number | null = null;
    let failures = 0;
    for (let again = false; ; again = true) {
      joined = false;
      ending = await attachOnce(replayFrom, again);
      if (ending.kind !== 'closed' || !RECONNECT_CODES.has(ending.code)) break;
      // The connection starts from replayFrom and forgets it only when the server cannot replay it.
      const last = (conn as PtyConnection | null)?.lastSequence ?? -1;
      replayFrom = last >= 0 ? last : undefined;
      if (joined) {
        downSinceMs = null;
        failures = 0;
      }
      downSinceMs ??= Date.now();
      if (Date.now() - downSinceMs > kReconnectWindowMs) break;
      const delayMs = backoffDelayMs(++failures, 500, 5000);
      io.stderr.write(
        `\r\nsbx: connection to ${sessionId} lost (${ending.code}); reconnecting in ${(delayMs / 1000).toFixed(1)}s (Ctrl-] to give up)\r\n`,
      );
      const waited = await new Promise<Ending | null>((resolve) => {
        const t = setTimeout(() => resolve(null), delayMs);
        finishUser = (e) => {
          clearTimeout(t);
          resolve(e);
        };
      });
      if (waited !== null) {
        ending = waited;
        break;
      }
      if (exists !== undefined && !(await exists().catch(() => true))) {
        ending = {
          kind: 'closed',
          code: PtyCloseCode.sessionNotFound,
          reason: '',
          error: { code: 'session.not_found', message: `session ${sessionId} no longer exists` },
        };
        break;
      }
    }
  } finally {
    stdin.off('data', onData);
    stdin.pause();
    restore();
    process.off('exit', restore);
    offResize?.();
    offInterrupt?.();
    (conn as PtyConnection | null)?.close(1000, 'detached');
  }
  switch (ending.kind) {
    case 'detach':
    case 'interrupt':
      io.stderr.write(`\r\nsbx: detached from ${sessionId} (the session keeps running)\n`);
      return ExitCode.OK;
    case 'exited':
      io.stderr.write(
        `\r\nsbx: session ${sessionId} ended${ending.exitCode !== null ? ` (exit code ${ending.exitCode})` : ''}${ending.reason !== '' ? `: ${ending.reason}` : ''}\n`,
      );
      return ExitCode.OK;
    case 'closed': {
      if (ending.code === PtyCloseCode.normal) {
        io.stderr.write(`\r\nsbx: session ${sessionId} closed\n`);
        return ExitCode.OK;
      }
      const why =
        ending.error !== null
          ? `${ending.error.code}: ${ending.error.message}`
          : `connection closed (${ending.code}${ending.reason !== '' ? ` ${ending.reason}` : ''})`;
      io.stderr.write(`\r\nsbx: ${why}\n`);
      if (ending.code === PtyCloseCode.sessionNotFound) return ExitCode.NOT_FOUND;
      if (
        ending.code === PtyCloseCode.protocolError ||
        ending.code === PtyCloseCode.unauthenticated ||
        ending.code === PtyCloseCode.forbidden
      )
        return ExitCode.OTHER;
      return ExitCode.SERVER;
    }
  }
}
