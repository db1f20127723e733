/**
 * The agents table of the fleet view: status, live CPU and memory (meters plus a CPU sparkline of
 * the last minutes), load and heartbeat age. Built for fleets: rows are keyed and only the rows a
 * change names are patched, at most once per animation frame; a filter narrows the list.
 */
import { agentBadge } from '../../model/badges.js';
import { cpuSeries } from '../../model/metrics-history.js';
import { formatAgo, formatBytes, formatLoad, formatPercent, ratioPercent } from '../../model/format.js';
import { href } from '../../model/routes.js';
import type { AppContext } from '../context.js';
import { h, setText } from '../dom.js';
import { KeyedRows, type KeyedRow } from '../ui/keyed-rows.js';
import { badge, emptyState, meter, setBadge, sparkline } from '../ui/widgets.js';

interface AgentRowEls extends KeyedRow {
  readonly host: HTMLElement;
  readonly status: HTMLElement;
  readonly cpu: ReturnType<typeof meter>;
  readonly cpuSpark: ReturnType<typeof sparkline>;
  readonly mem: ReturnType<typeof meter>;
  readonly load: HTMLElement;
  readonly ip: HTMLElement;
  readonly heartbeat: HTMLElement;
}

export function agentTable(app: AppContext): { el: HTMLElement; render(ids?: ReadonlySet<string>): void; filterInput: HTMLInputElement } {
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table', 'aria-label': 'Agents' },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', { scope: 'col' }, 'Agent'),
        h('th', { scope: 'col' }, 'Status'),
        h('th', { scope: 'col' }, 'CPU (now, last minutes)'),
        h('th', { scope: 'col' }, 'Memory'),
        h('th', { scope: 'col', class: 'num' }, 'Load'),
        h('th', { scope: 'col' }, 'IP address'),
        h('th', { scope: 'col', class: 'num' }, 'Heartbeat'),
      ),
    ),
    tbody,
  );
  const wrap = h('div', { class: 'table-wrap table-tall' }, table);
  const status = h('div', { class: 'table-status' });
  const filterInput = h('input', {
    type: 'search',
    class: 'input input-small',
    placeholder: 'Filter agents',
    'aria-label': 'Filter agents by id, hostname or status',
  });
  const el = h('div', null, status, wrap);
  let filter = '';
  let shownLoaded = false;

  const rows = new KeyedRows<AgentRowEls>(
    tbody,
    (id) => {
      const statusBadge = badge(agentBadge('Starting'));
      const r: AgentRowEls = {
        tr: h('tr', { 'data-agent': id }),
        host: h('span', { class: 'sub' }),
        status: statusBadge,
        cpu: meter(`CPU of ${id}`),
        cpuSpark: sparkline({ width: 72, height: 20, max: 100, label: `CPU of ${id}, last minutes` }),
        mem: meter(`Memory of ${id}`),
        load: h('td', { class: 'num mono' }),
        ip: h('td', { class: 'mono' }),
        heartbeat: h('td', { class: 'num' }),
      };
      r.tr.append(
        h('td', { class: 'cell-strong' }, h('a', { href: href.agent(id) }, id), r.host),
        h('td', null, statusBadge),
        h('td', null, h('span', { class: 'cpu-cell' }, r.cpu.el, r.cpuSpark.el)),
        h('td', null, r.mem.el),
        r.load,
        r.ip,
        r.heartbeat,
      );
      return r;
    },
    (r, id) => {
      const row = app.fleet.agents.get(id);
      if (row === undefined) return;
      const a = row.agent;
      setText(r.host, a.hostname !== '' && a.hostname !== id ? a.hostname : '');
      setBadge(r.status, agentBadge(row.status));
      const m = row.metrics;
      if (m === null) {
        r.cpu.set(Number.NaN, '—');
        r.mem.set(Number.NaN, '—');
        setText(r.load, '—');
      } else {
        r.cpu.set(m.cpuPercent, formatPercent(m.cpuPercent));
        const memPct = ratioPercent(m.memoryUsedBytes, m.memoryTotalBytes);
        r.mem.set(
          memPct,
          m.memoryTotalBytes > 0
            ? `${formatBytes(m.memoryUsedBytes)} / ${formatBytes(m.memoryTotalBytes)}`
            : formatBytes(m.memoryUsedBytes),
        );
        setText(r.load, formatLoad(m.loadAvg.slice(0, 1)));
      }
      r.cpuSpark.update(cpuSeries(app.fleet.agents.history.samples(id)));
      setText(r.ip, a.ip_address === '' ? '—' : a.ip_address);
      setText(r.heartbeat, formatAgo(a.last_heartbeat, Date.now()));
      r.tr.dataset['status'] = row.status;
    },
  );

  const matches = (id: string): boolean => {
    if (filter === '') return true;
    const row = app.fleet.agents.get(id);
    return row !== undefined && `${id} ${row.agent.hostname} ${row.status} ${row.agent.ip_address}`.toLowerCase().includes(filter);
  };

  const render = (ids?: ReadonlySet<string>): void => {
    const all = app.fleet.agents.rows();
    const keys = all.map((r) => r.agent.id).filter(matches);
    // A live update names its agents: patch those rows only, unless the set of rows changed.
    if (
      ids !== undefined &&
      shownLoaded &&
      rows.size === keys.length &&
      [...ids].every((id) => app.fleet.agents.get(id) !== undefined && (!matches(id) || rows.get(id) !== undefined))
    ) {
      for (const id of ids) rows.patch(id);
      return;
    }
    rows.sync(keys);
    shownLoaded = app.fleet.agents.loaded;
    if (!app.fleet.agents.loaded) status.replaceChildren(h('div', { class: 'loading' }, 'Loading agents…'));
    else if (all.length === 0)
      status.replaceChildren(
        emptyState('No agents connected', 'Agents dial in over mTLS gRPC when their VM boots. Create a VM above to get one.'),
      );
    else if (keys.length === 0) status.replaceChildren(emptyState('No agent matches the filter', `Nothing matches “${filter}”.`));
    else status.replaceChildren();
    wrap.hidden = keys.length === 0;
  };

  filterInput.addEventListener('input', () => {
    filter = filterInput.value.trim().toLowerCase();
    render();
  });
  return { el, render, filterInput };
}
