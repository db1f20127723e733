/**
 * Terminal (#/agents/{id}/sessions/{session}): xterm.js attached over the pty-ws.v1 binding. It
 * joins as an OBSERVER (read-only); "Take control" asks for the controller lease on the live
 * connection (pty.request_role) and the server's answer decides: a refused request comes back as
 * observer (RoleAssigned, downgraded) and the view says so. As controller, the PTY follows the
 * browser window (fit addon → pty.session_resize); as observer, the screen follows the PTY's size
 * (Resize frames, and a keyframe's size). A Keyframe resets the screen and draws the snapshot.
 * An unexpected close reconnects with backoff and resumes with replay_from, so nothing is lost
 * or printed twice; membership (who controls, how many watch) is shown in the header.
 *
 * This module (and xterm.js with it) is a separate chunk, loaded on first use.
 */
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import type { PtyConnection } from '../../../client/pty-ws.js';
import { backoffDelayMs } from '../../model/backoff.js';
import { href, type Route } from '../../model/routes.js';
import {
  initialTerminalState,
  membersText,
  reduceTerminal,
  replayFromOf,
  terminalStatusText,
  type Role,
  type TerminalEvent,
  type TerminalState,
} from '../../model/terminal-state.js';
import type { AppContext, ViewInstance } from '../context.js';
import { h, setText } from '../dom.js';
import { badge, button, pageHeader } from '../ui/widgets.js';
import { errorMessage } from '../../../util/error-message.js';

function themeFor(dark: boolean): Record<string, string> {
  return dark
    ? { background: '#0f1216', foreground: '#d8dee9', cursor: '#d8dee9', selectionBackground: '#3b4a63' }
    : { background: '#fbfcfd', foreground: '#1f2328', cursor: '#1f2328', selectionBackground: '#c8daf8' };
}

