/**
 * Tasks (#/tasks): submit a manifest (YAML) and the task list with a state filter, polled. The
 * filter lives in the hash (`#/tasks?state=running`) so it survives a reload and can be linked.
 */
import type { Task } from '../../../client/types.js';
import { isTaskFinished, TASK_STATES, taskBadge } from '../../model/badges.js';
import { formatAgo, formatBytes, shortId } from '../../model/format.js';
import { href, type Route } from '../../model/routes.js';
import { EXAMPLE_MANIFEST, taskStateFilter } from '../../model/task-view.js';
import type { AppContext, ViewInstance } from '../context.js';
import { isMissingRoute } from '../core/api-errors.js';
import { Poller } from '../core/poller.js';
import { field, h, replaceChildren, setText } from '../dom.js';
import { KeyedRows, type KeyedRow } from '../ui/keyed-rows.js';
import { describeError } from '../ui/toast.js';
import { badge, button, emptyState, pageHeader, section, setBadge, withBusy } from '../ui/widgets.js';

interface TaskRow extends KeyedRow {
  readonly cells: HTMLElement[];
  readonly state: HTMLElement;
  readonly cancel: HTMLButtonElement;
}

export function tasksView(app: AppContext, route: Route, signal: AbortSignal): ViewInstance {
  const query = route.view === 'tasks' ? route.query : new URLSearchParams();
  const filter = query.get('state') ?? '';

  // ---- submit form
  const yaml = h('textarea', {
    name: 'manifest_yaml',
    rows: 12,
    spellcheck: 'false',
    class: 'mono',
    placeholder: 'name: …\nrepository:\n  url: …\nprompt: …',
  });
  const yamlField = field(
    'Manifest (YAML)',
    yaml,
    'name, repository.url and prompt are required; lifecycle.timeout is a duration such as 30m',
  );
  const submitError = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Submit task');
  const example = button(
    'Insert example',
    () => {
      yaml.value = EXAMPLE_MANIFEST;
      yaml.focus();
    },
    'ghost',
  );
  const form = h('form', { class: 'form' }, yamlField.el, submitError, h('div', { class: 'form-actions' }, example, submit));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    submitError.hidden = true;
    if (yaml.value.trim() === '') {
      yamlField.error.textContent = 'Paste a manifest first';
      yaml.focus();
      return;
    }
    yamlField.error.textContent = '';
    void withBusy(submit, async () => {
      try {
        const r = await app.api.submitTask(yaml.value);
        if (!r.accepted) throw new Error(r.error ?? 'the server did not accept the task');
        app.toasts.success('Task submitted', r.task_id);
        app.navigate(href.task(r.task_id));
      } catch (err) {
        setText(submitError, describeError(err));
        submitError.hidden = false;
      }
    });
  });

  // ---- list
  const select = h(
    'select',
    { 'aria-label': 'Show tasks in state', class: 'input input-small' },
    h('option', { value: '' }, 'All states'),
    h('option', { value: 'active' }, 'Active'),
    ...TASK_STATES.map((s) => h('option', { value: s }, taskBadge(s).label)),
  );
  select.value = filter;
  select.addEventListener('change', () =>
    app.navigate(href.tasks(select.value === '' ? undefined : new URLSearchParams({ state: select.value }))),
  );
  const byId = new Map<string, Task>();
  const tbody = h('tbody');
  const wrap = h(
    'div',
    { class: 'table-wrap table-tall' },
    h(
      'table',
      { class: 'table', 'aria-label': 'Tasks' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ...['Task', 'Name', 'State', 'VM', 'Created', 'Output', 'Tool calls'].map((t) =>
            h('th', { scope: 'col', class: t === 'Output' || t === 'Tool calls' ? 'num' : null }, t),
          ),
          h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')),
        ),
      ),
      tbody,
    ),
  );
  const status = h('div', { class: 'table-status' }, h('div', { class: 'loading' }, 'Loading tasks…'));
  wrap.hidden = true;

  const cancelTask = async (t: Task, btn: HTMLButtonElement): Promise<void> => {
    await withBusy(btn, async () => {
      try {
        const r = await app.api.cancelTask(t.id, 'cancelled from the dashboard');
        if (r.success) app.toasts.success(`Cancelled ${t.name}`);
        else app.toasts.show('error', `Could not cancel ${t.name}`, r.error ?? '');
      } catch (err) {
        app.toasts.error(`Could not cancel ${t.name}`, err);
      }
      poller.kick();
    });
  };
  const rows = new KeyedRows<TaskRow>(
    tbody,
    (id) => {
      const state = badge(taskBadge('pending'));
      const cells = [
        h('td', { class: 'mono' }, h('a', { href: href.task(id) }, shortId(id, 18))),
        h('td', { class: 'cell-strong truncate' }),
        h('td', null, state),
        h('td'),
        h('td'),
        h('td', { class: 'num' }),
        h('td', { class: 'num' }),
      ];
      const cancel = button(
        'Cancel',
        () => {
          const t = byId.get(id);
          if (t !== undefined) void cancelTask(t, cancel);
        },
        'ghost',
        { class: 'btn btn-small btn-ghost-danger' },
      );
      return { tr: h('tr', { 'data-task': id }, ...cells, h('td', { class: 'row-actions' }, cancel)), cells, state, cancel };
    },
    (r, id) => {
      const t = byId.get(id);
      if (t === undefined) return;
      const [, name, , vm, created, output, tools] = r.cells as [
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
        HTMLElement,
      ];
      setText(name, t.name);
      setBadge(r.state, taskBadge(t.state));
      r.state.title = t.state_message;
      setText(vm, t.vm_name ?? '—');
      setText(created, formatAgo(Date.parse(t.created_at), Date.now()));
      setText(output, formatBytes(t.progress.output_bytes));
      setText(tools, String(t.progress.tool_calls));
      r.cancel.hidden = isTaskFinished(t.state);
      r.cancel.setAttribute('aria-label', `Cancel ${t.name}`);
    },
  );

  const poller = new Poller(
    async (sig) => {
      try {
        const states = taskStateFilter(filter);
        const list = await app.api.listTasks({ ...(states !== undefined ? { state: states.join(',') } : {}), limit: 200 }, { signal: sig });
        byId.clear();
        for (const t of list.tasks) byId.set(t.id, t);
        rows.sync(list.tasks.map((t) => t.id));
        wrap.hidden = list.tasks.length === 0;
        if (list.tasks.length === 0) {
          replaceChildren(
            status,
            emptyState(
              filter === '' ? 'No tasks yet' : 'No task in this state',
              filter === ''
                ? 'Submit a manifest above: a task runs a coding agent on a VM and keeps its logs and artifacts.'
                : 'Choose another state, or All states.',
            ),
          );
        } else {
          replaceChildren(
            status,
            list.total_count > list.tasks.length
              ? h('div', { class: 'muted' }, `Showing the newest ${list.tasks.length} of ${list.total_count}`)
              : '',
          );
        }
      } catch (err) {
        if (isMissingRoute(err)) {
          replaceChildren(
            status,
            emptyState('Tasks are not available on this server', 'GET /api/v1/tasks is not served (route.not_found).'),
          );
          submit.disabled = true;
          return;
        }
        replaceChildren(status, h('div', { class: 'inline-error', role: 'alert' }, `Could not list tasks: ${describeError(err)}`));
        throw err;
      }
    },
    { intervalMs: 3000 },
  );
  poller.start();
  signal.addEventListener('abort', () => poller.stop());

  const el = h(
    'div',
    { class: 'page' },
    pageHeader('Tasks', 'A task runs a manifest on a VM of its own; follow its state, log and artifacts here.'),
    h('div', { class: 'grid-tasks' }, section('Submit a task', form), section('Tasks', h('div', null, status, wrap), select)),
  );
  return { el, title: 'Tasks' };
}
