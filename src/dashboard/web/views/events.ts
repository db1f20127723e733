/**
 * Events (#/events?type=vm.&agent=…&vm=…): a live tail of GET /api/v1/events?follow=true with the
 * filters applied by the server, newest on top. Survives server restarts: it reconnects with
 * backoff, resumes with since=<last id>, and notices a restarted server (see EventLog).
 */
import { backoffDelayMs } from '../../model/backoff.js';
import {
  detailsSummary,
  EVENT_TYPE_PREFIXES,
  EventLog,
  eventsApiQuery,
  filterFromQuery,
  filterToQuery,
  type LogEntry,
} from '../../model/event-log.js';
import { formatClock, formatDateTime } from '../../model/format.js';
import { href, type Route } from '../../model/routes.js';
import type { AppContext, ViewInstance } from '../context.js';
import { frameThrottle, h, setText, uid } from '../dom.js';
import { describeError } from '../ui/toast.js';
import { button, emptyState, pageHeader, section } from '../ui/widgets.js';
import { VM_EVENT_TYPES } from '../../../wire/events.js';
import { MISSION_EVENT_TYPES } from '../../../wire/missions.js';

/** The spec's event types (part 6), offered in the type filter. */
const SPEC_EVENT_TYPES = [
  ...VM_EVENT_TYPES,
  'agent.connected',
  'agent.disconnected',
  'agent.registered',
  'agent.command.started',
  'agent.command.completed',
  'agent.pty.created',
  'agent.pty.closed',
  'session.reconcile_started',
  'session.reconcile_complete',
  'session.killed',
  'session.preserved',
  // missions (spec part 6 names mission.failed; README "Missions and dispatch")
  ...MISSION_EVENT_TYPES,
];

