/**
 * Task detail (#/tasks/{id}): state and progress (polled until the task finishes), the live log
 * (SSE /api/v1/tasks/{id}/logs, resumed with Last-Event-ID by the client after a drop), the
 * artifacts with download links, and Cancel.
 */
import type { Task, TaskArtifact } from '../../../client/types.js';
import { isTaskFinished, taskBadge } from '../../model/badges.js';
import { formatAgo, formatBytes, formatDateTime } from '../../model/format.js';
import { href, type Route } from '../../model/routes.js';
import { describeTaskEvent, LogBuffer, type LogLine, type LogStream } from '../../model/task-view.js';
import type { AppContext, ViewInstance } from '../context.js';
import { isMissingRoute } from '../core/api-errors.js';
import { Poller } from '../core/poller.js';
import { frameThrottle, h, replaceChildren, setText } from '../dom.js';
import { describeError } from '../ui/toast.js';
import { badge, button, emptyState, facts, pageHeader, section, setBadge, withBusy } from '../ui/widgets.js';

export function taskView(app: AppContext, route: Route, signal: AbortSignal): ViewInstance {
  if (route.view !== 'task') throw new Error('task view needs a task route');
  const id = route.taskId;
  const stateBadge = badge(taskBadge('pending'));
  const subtitle = h('span');
  const info = h('div', null, h('div', { class: 'loading' }, 'Loading…'));
  const cancel = button(
    'Cancel task',
    () => {
      void withBusy(cancel, async () => {
        try {
          const r = await app.api.cancelTask(id, 'cancelled from the dashboard');
          if (r.success) app.toasts.success('Task cancelled');
          else app.toasts.show('error', 'Could not cancel the task', r.error ?? '');
        } catch (err) {
          app.toasts.error('Could not cancel the task', err);
        }
        poller.kick();
      });
    },
    'danger',
  );
  cancel.hidden = true;

  // ---- logs
  const logs = new LogBuffer();
  const logEl = h('pre', { class: 'log', tabindex: '0', 'aria-label': 'Task log', 'aria-live': 'off' });
  const logStatus = h('div', { class: 'log-status', role: 'status' }, 'Connecting to the log stream…');
  const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const followLabel = h('label', { class: 'check check-inline' }, follow, ' Follow');
  let pendingLines: LogLine[] = [];
  const lineEl = (l: LogLine): HTMLElement => h('span', { class: `log-line log-${l.stream}` }, l.text, '\n');
  const flushLog = frameThrottle(() => {
    const frag = document.createDocumentFragment();
    for (const l of pendingLines) frag.appendChild(lineEl(l));
    pendingLines = [];
    logEl.querySelector('.log-pending')?.remove();
    logEl.appendChild(frag);
    // Keep the DOM as bounded as the buffer.
    while (logEl.childElementCount > logs.lines.length + 1 && logEl.firstElementChild !== null) logEl.firstElementChild.remove();
    const p = logs.pending;
    if (p !== null) logEl.appendChild(h('span', { class: `log-line log-${p.stream} log-pending` }, p.text));
    if (follow.checked) logEl.scrollTop = logEl.scrollHeight;
  });
  const addLog = (stream: LogStream, text: string): void => {
    pendingLines.push(...logs.push(stream, text));
    flushLog();
  };

  const streamLogs = async (): Promise<void> => {
    try {
      for await (const ev of app.api.taskLogs(id, {
        signal,
        onOpen: ({ attempt }) => setText(logStatus, attempt > 1 ? 'Reconnected — resuming after the last line received' : 'Live'),
        onReconnect: ({ delayMs, error }) =>
          setText(
            logStatus,
            `Log stream interrupted${error !== null ? ` (${error.message})` : ''} — reconnecting in ${Math.ceil(delayMs / 1000)}s`,
          ),
      })) {
        switch (ev.type) {
          case 'stdout':
          case 'stderr':
            addLog(ev.type, ev.text.endsWith('\n') ? ev.text : `${ev.text}\n`);
            break;
          case 'event':
            addLog('event', `${describeTaskEvent(ev.data)}\n`);
            break;
          case 'completed':
            pendingLines.push(...logs.flush());
            addLog('system', `— completed${ev.exitCode !== null ? ` with exit code ${ev.exitCode}` : ''} —\n`);
            setText(logStatus, 'Finished');
            break;
          case 'error':
            addLog('system', `— error: ${ev.message} —\n`);
            setText(logStatus, 'Ended with an error');
            break;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      setText(
        logStatus,
        isMissingRoute(err) ? 'Logs are not available on this server (route missing)' : `No log stream: ${describeError(err)}`,
      );
    }
  };

  // ---- artifacts
  const artifactsEl = h('div', null, h('div', { class: 'muted' }, 'Artifacts are listed when the task has produced some.'));
  const renderArtifacts = (list: readonly TaskArtifact[]): void => {
    if (list.length === 0) {
      replaceChildren(artifactsEl, emptyState('No artifacts yet', 'Files the task writes to its outbox appear here.'));
      return;
    }
    replaceChildren(
      artifactsEl,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'table', 'aria-label': 'Artifacts' },
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              h('th', { scope: 'col' }, 'File'),
              h('th', { scope: 'col' }, 'Type'),
              h('th', { scope: 'col', class: 'num' }, 'Size'),
              h('th', { scope: 'col' }, 'SHA-256'),
            ),
          ),
          h(
            'tbody',
            null,
            ...list.map((a) =>
              h(
                'tr',
                null,
                h('td', null, h('a', { href: app.api.taskArtifactUrl(id, a.name), download: a.name.split('/').pop() ?? a.name }, a.name)),
                h('td', { class: 'muted' }, a.content_type),
                h('td', { class: 'num' }, formatBytes(a.size_bytes)),
                h('td', { class: 'mono truncate', title: a.checksum }, a.checksum === '' ? '—' : a.checksum.slice(0, 16)),
              ),
            ),
          ),
        ),
      ),
    );
  };

  const renderTask = (t: Task): void => {
    setBadge(stateBadge, taskBadge(t.state));
    setText(subtitle, t.state_message !== '' ? t.state_message : t.id);
    cancel.hidden = isTaskFinished(t.state);
    const now = Date.now();
    replaceChildren(
      info,
      facts([
        ['Task id', h('span', { class: 'mono' }, t.id)],
        ['State', `${taskBadge(t.state).label} since ${formatAgo(Date.parse(t.state_changed_at), now)}`],
        ['Created', formatDateTime(t.created_at)],
        ['Started', t.started_at !== null ? formatDateTime(t.started_at) : '—'],
        ['VM', t.vm_name !== null && t.vm_name !== '' ? `${t.vm_name}${t.vm_ip !== null && t.vm_ip !== '' ? ` (${t.vm_ip})` : ''}` : '—'],
        ['Exit code', t.exit_code !== null ? String(t.exit_code) : '—'],
        ['Output', formatBytes(t.progress.output_bytes)],
        ['Tool calls', `${t.progress.tool_calls}${t.progress.current_tool !== null ? ` (now: ${t.progress.current_tool})` : ''}`],
        ['Last activity', formatAgo(Date.parse(t.progress.last_activity_at), now)],
        ...(t.error !== null && t.error !== '' ? [['Error', h('span', { class: 'text-bad' }, t.error)] as const] : []),
      ]),
    );
  };

  let finished = false;
  const poller = new Poller(
    async (sig) => {
      try {
        const t = await app.api.getTask(id, { signal: sig });
        renderTask(t);
        const arts = await app.api.listTaskArtifacts(id, { signal: sig }).catch(() => null);
        if (arts !== null) renderArtifacts(arts.artifacts);
        if (isTaskFinished(t.state) && !finished) {
          finished = true;
          poller.stop();
        }
      } catch (err) {
        replaceChildren(
          info,
          emptyState(
            isMissingRoute(err) ? 'Tasks are not available on this server' : 'Could not load the task',
            describeError(err),
            h('a', { class: 'btn', href: href.tasks() }, 'All tasks'),
          ),
        );
        if (isMissingRoute(err) || (err as { code?: string }).code === 'task.not_found') poller.stop();
        else throw err;
      }
    },
    { intervalMs: 2000 },
  );
  poller.start();
  void streamLogs();
  signal.addEventListener('abort', () => poller.stop());

  const el = h(
    'div',
    { class: 'page' },
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: href.tasks() }, 'Tasks'),
      h('span', { 'aria-hidden': 'true' }, ' / '),
      id,
    ),
    pageHeader(h('span', { class: 'title-with-badge' }, 'Task', stateBadge), subtitle, cancel),
    h('div', { class: 'grid-2' }, section('Details', info), section('Artifacts', artifactsEl)),
    section('Log', h('div', null, logStatus, logEl), followLabel),
  );
  return { el, title: `Task ${id}` };
}
