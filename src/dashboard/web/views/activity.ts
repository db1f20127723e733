/**
 * Activity (#/activity?command_id=…&agent=…&since=…): the activity store's timeline through
 * GET /api/v2/activity/events, with its filters (event name, session, mission, task, tool call,
 * command, process, trace, since/until) and scope (agent and instance, `*` for all) in the hash,
 * so a filtered view can be linked. Events are listed in ingest order, oldest first (the store's
 * stable paging order): "Load more" asks for the page after the last event shown, and once the end
 * is reached the same button fetches what arrived since. Above the list, each collector's coverage
 * (events, first and last time, sequences, gaps, jumps) says what is complete and what was lost.
 *
 * The tenant is the server's (GET /api/v1/dashboard/config `activity`); without an activity store
 * the view says so.
 */
import type { ActivityCollectorCoverage, ActivityEvent } from '../../../client/types.js';
import {
  ACTIVITY_ID_FILTERS,
  activityApiQuery,
  activityFieldProblem,
  activityFilterFromQuery,
  activityFilterProblem,
  activityFilterToQuery,
  activityScope,
  activitySummary,
  ANY,
  correlationPairs,
  coverageScopeText,
  gapsText,
  sequencesText,
  type ActivityFilter,
  type ActivityIdFilter,
} from '../../model/activity-view.js';
import { formatClock, formatDateTime, plural } from '../../model/format.js';
import { href, type Route } from '../../model/routes.js';
import type { AppContext, ViewInstance } from '../context.js';
import { h, replaceChildren, setText, uid } from '../dom.js';
import { describeError } from '../ui/toast.js';
import { button, emptyState, pageHeader, section, withBusy } from '../ui/widgets.js';

interface DashboardConfig {
  activity?: { tenant_id: string; host_id: string } | null;
}

type FieldKey = ActivityIdFilter | 'agent' | 'instance' | 'since' | 'until';

