/**
 * Fleet overview (#/): a summary strip, the VM operations in progress, the VMs (with actions and
 * the create form) and the agents (live metrics). Data comes from the shared FleetService; this
 * view only watches it and patches its tables.
 */
import { AGENT_STATUSES, agentBadge, operationBadge } from '../../model/badges.js';
import { formatAgo, plural } from '../../model/format.js';
import type { AppContext, ViewInstance } from '../context.js';
import { frameThrottle, h, replaceChildren } from '../dom.js';
import { badge, button, pageHeader, section } from '../ui/widgets.js';
import { agentTable } from './fleet-agents.js';
import { vmTable } from './fleet-vms.js';
import { openCreateVmDialog } from './vm-dialogs.js';

export function fleetView(app: AppContext, _route: unknown, signal: AbortSignal): ViewInstance {
  const createBtn = button('Create VM', () => openCreateVmDialog(app), 'primary');
  const subtitle = h('span');
  const summary = h('div', { class: 'stats', 'aria-label': 'Fleet summary' });
  const ops = h('div', { class: 'ops', 'aria-live': 'polite' });
  const vms = vmTable(app);
  const agents = agentTable(app);
  const el = h(
    'div',
    { class: 'page' },
    pageHeader('Fleet', subtitle, createBtn),
    summary,
    ops,
    section('Virtual machines', vms.el),
    section('Agents', agents.el, agents.filterInput),
  );

  const renderSummary = (): void => {
    const counts = app.fleet.agents.countByStatus();
    const vmList = app.fleet.vms;
    const running = vmList.filter((v) => v.state === 'running').length;
    replaceChildren(
      subtitle,
      app.fleet.agents.loaded
        ? `${plural(app.fleet.agents.size, 'agent')} · ${plural(vmList.length, 'VM')}, ${running} running`
        : 'Loading…',
    );
    const tiles: HTMLElement[] = [
      h(
        'div',
        { class: 'stat' },
        h('div', { class: 'stat-value' }, String(running)),
        h('div', { class: 'stat-label' }, `of ${plural(vmList.length, 'VM')} running`),
      ),
    ];
    for (const s of AGENT_STATUSES) {
      const n = counts.get(s) ?? 0;
      if (n === 0 && s !== 'Ready') continue;
      tiles.push(
        h(
          'div',
          { class: `stat stat-${agentBadge(s).tone}` },
          h('div', { class: 'stat-value' }, String(n)),
          h('div', { class: 'stat-label' }, `${agentBadge(s).label.toLowerCase()} ${n === 1 ? 'agent' : 'agents'}`),
        ),
      );
    }
    replaceChildren(summary, ...tiles);
  };

  const renderOps = (): void => {
    const list = [...app.fleet.ops.values()].sort((a, b) => b.startedAtMs - a.startedAtMs);
    replaceChildren(
      ops,
      ...list.map((t) => {
        const pct = Math.max(0, Math.min(100, t.op.progress_percent));
        const done = t.finishedAtMs !== null;
        const dismiss = button('Dismiss', () => app.fleet.dismiss(t.op.id), 'ghost', {
          class: 'btn btn-small btn-ghost',
          'aria-label': `Dismiss ${t.label}`,
        });
        return h(
          'div',
          { class: `op op-${t.op.status}`, 'data-op': t.op.id },
          h(
            'div',
            { class: 'op-main' },
            h('span', { class: 'op-label' }, t.label),
            badge(operationBadge(t.op.status)),
            h('span', { class: 'op-meta' }, `${t.op.id} · started ${formatAgo(t.startedAtMs, Date.now())}`),
          ),
          h(
            'span',
            {
              class: 'progress progress-wide',
              role: 'progressbar',
              'aria-label': t.label,
              'aria-valuemin': 0,
              'aria-valuemax': 100,
              'aria-valuenow': pct,
            },
            h('span', { class: 'progress-fill', style: `width:${pct}%` }),
          ),
          h('span', { class: 'op-pct' }, `${pct}%`),
          t.op.status === 'failed'
            ? h('div', { class: 'op-error' }, `${t.op.error_code !== undefined ? `${t.op.error_code}: ` : ''}${t.op.error ?? 'failed'}`)
            : null,
          t.pollErrors > 0 && !done ? h('div', { class: 'op-error' }, 'Waiting for the server to answer…') : null,
          done ? dismiss : null,
        );
      }),
    );
  };

  const renderAll = (): void => {
    renderSummary();
    renderOps();
    vms.render();
    agents.render();
  };
  // Live metrics for many agents: collect the ids and patch once per frame.
  const pendingIds = new Set<string>();
  let marked = false;
  const flushAgents = frameThrottle(() => {
    const ids = new Set(pendingIds);
    pendingIds.clear();
    agents.render(ids);
    renderSummary();
    app.fleet.stats.liveFlushes++;
    app.fleet.stats.agentRowPatches += ids.size;
    if (!marked && app.fleet.agents.loaded) {
      // Time to first render of the fleet (the bench reads it with performance.getEntriesByName).
      marked = true;
      performance.mark('sandboxd:fleet-agents-rendered');
    }
  });
  const flushVms = frameThrottle(() => {
    renderSummary();
    vms.render();
  });
  const off = app.fleet.changes.on((c) => {
    if (c.kind === 'agents') {
      for (const id of c.ids) pendingIds.add(id);
      flushAgents();
      flushVms();
    } else if (c.kind === 'vms') {
      flushVms();
    } else {
      renderOps();
      flushVms();
    }
  });
  const stopWatching = app.fleet.watchVms();
  // Heartbeat ages ("12s ago") move with the clock, not with data.
  const clock = setInterval(() => agents.render(new Set(app.fleet.agents.rows().map((r) => r.agent.id))), 5000);
  renderAll();
  signal.addEventListener('abort', () => {
    off();
    stopWatching();
    clearInterval(clock);
  });
  return { el, title: 'Fleet' };
}