export function terminalView(app: AppContext, route: Route, signal: AbortSignal): ViewInstance {
  if (route.view !== 'terminal') throw new Error('terminal view needs a terminal route');
  const { agentId, sessionId } = route;
  const darkQuery = window.matchMedia('(prefers-color-scheme: dark)');
  const term = new Terminal({
    convertEol: false,
    cursorBlink: true,
    disableStdin: true,
    fontFamily: 'ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace',
    fontSize: 13,
    scrollback: 5000,
    theme: themeFor(darkQuery.matches),
  });
  const fit = new FitAddon();
  term.loadAddon(fit);

  let state: TerminalState = initialTerminalState('observer');
  let conn: PtyConnection | null = null;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let retryAtMs = 0;

  const roleBadge = badge({ tone: 'idle', label: 'connecting' });
  const status = h('span', { class: 'term-status', role: 'status', 'aria-live': 'polite' });
  const members = h('span', { class: 'term-members' });
  const askRole = (role: Role): void => {
    dispatch({ type: 'request_role', role });
    if (conn === null || !conn.requestRole(role)) connect(role);
  };
  const takeControl = button('Take control', () => askRole('controller'), 'primary', {
    title: 'Ask for the controller lease (one controller at a time)',
  });
  const release = button('Release control', () => askRole('observer'), 'default', {
    title: 'Go back to watching; the lease frees for others',
  });
  const reconnect = button('Reconnect', () => connect(state.requested), 'default');
  const title = h('span', { class: 'title-with-badge' }, sessionId, roleBadge);
  const screen = h('div', { class: 'term-screen', 'aria-label': 'Terminal output' });
  const el = h(
    'div',
    { class: 'page page-terminal' },
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: href.fleet() }, 'Fleet'),
      h('span', { 'aria-hidden': 'true' }, ' / '),
      h('a', { href: href.agent(agentId) }, agentId),
      h('span', { 'aria-hidden': 'true' }, ' / '),
      'terminal',
    ),
    pageHeader(title, h('span', null, status, members), reconnect, release, takeControl),
    h('div', { class: 'term-frame' }, screen),
  );

  const render = (): void => {
    setText(status, terminalStatusText(state, Date.now(), retryAtMs));
    setText(members, membersText(state));
    const role = state.phase === 'attached' ? state.granted : null;
    const b =
      role === 'controller'
        ? { tone: 'ok', label: 'controller' }
        : role === 'observer'
          ? { tone: state.downgraded ? 'warn' : 'busy', label: 'observer' }
          : { tone: 'idle', label: state.phase };
    roleBadge.className = `badge tone-${b.tone}`;
    setText(roleBadge, b.label);
    takeControl.hidden = !(state.phase === 'attached' && role === 'observer');
    takeControl.disabled = state.requested === 'controller' && role === 'observer' && !state.downgraded;
    setText(takeControl, state.downgraded ? 'Try again to take control' : 'Take control');
    release.hidden = role !== 'controller';
    reconnect.hidden = !(state.phase === 'waiting' || state.phase === 'ended' || state.phase === 'closed');
    term.options.disableStdin = role !== 'controller';
    screen.dataset['role'] = role ?? 'none';
    screen.dataset['phase'] = state.phase;
    el.dataset['downgraded'] = String(state.downgraded);
  };
  const dispatch = (ev: TerminalEvent): void => {
    state = reduceTerminal(state, ev);
    render();
  };

  const scheduleRetry = (): void => {
    clearTimeout(retryTimer);
    const delayMs = backoffDelayMs(state.failures - 1, { baseMs: 1000, maxMs: 15_000 });
    retryAtMs = Date.now() + delayMs;
    retryTimer = setTimeout(() => connect(state.requested), delayMs);
  };

  /** Errors the view handles without bothering the user. */
  const quietErrors = new Set(['PERMISSION_DENIED', 'REPLAY_OUT_OF_RANGE', 'KEYFRAME_UNAVAILABLE', 'PTY_OUTPUT_LAGGED']);
  /** An observer draws at the PTY's size, so its screen matches what the controller sees. */
  const follow = (cols: number, rows: number): void => {
    if (state.granted !== 'controller' && (cols !== term.cols || rows !== term.rows)) term.resize(cols, rows);
  };

  function connect(role: Role): void {
    clearTimeout(retryTimer);
    const old = conn;
    conn = null;
    old?.close(1000, role === 'controller' ? 'taking control' : 'reconnecting');
    dispatch({ type: 'connect', role, ...(old !== null ? { lastSequence: old.lastSequence } : {}) });
    let c: PtyConnection;
    try {
      const replayFrom = replayFromOf(state);
      c = app.api.openPty(sessionId, {
        role,
        cols: term.cols,
        rows: term.rows,
        clientLabel: 'dashboard',
        ...(replayFrom !== undefined ? { replayFrom } : {}),
        onRole: (granted, info) => {
          if (conn !== c) return;
          dispatch({ type: 'role_assigned', granted, requested: info.requested, downgraded: info.downgraded, reason: info.reason });
          if (granted === 'controller') {
            refit();
            c.resize(term.cols, term.rows);
            term.focus();
          }
        },
        onKeyframe: (k) => {
          if (conn !== c) return;
          follow(k.cols, k.rows);
          // RIS in the data stream rather than term.reset(): output written before it may still
          // sit in xterm's write queue, and must be parsed before the reset, not after.
          term.write('\u001bc');
          term.write(k.snapshot);
        },
        onOutput: (bytes) => {
          if (conn === c) term.write(bytes);
        },
        onResize: (cols, rows) => {
          if (conn === c) follow(cols, rows);
        },
        onMembership: (m) => {
          if (conn === c) dispatch({ type: 'membership', controllers: m.controllers.length, observers: m.observers.length });
        },
        onExit: (info) => {
          if (conn !== c) return;
          dispatch({ type: 'exit', exitCode: info.exitCode });
        },
        onError: (code, message, info) => {
          if (conn !== c || quietErrors.has(code)) return;
          if (info.scope === 'binding') dispatch({ type: 'error', code, message });
          app.toasts.show('error', 'Terminal error', `${code}: ${message}`);
        },
        onGoodbye: (reason) => {
          if (conn === c) dispatch({ type: 'goodbye', reason });
        },
        onClose: (code, reason) => {
          if (conn !== c) return;
          conn = null;
          dispatch({ type: 'socket_closed', code, reason, lastSequence: c.lastSequence });
          if (state.phase === 'waiting') scheduleRetry();
        },
      });
    } catch (err) {
      dispatch({ type: 'error', code: 'client', message: errorMessage(err) });
      dispatch({ type: 'socket_closed', code: 1006, reason: '' });
      scheduleRetry();
      return;
    }
    conn = c;
  }

  term.onData((data) => {
    if (state.granted === 'controller') conn?.input(data);
  });
  term.onResize(({ cols, rows }) => {
    screen.dataset['cols'] = String(cols);
    screen.dataset['rows'] = String(rows);
    if (state.granted === 'controller') conn?.resize(cols, rows);
  });
  /** Fits the terminal to its box; only the controller's fit reaches the PTY (observers follow it). */
  function refit(): void {
    if (screen.clientWidth === 0 || screen.clientHeight === 0) return;
    if (state.granted !== 'controller' && state.phase === 'attached') return;
    try {
      fit.fit();
    } catch {
      // Not laid out yet.
    }
  }
  const resizeObserver = new ResizeObserver(() => refit());
  const onScheme = (ev: MediaQueryListEvent): void => {
    term.options.theme = themeFor(ev.matches);
  };
  darkQuery.addEventListener('change', onScheme);
  const clock = setInterval(() => {
    if (state.phase === 'waiting') render();
  }, 1000);

  // Open once the element is in the document (xterm measures its container).
  requestAnimationFrame(() => {
    if (signal.aborted) return;
    term.open(screen);
    refit();
    resizeObserver.observe(screen);
    connect('observer');
  });
  void app.api
    .listSessions(agentId, { signal })
    .then((list) => {
      const s = list.sessions.find((x) => x.session_id === sessionId);
      if (s !== undefined) {
        title.firstChild?.replaceWith(document.createTextNode(s.session_name));
        document.title = `${s.session_name} · ${agentId} · sandboxd`;
      }
    })
    .catch(() => undefined);
  render();

  return {
    el,
    title: `Terminal · ${agentId}`,
    dispose() {
      clearTimeout(retryTimer);
      clearInterval(clock);
      resizeObserver.disconnect();
      darkQuery.removeEventListener('change', onScheme);
      state = reduceTerminal(state, { type: 'user_closed' });
      conn?.leave();
      conn?.close(1000, 'view closed');
      conn = null;
      term.dispose();
    },
  };
}