export async function activityView(app: AppContext, route: Route, signal: AbortSignal): Promise<ViewInstance> {
  const filter = activityFilterFromQuery(route.view === 'activity' ? route.query : new URLSearchParams());
  const cfg = await app.api
    .requestJson<DashboardConfig>('GET', '/api/v1/dashboard/config', undefined, { signal, timeoutMs: 5000 })
    .catch(() => null);
  const tenant = cfg?.activity?.tenant_id;
  if (tenant === undefined) {
    const why =
      cfg === null
        ? 'The server could not be asked for its configuration; reload the page to try again.'
        : 'This server runs no activity store (the activity component is not started).';
    return { el: h('div', { class: 'page' }, pageHeader('Activity'), emptyState('No activity store', why)), title: 'Activity' };
  }

  // ---- filter form (applying it changes the hash, which remounts the view)
  const inputs = new Map<FieldKey, HTMLInputElement>();
  const errors = new Map<FieldKey, HTMLElement>();
  const fieldOf = (key: FieldKey, label: string, value: string, attrs: Record<string, string> = {}): HTMLElement => {
    const id = uid('f');
    const input = h('input', {
      class: 'input',
      name: key,
      id,
      value,
      autocomplete: 'off',
      spellcheck: 'false',
      'aria-describedby': `${id}-error`,
      ...attrs,
    });
    const error = h('div', { class: 'field-error', id: `${id}-error`, role: 'alert' });
    inputs.set(key, input);
    errors.set(key, error);
    return h('div', { class: 'field' }, h('label', { for: id }, label), input, error);
  };
  const idFields = ACTIVITY_ID_FILTERS.map(([key, label]) =>
    fieldOf(key, label, filter.ids[key] ?? '', { placeholder: key === 'event_name' ? 'e.g. command.finished' : 'any' }),
  );
  const form = h(
    'form',
    { class: 'filters filters-activity', role: 'search', 'aria-label': 'Activity filters' },
    ...idFields,
    fieldOf('since', 'Since', filter.since, { type: 'datetime-local', step: '1' }),
    fieldOf('until', 'Until', filter.until, { type: 'datetime-local', step: '1' }),
    fieldOf('agent', 'Agent', filter.agent, { placeholder: '* (all)' }),
    fieldOf('instance', 'Instance', filter.instance, { placeholder: '* (all)' }),
    h(
      'div',
      { class: 'filters-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Apply'),
      h('a', { class: 'btn btn-ghost', href: href.activity() }, 'Clear filters'),
    ),
  );
  const valueOf = (k: FieldKey): string => inputs.get(k)?.value.trim() ?? '';
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const ids: Partial<Record<ActivityIdFilter, string>> = {};
    for (const [k] of ACTIVITY_ID_FILTERS) if (valueOf(k) !== '') ids[k] = valueOf(k);
    const next: ActivityFilter = {
      ids,
      since: valueOf('since'),
      until: valueOf('until'),
      agent: valueOf('agent') || ANY,
      instance: valueOf('instance') || ANY,
    };
    let ok = true;
    for (const [k, error] of errors) {
      const problem = k === 'since' || k === 'until' ? null : activityFieldProblem(k, valueOf(k));
      setText(error, problem ?? '');
      inputs.get(k)?.toggleAttribute('aria-invalid', problem !== null);
      if (problem !== null) ok = false;
    }
    const timeProblem = activityFilterProblem(next);
    setText(errors.get('until') as HTMLElement, timeProblem ?? '');
    if (timeProblem !== null) ok = false;
    if (ok) app.navigate(href.activity(activityFilterToQuery(next)));
  });

  // ---- coverage
  const coverageBody = h('tbody');
  const coverageTable = h(
    'table',
    { class: 'table table-coverage', 'aria-label': 'Coverage per collector' },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ...['Scope', 'Collector', 'Events', 'First', 'Last', 'Sequences', 'Complete through', 'Gaps', 'Jumps'].map((t) =>
          h('th', { scope: 'col' }, t),
        ),
      ),
    ),
    coverageBody,
  );
  const coverageEmpty = emptyState('No collector has recorded anything in this scope yet');
  const renderCoverage = (rows: readonly ActivityCollectorCoverage[]): void => {
    coverageEmpty.hidden = rows.length > 0;
    coverageTable.hidden = rows.length === 0;
    replaceChildren(
      coverageBody,
      ...rows.map((c) =>
        h(
          'tr',
          { 'data-collector': c.collector_id, 'data-agent': c.agent_id, 'data-gaps': c.sequence_gaps.length },
          h('td', { class: 'nowrap' }, coverageScopeText(c)),
          h('td', { class: 'mono' }, c.collector_id),
          h('td', { class: 'num' }, String(c.event_count)),
          h(
            'td',
            { class: 'nowrap', title: c.first_occurred_at ?? '' },
            c.first_occurred_at === null ? '—' : formatDateTime(c.first_occurred_at),
          ),
          h(
            'td',
            { class: 'nowrap', title: c.last_occurred_at ?? '' },
            c.last_occurred_at === null ? '—' : formatDateTime(c.last_occurred_at),
          ),
          h('td', { class: 'mono' }, sequencesText(c)),
          h('td', { class: 'num' }, String(c.durable_through_sequence)),
          h('td', { class: c.sequence_gaps.length > 0 ? 'cell-warn' : 'muted' }, gapsText(c)),
          h('td', { class: 'num' }, String(c.jump_count)),
        ),
      ),
    );
  };

  // ---- events, in ingest order
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table table-events table-activity', 'aria-label': 'Activity events, in ingest order (oldest first)' },
    h(
      'thead',
      null,
      h('tr', null, ...['Time', 'Event', 'Agent', 'Correlation', 'Outcome and details'].map((t) => h('th', { scope: 'col' }, t))),
    ),
    tbody,
  );
  const wrap = h('div', { class: 'table-wrap table-tall' }, table);
  const empty = emptyState(
    'No activity matches',
    'Events appear here as collectors record them: sandboxd records commands, sessions and tasks’ tool calls.',
  );
  const status = h('div', { class: 'stream-status', role: 'status' }, 'Loading…');
  const problem = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const filterLink = (key: ActivityIdFilter, value: string, text: string): HTMLAnchorElement =>
    h('a', { href: href.activity(activityFilterToQuery({ ...filter, ids: { ...filter.ids, [key]: value } })), class: 'mono' }, text);
  const rowFor = (e: ActivityEvent): HTMLTableRowElement => {
    const corr = correlationPairs(e);
    return h(
      'tr',
      { 'data-event-id': e.event_id, 'data-event-name': e.event_name, 'data-command-id': e.correlation.command_id ?? '' },
      h(
        'td',
        {
          class: 'mono nowrap',
          title: `occurred ${formatDateTime(e.occurred_at)}; seq ${e.integrity.collector_sequence} of ${e.source.collector}`,
        },
        formatClock(e.occurred_at),
      ),
      h('td', { class: 'nowrap' }, filterLink('event_name', e.event_name, e.event_name)),
      h('td', { class: 'nowrap' }, e.correlation.agent_id),
      h(
        'td',
        { class: 'correlation' },
        ...corr.map(([label, v]) => {
          const key = ACTIVITY_ID_FILTERS.find(([, l]) => l.toLowerCase() === label)?.[0] ?? 'command_id';
          return h('span', { class: 'corr' }, `${label} `, filterLink(key, v, v.length > 24 ? `${v.slice(0, 23)}…` : v));
        }),
      ),
      h('td', { class: 'details', title: JSON.stringify(e.payload) }, activitySummary(e)),
    );
  };

  const scope = activityScope(filter, tenant);
  let cursor: string | null = null;
  let shown = 0;
  const more = button('Load more', () => void withBusy(more, load));
  const load = async (): Promise<void> => {
    try {
      const page = await app.api.activityEvents(scope, activityApiQuery(filter, cursor), { signal });
      problem.hidden = true;
      if (cursor !== null && page.cursor_found === false) {
        // The last event shown is gone (retention): the page starts from the beginning again.
        tbody.replaceChildren(
          h('tr', { class: 'row-marker' }, h('td', { colspan: 5 }, 'Older events were removed by retention; the list starts again.')),
        );
        shown = 0;
      }
      const frag = document.createDocumentFragment();
      for (const e of page.events) frag.appendChild(rowFor(e));
      tbody.appendChild(frag);
      shown += page.events.length;
      if (page.next_cursor !== null) cursor = page.next_cursor;
      renderCoverage(page.coverage);
      wrap.hidden = shown === 0;
      empty.hidden = shown > 0;
      setText(more, page.has_more ? 'Load more' : 'Check for newer events');
      setText(
        status,
        `${plural(shown, 'event')} shown${page.has_more ? ' — more available' : ` — the end, as of ${formatClock(Date.now())}`}`,
      );
    } catch (err) {
      if (signal.aborted) return;
      setText(problem, `Could not load activity: ${describeError(err)}`);
      problem.hidden = false;
      setText(status, '');
    }
  };
  wrap.hidden = true;
  empty.hidden = true;
  coverageTable.hidden = true;
  coverageEmpty.hidden = true;
  void load();

  const active = [
    ...ACTIVITY_ID_FILTERS.filter(([k]) => (filter.ids[k] ?? '') !== '').map(
      ([k, label]) => `${label.toLowerCase()} ${filter.ids[k] ?? ''}`,
    ),
    filter.since !== '' ? `since ${filter.since}` : '',
    filter.until !== '' ? `until ${filter.until}` : '',
    filter.agent !== ANY ? `agent ${filter.agent}` : '',
    filter.instance !== ANY ? `instance ${filter.instance}` : '',
  ].filter((s) => s !== '');
  const el = h(
    'div',
    { class: 'page' },
    pageHeader(
      'Activity',
      active.length > 0
        ? `Tenant ${tenant}, filtered by ${active.join(', ')}`
        : `Tenant ${tenant}: what collectors recorded — sandboxd itself records commands, sessions and tasks’ tool calls. Oldest first, in ingest order.`,
    ),
    section('Filters', form),
    section('Coverage per collector in this scope', h('div', null, coverageEmpty, h('div', { class: 'table-wrap' }, coverageTable))),
    section('Events', h('div', null, status, problem, empty, wrap, h('div', { class: 'load-more' }, more))),
  );
  return { el, title: 'Activity' };
}
