/**
 * The sessions table of the agent view (GET /api/v1/agents/{id}/sessions, polled): name, command,
 * age, who controls and who watches; "Open" attaches as observer, "Kill" asks first.
 */
import type { SessionEntry } from '../../../client/types.js';
import { formatAgo, shortId } from '../../model/format.js';
import { href } from '../../model/routes.js';
import type { AppContext } from '../context.js';
import { Poller } from '../core/poller.js';
import { h, replaceChildren, setText } from '../dom.js';
import { confirmDialog } from '../ui/dialog.js';
import { KeyedRows, type KeyedRow } from '../ui/keyed-rows.js';
import { describeError } from '../ui/toast.js';
import { button, emptyState } from '../ui/widgets.js';
import { isMissingRoute } from '../core/api-errors.js';

interface SessionRow extends KeyedRow {
  readonly cells: HTMLElement[];
}

export function sessionsTable(
  app: AppContext,
  agentId: string,
  signal: AbortSignal,
): { el: HTMLElement; refreshButton: HTMLButtonElement } {
  const byId = new Map<string, SessionEntry>();
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table', 'aria-label': `Terminal sessions of ${agentId}` },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ...['Session', 'Command', 'Started', 'Controller', 'Observers', 'State'].map((t) =>
          h('th', { scope: 'col', class: t === 'Observers' ? 'num' : null }, t),
        ),
        h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')),
      ),
    ),
    tbody,
  );
  const wrap = h('div', { class: 'table-wrap' }, table);
  const status = h('div', { class: 'table-status' }, h('div', { class: 'loading' }, 'Loading sessions…'));
  const el = h('div', null, status, wrap);
  wrap.hidden = true;

  const kill = async (s: SessionEntry): Promise<void> => {
    const ok = await confirmDialog({
      title: `Kill ${s.session_name}?`,
      message: `The session's processes on ${agentId} are sent SIGTERM and its terminal closes for everyone attached.`,
      confirmLabel: 'Kill session',
      danger: true,
    });
    if (ok === null) return;
    try {
      await app.api.killSession(agentId, s.session_id);
      app.toasts.success(`Killed ${s.session_name}`);
    } catch (err) {
      app.toasts.error(`Could not kill ${s.session_name}`, err);
    }
    poller.kick();
  };

  const rows = new KeyedRows<SessionRow>(
    tbody,
    (sid) => {
      const cells = [
        h('td', { class: 'cell-strong' }),
        h('td', { class: 'mono truncate' }),
        h('td'),
        h('td', { class: 'mono' }),
        h('td', { class: 'num' }),
        h('td'),
      ];
      const open = h('a', { class: 'btn btn-small', href: href.terminal(agentId, sid) }, 'Open');
      const killBtn = button(
        'Kill',
        () => {
          const s = byId.get(sid);
          if (s !== undefined) void kill(s);
        },
        'ghost',
        { class: 'btn btn-small btn-ghost-danger' },
      );
      const tr = h('tr', { 'data-session': sid }, ...cells, h('td', { class: 'row-actions' }, open, killBtn));
      return { tr, cells };
    },
    (r, sid) => {
      const s = byId.get(sid);
      if (s === undefined) return;
      const [name, command, started, controller, observers, state] = r.cells as [
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
      ];
      setText(name, s.session_name);
      setText(command, s.command);
      command.title = s.command;
      setText(started, formatAgo(s.created_at_secs * 1000, Date.now()));
      setText(controller, s.membership.controllers.length > 0 ? s.membership.controllers.map((c) => shortId(c, 14)).join(', ') : 'free');
      setText(observers, String(s.membership.observers.length));
      setText(state, s.state);
    },
  );

  const poller = new Poller(
    async (sig) => {
      try {
        const list = await app.api.listSessions(agentId, { signal: sig });
        byId.clear();
        for (const s of list.sessions) byId.set(s.session_id, s);
        rows.sync(list.sessions.map((s) => s.session_id));
        wrap.hidden = list.sessions.length === 0;
        if (list.sessions.length === 0)
          replaceChildren(
            status,
            emptyState(
              'No terminal sessions',
              'Open one with “New terminal”: a tmux session on the agent, shared with everyone who opens it.',
            ),
          );
        else replaceChildren(status);
      } catch (err) {
        wrap.hidden = byId.size === 0;
        if (isMissingRoute(err))
          replaceChildren(
            status,
            emptyState('Sessions are not available on this server', 'GET /api/v1/agents/{id}/sessions is not served (route.not_found).'),
          );
        else if ((err as { code?: string }).code === 'agent.not_found')
          replaceChildren(status, emptyState('No sessions', 'The agent is not connected.'));
        else {
          replaceChildren(status, h('div', { class: 'inline-error', role: 'alert' }, `Could not list sessions: ${describeError(err)}`));
          throw err;
        }
      }
    },
    { intervalMs: 5000 },
  );
  poller.start();
  signal.addEventListener('abort', () => poller.stop());
  const refreshButton = button('Refresh', () => poller.kick(), 'ghost', { class: 'btn btn-small btn-ghost' });
  return { el, refreshButton };
}