export function eventsView(app: AppContext, route: Route, signal: AbortSignal): ViewInstance {
  const filter = filterFromQuery(route.view === 'events' ? route.query : new URLSearchParams());
  const log = new EventLog(2000);

  // ---- filter form (applying it changes the hash, which remounts the view with a new stream)
  const list = (id: string, values: readonly string[]): HTMLDataListElement =>
    h('datalist', { id }, ...values.map((v) => h('option', { value: v })));
  const typesId = uid('types');
  const agentsId = uid('agents');
  const vmsId = uid('vms');
  const typeIn = h('input', {
    class: 'input',
    name: 'type',
    value: filter.type,
    list: typesId,
    placeholder: 'e.g. vm. or agent.connected',
    autocomplete: 'off',
    spellcheck: 'false',
    id: uid('f'),
  });
  const agentIn = h('input', {
    class: 'input',
    name: 'agent',
    value: filter.agentId,
    list: agentsId,
    placeholder: 'any agent',
    autocomplete: 'off',
    spellcheck: 'false',
    id: uid('f'),
  });
  const vmIn = h('input', {
    class: 'input',
    name: 'vm',
    value: filter.vmName,
    list: vmsId,
    placeholder: 'any VM',
    autocomplete: 'off',
    spellcheck: 'false',
    id: uid('f'),
  });
  const apply = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Apply');
  const clear = h('a', { class: 'btn btn-ghost', href: href.events() }, 'Clear filters');
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Event filters' },
    h('div', { class: 'field' }, h('label', { for: typeIn.id }, 'Type or prefix'), typeIn),
    h('div', { class: 'field' }, h('label', { for: agentIn.id }, 'Agent'), agentIn),
    h('div', { class: 'field' }, h('label', { for: vmIn.id }, 'VM'), vmIn),
    h('div', { class: 'filters-actions' }, apply, clear),
    list(typesId, [...EVENT_TYPE_PREFIXES, ...SPEC_EVENT_TYPES]),
    list(
      agentsId,
      app.fleet.agents.rows().map((r) => r.agent.id),
    ),
    list(
      vmsId,
      app.fleet.vms.map((v) => v.name),
    ),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    app.navigate(href.events(filterToQuery({ type: typeIn.value, agentId: agentIn.value, vmName: vmIn.value })));
  });

  // ---- the table, newest first
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table table-events', 'aria-label': 'Events, newest first' },
    h('thead', null, h('tr', null, ...['Time', 'Type', 'Agent', 'VM', 'Details'].map((t) => h('th', { scope: 'col' }, t)))),
    tbody,
  );
  const wrap = h('div', { class: 'table-wrap table-tall' }, table);
  const empty = emptyState('No events yet', 'Events appear here as they happen: VMs starting and stopping, agents connecting, sessions.');
  const status = h('div', { class: 'stream-status', role: 'status' }, 'Connecting…');
  let paused = false;
  let held: LogEntry[] = [];
  const pause = button(
    'Pause',
    () => {
      paused = !paused;
      setText(pause, paused ? 'Resume' : 'Pause');
      pause.setAttribute('aria-pressed', String(paused));
      if (!paused) {
        queue.push(...held);
        held = [];
        flush();
      }
      renderStatus();
    },
    'default',
    { 'aria-pressed': 'false' },
  );
  let streamText = 'Connecting…';
  const renderStatus = (): void =>
    setText(status, paused ? `Paused — ${held.length} new ${held.length === 1 ? 'event' : 'events'} held` : streamText);

  const rowFor = (e: LogEntry): HTMLTableRowElement => {
    if (e.kind === 'marker') return h('tr', { class: 'row-marker' }, h('td', { colspan: 5 }, e.text));
    const ev = e.event;
    const typeLink = h('a', { href: href.events(filterToQuery({ ...filter, type: ev.event_type })), class: 'mono' }, ev.event_type);
    return h(
      'tr',
      { 'data-event-id': ev.id, 'data-type': ev.event_type },
      h('td', { class: 'mono nowrap', title: formatDateTime(ev.timestamp) }, formatClock(ev.timestamp)),
      h('td', { class: 'nowrap' }, typeLink),
      h(
        'td',
        { class: 'nowrap' },
        ev.agent_id !== '' ? h('a', { href: href.agent(ev.agent_id) }, ev.agent_id) : h('span', { class: 'muted' }, '—'),
      ),
      h('td', { class: 'nowrap' }, ev.vm_name !== '' ? ev.vm_name : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'mono details', title: JSON.stringify(ev.details, null, 2) }, detailsSummary(ev.details)),
    );
  };
  let queue: LogEntry[] = [];
  const flush = frameThrottle(() => {
    if (queue.length === 0) return;
    const frag = document.createDocumentFragment();
    for (let i = queue.length - 1; i >= 0; i--) frag.appendChild(rowFor(queue[i] as LogEntry));
    queue = [];
    tbody.insertBefore(frag, tbody.firstChild);
    while (tbody.childElementCount > 2000 && tbody.lastElementChild !== null) tbody.lastElementChild.remove();
    wrap.hidden = false;
    empty.hidden = true;
  });
  const show = (entries: readonly LogEntry[]): void => {
    if (entries.length === 0) return;
    if (paused) {
      held.push(...entries);
      renderStatus();
      return;
    }
    queue.push(...entries);
    flush();
  };
  wrap.hidden = true;

  // ---- the stream
  const run = async (): Promise<void> => {
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (log.lastId > 0) {
          const page = await app.api.listEvents({ limit: 1 }, { signal });
          const marker = log.checkServerCursor(page.last_event_id);
          if (marker !== null) show([marker]);
        }
        const q = eventsApiQuery(filter, { since: log.lastId, limit: 200 });
        const stream = app.api.tailEvents(
          {
            since: log.lastId,
            limit: 200,
            ...(q.get('event_type') !== null ? { event_type: q.get('event_type') as string } : {}),
            ...(q.get('agent_id') !== null ? { agent_id: q.get('agent_id') as string } : {}),
            ...(q.get('vm_name') !== null ? { vm_name: q.get('vm_name') as string } : {}),
          },
          {
            signal,
            reconnect: false,
            onOpen: () => {
              failures = 0;
              streamText = 'Live';
              renderStatus();
            },
          },
        );
        for await (const ev of stream) show(log.add([ev]));
        if (signal.aborted) return;
        streamText = 'The server ended the stream — reconnecting…';
      } catch (err) {
        if (signal.aborted) return;
        streamText = `Stream interrupted (${describeError(err)})`;
      }
      failures++;
      const delayMs = backoffDelayMs(failures - 1, { baseMs: 1000, maxMs: 15_000 });
      streamText += ` — reconnecting in ${Math.ceil(delayMs / 1000)}s`;
      renderStatus();
      await new Promise((r) => setTimeout(r, delayMs));
    }
  };
  void run();

  const active = [
    filter.type !== '' ? `type ${filter.type}` : '',
    filter.agentId !== '' ? `agent ${filter.agentId}` : '',
    filter.vmName !== '' ? `VM ${filter.vmName}` : '',
  ].filter((s) => s !== '');
  const el = h(
    'div',
    { class: 'page' },
    pageHeader(
      'Events',
      active.length > 0 ? `Filtered by ${active.join(', ')}` : 'Everything that happens to VMs, agents and sessions, as it happens.',
    ),
    section('Filters', form),
    section('Live tail', h('div', null, status, empty, wrap), pause),
  );
  return { el, title: 'Events' };
}
