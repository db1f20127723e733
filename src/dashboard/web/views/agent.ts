/**
 * Agent detail (#/agents/{id}): identity and system info, CPU and memory over the last minutes
 * (inline SVG charts fed by the live metrics), and the agent's terminal sessions with "Open" (as
 * observer) and "New terminal".
 */
import { agentBadge } from '../../model/badges.js';
import { formatAgo, formatBytes, formatDateTime, formatDuration, formatLoad, formatPercent, ratioPercent } from '../../model/format.js';
import { cpuSeries, memorySeries } from '../../model/metrics-history.js';
import { href, type Route } from '../../model/routes.js';
import type { AppContext, ViewInstance } from '../context.js';
import { frameThrottle, h, replaceChildren, setText } from '../dom.js';
import { badge, button, emptyState, facts, meter, pageHeader, section, setBadge, sparkline, withBusy } from '../ui/widgets.js';
import { sessionsTable } from './agent-sessions.js';

export function agentView(app: AppContext, route: Route, signal: AbortSignal): ViewInstance {
  if (route.view !== 'agent') throw new Error('agent view needs an agent route');
  const id = route.agentId;
  const statusBadge = badge(agentBadge('Starting'));
  const subtitle = h('span');
  const newTerminal = button(
    'New terminal',
    () => {
      void withBusy(newTerminal, async () => {
        try {
          const s = await app.api.createSession(
            id,
            {},
            { idempotencyKey: `dash-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}` },
          );
          app.navigate(href.terminal(id, s.session_id));
        } catch (err) {
          app.toasts.error(`Could not open a terminal on ${id}`, err);
        }
      });
    },
    'primary',
  );
  const eventsLink = h('a', { class: 'btn', href: href.events(new URLSearchParams({ agent: id })) }, 'Events');

  const info = h('div');
  const cpuChart = sparkline({ width: 480, height: 72, max: 100, label: `CPU of ${id} over the last minutes (percent)` });
  const memChart = sparkline({ width: 480, height: 72, max: 100, label: `Memory of ${id} over the last minutes (percent used)` });
  const cpuNow = h('span', { class: 'chart-value' }, '—');
  const memNow = h('span', { class: 'chart-value' }, '—');
  const disk = meter(`Disk of ${id}`);
  const load = h('span', { class: 'mono' }, '—');
  const chartNote = h('div', { class: 'chart-note' });
  const charts = h(
    'div',
    { class: 'charts' },
    h('figure', { class: 'chart' }, h('figcaption', null, 'CPU', cpuNow), cpuChart.el),
    h('figure', { class: 'chart' }, h('figcaption', null, 'Memory', memNow), memChart.el),
    chartNote,
    h(
      'div',
      { class: 'chart-facts' },
      h('div', null, h('span', { class: 'muted' }, 'Disk '), disk.el),
      h('div', null, h('span', { class: 'muted' }, 'Load (1, 5, 15 min) '), load),
    ),
  );
  const sessions = sessionsTable(app, id, signal);
  const missing = h('div');
  const body = h('div', { class: 'grid-2' }, section('System', info), section('Metrics — last minutes', charts));
  const el = h(
    'div',
    { class: 'page' },
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: href.fleet() }, 'Fleet'),
      h('span', { 'aria-hidden': 'true' }, ' / '),
      id,
    ),
    pageHeader(h('span', { class: 'title-with-badge' }, id, statusBadge), subtitle, eventsLink, newTerminal),
    missing,
    body,
    section('Terminal sessions', sessions.el, sessions.refreshButton),
  );

  const render = (): void => {
    const row = app.fleet.agents.get(id);
    if (row === undefined) {
      if (app.fleet.agents.loaded) {
        replaceChildren(
          missing,
          emptyState(
            'This agent is not connected',
            `No agent “${id}” is listed. It may have been removed after disconnecting, or its VM is still booting.`,
            h('a', { class: 'btn', href: href.fleet() }, 'Back to the fleet'),
          ),
        );
      }
      body.hidden = true;
      return;
    }
    replaceChildren(missing);
    body.hidden = false;
    const a = row.agent;
    setBadge(statusBadge, agentBadge(row.status));
    setText(subtitle, [a.hostname, a.ip_address].filter((s) => s !== '').join(' · '));
    const si = a.system_info;
    const now = Date.now();
    replaceChildren(
      info,
      facts([
        ['Hostname', a.hostname || '—'],
        ['IP address', a.ip_address || '—'],
        ['Operating system', si?.os ?? '—'],
        ['Kernel', si?.kernel ?? '—'],
        ['CPU cores', si !== undefined ? String(si.cpu_cores) : '—'],
        ['Memory', si !== undefined ? formatBytes(si.memory_bytes) : '—'],
        ['Disk', si !== undefined ? formatBytes(si.disk_bytes) : '—'],
        ['Uptime', formatDuration(a.metrics?.uptime_seconds)],
        ['Connected', a.connected_at > 0 ? `${formatDateTime(a.connected_at)} (${formatAgo(a.connected_at, now)})` : '—'],
        ['Last heartbeat', formatAgo(a.last_heartbeat, now)],
        ['VM', app.fleet.vms.some((v) => v.name === id) ? h('a', { href: href.fleet() }, id) : '—'],
      ]),
    );
    const samples = app.fleet.agents.history.samples(id);
    cpuChart.update(cpuSeries(samples));
    memChart.update(memorySeries(samples));
    const first = samples[0];
    const last = samples[samples.length - 1];
    setText(
      chartNote,
      samples.length < 2 || first === undefined || last === undefined
        ? 'Collecting samples — the charts fill in as metrics arrive.'
        : `${samples.length} samples over the last ${formatDuration((last.atMs - first.atMs) / 1000)} · 0–100 %`,
    );
    const m = row.metrics;
    setText(cpuNow, m !== null ? formatPercent(m.cpuPercent) : '—');
    setText(
      memNow,
      m !== null
        ? `${formatPercent(ratioPercent(m.memoryUsedBytes, m.memoryTotalBytes))} · ${formatBytes(m.memoryUsedBytes)} of ${formatBytes(m.memoryTotalBytes)}`
        : '—',
    );
    if (m !== null && m.diskTotalBytes > 0)
      disk.set(ratioPercent(m.diskUsedBytes, m.diskTotalBytes), `${formatBytes(m.diskUsedBytes)} / ${formatBytes(m.diskTotalBytes)}`);
    else disk.set(Number.NaN, '—');
    setText(load, m !== null ? formatLoad(m.loadAvg) : '—');
  };
  const throttled = frameThrottle(render);
  const off = app.fleet.changes.on((c) => {
    if (c.kind !== 'agents' || c.ids.has(id)) throttled();
  });
  const stopVms = app.fleet.watchVms();
  const clock = setInterval(throttled, 5000);
  render();
  app.fleet.agentPoller.kick();
  signal.addEventListener('abort', () => {
    off();
    stopVms();
    clearInterval(clock);
  });
  return { el, title: id };
}
