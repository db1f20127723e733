/**
 * The VM table of the fleet view: one keyed row per VM (plus a row per VM still being created),
 * its state badge, its agent's status, and the actions its state allows. Rows are patched in
 * place on every refresh, so buttons keep keyboard focus.
 */
import type { Vm } from '../../../client/types.js';
import { agentBadge, operationBadge, vmActions, vmBadge, type VmAction } from '../../model/badges.js';
import { formatDuration, formatMiB } from '../../model/format.js';
import { href } from '../../model/routes.js';
import type { AppContext } from '../context.js';
import type { TrackedOperation } from '../core/fleet-service.js';
import { h, replaceChildren, setText } from '../dom.js';
import { KeyedRows, type KeyedRow } from '../ui/keyed-rows.js';
import { badge, button, emptyState, setBadge, withBusy } from '../ui/widgets.js';
import { describeError } from '../ui/toast.js';
import { confirmDeleteVm, openCreateVmDialog } from './vm-dialogs.js';

interface VmRow extends KeyedRow {
  readonly name: HTMLElement;
  readonly state: HTMLElement;
  readonly stateBadge: HTMLElement;
  readonly progress: HTMLElement;
  readonly agent: HTMLElement;
  readonly vcpus: HTMLElement;
  readonly memory: HTMLElement;
  readonly ip: HTMLElement;
  readonly uptime: HTMLElement;
  /** One button per action, always present so the columns line up; unavailable ones are hidden in place. */
  readonly buttons: ReadonlyMap<VmAction, HTMLButtonElement>;
  /** Shown only on a running VM whose provider advertises checkpoints (spec 4.13). */
  readonly checkpoint: HTMLButtonElement;
}

const ACTIONS: readonly VmAction[] = ['start', 'stop', 'restart', 'delete'];

const LABELS: Record<VmAction, string> = { start: 'Start', stop: 'Stop', restart: 'Restart', delete: 'Delete' };

export function vmTable(app: AppContext): { el: HTMLElement; render(): void } {
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table', 'aria-label': 'Virtual machines' },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', { scope: 'col' }, 'Name'),
        h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col' }, 'Agent'),
        h('th', { scope: 'col', class: 'num' }, 'vCPUs'),
        h('th', { scope: 'col', class: 'num' }, 'Memory'),
        h('th', { scope: 'col' }, 'IP address'),
        h('th', { scope: 'col', class: 'num' }, 'Uptime'),
        h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')),
      ),
    ),
    tbody,
  );
  const wrap = h('div', { class: 'table-wrap' }, table);
  const status = h('div', { class: 'table-status' });
  const el = h('div', null, status, wrap);
  const byName = new Map<string, Vm>();

  const runAction = async (vm: Vm, action: VmAction, btn: HTMLButtonElement): Promise<void> => {
    if (action === 'delete') {
      await confirmDeleteVm(app, vm);
      return;
    }
    await withBusy(btn, async () => {
      try {
        if (action === 'restart') {
          app.fleet.track(await app.api.restartVm(vm.name), `Restart ${vm.name}`);
        } else {
          const r = action === 'start' ? await app.api.startVm(vm.name) : await app.api.stopVm(vm.name);
          app.toasts.success(`${vm.name}: ${r.vm.state}`, r.message);
        }
      } catch (err) {
        app.toasts.error(`Could not ${action} ${vm.name}`, err);
      } finally {
        app.fleet.refresh();
      }
    });
  };

  const rows = new KeyedRows<VmRow>(
    tbody,
    (name) => {
      const stateBadge = badge(vmBadge('unknown'));
      const progress = h('span', { class: 'op-inline' });
      const buttons = new Map<VmAction, HTMLButtonElement>();
      for (const a of ACTIONS) {
        const b = button(
          LABELS[a],
          () => {
            const cur = byName.get(name);
            if (cur !== undefined) void runAction(cur, a, b);
          },
          'default',
          { 'aria-label': `${LABELS[a]} ${name}`, class: a === 'delete' ? 'btn btn-small btn-ghost-danger' : 'btn btn-small' },
        );
        buttons.set(a, b);
      }
      const checkpoint = button(
        'Checkpoint',
        () => {
          const cur = byName.get(name);
          if (cur !== undefined) void takeCheckpoint(app, cur, checkpoint);
        },
        'default',
        { 'aria-label': `Checkpoint ${name}`, class: 'btn btn-small' },
      );
      checkpoint.hidden = true;
      const r: VmRow = {
        tr: h('tr', { 'data-vm': name }),
        name: h('td', { class: 'cell-strong' }, name),
        state: h('td', null, stateBadge, progress),
        stateBadge,
        progress,
        agent: h('td'),
        vcpus: h('td', { class: 'num' }),
        memory: h('td', { class: 'num' }),
        ip: h('td', { class: 'mono' }),
        uptime: h('td', { class: 'num' }),
        buttons,
        checkpoint,
      };
      r.tr.append(
        r.name,
        r.state,
        r.agent,
        r.vcpus,
        r.memory,
        r.ip,
        r.uptime,
        h('td', { class: 'row-actions' }, ...buttons.values(), checkpoint),
      );
      return r;
    },
    (r, name) => {
      const vm = byName.get(name);
      const op = app.fleet.opsFor(name).find((t) => t.finishedAtMs === null) ?? null;
      if (vm === undefined) {
        // A VM being created that the hypervisor does not list yet.
        setBadge(r.stateBadge, operationBadge(op?.op.status ?? 'pending'));
        setText(r.stateBadge, 'creating');
        for (const c of [r.vcpus, r.memory, r.ip, r.uptime, r.agent]) setText(c, '—');
      } else {
        setBadge(r.stateBadge, vmBadge(vm.state));
        setText(r.vcpus, String(vm.vcpus));
        setText(r.memory, formatMiB(vm.memory_mb));
        setText(r.ip, vm.ip_address === '' ? '—' : vm.ip_address);
        setText(r.uptime, formatDuration(vm.uptime_seconds));
        renderAgentCell(app, r.agent, name);
      }
      renderProgress(r.progress, op);
      const actions = vm === undefined || op !== null ? [] : vmActions(vm.state);
      for (const [a, b] of r.buttons) {
        const off = !actions.includes(a);
        // A busy button (request in flight) keeps its own disabled state.
        if (b.getAttribute('aria-busy') !== 'true') b.disabled = off;
        b.classList.toggle('slot-hidden', off);
      }
      r.checkpoint.hidden = !(vm?.state === 'running' && op === null && (app.fleet.capabilities[name] ?? []).includes('checkpoint'));
    },
  );

  const render = (): void => {
    byName.clear();
    for (const v of app.fleet.vms) byName.set(v.name, v);
    const creating = [...app.fleet.ops.values()]
      .filter((t) => t.op.type === 'vm_create' && t.finishedAtMs === null && !byName.has(t.op.target))
      .map((t) => t.op.target);
    const keys = [...[...byName.keys()].sort(), ...creating.filter((n, i) => creating.indexOf(n) === i)];
    rows.sync(keys);
    const err = app.fleet.vmsError;
    if (!app.fleet.vmsLoaded) {
      replaceChildren(status, h('div', { class: 'loading' }, 'Loading VMs…'));
    } else if (err !== null) {
      replaceChildren(status, h('div', { class: 'inline-error', role: 'alert' }, `The VM list is unavailable: ${describeError(err)}`));
    } else if (keys.length === 0) {
      replaceChildren(
        status,
        emptyState(
          'No VMs yet — create one',
          'A VM boots with an agent that connects back to sandboxd.',
          button('Create VM', () => openCreateVmDialog(app), 'primary'),
        ),
      );
    } else {
      replaceChildren(status);
    }
    wrap.hidden = keys.length === 0;
  };
  return { el, render };
}

/** POST a pre-enrollment checkpoint of the VM and follow its operation (the server says why when it cannot). */
async function takeCheckpoint(app: AppContext, vm: Vm, btn: HTMLButtonElement): Promise<void> {
  await withBusy(btn, async () => {
    try {
      const r = await app.api.createCheckpoint({
        vm: vm.name,
        checkpoint_id: `${vm.name}-${Date.now().toString(36)}`,
        pre_enrollment: true,
      });
      app.fleet.track({ operation: r.operation, vm: null }, `Checkpoint ${vm.name}`);
    } catch (err) {
      app.toasts.error(`Could not checkpoint ${vm.name}`, err);
    }
  });
}

function renderAgentCell(app: AppContext, cell: HTMLElement, vmName: string): void {
  const row = app.fleet.agents.get(vmName);
  const key = row === undefined ? 'none' : `${row.status}`;
  if (cell.dataset['key'] === key) return;
  cell.dataset['key'] = key;
  if (row === undefined) replaceChildren(cell, h('span', { class: 'muted' }, 'not connected'));
  else replaceChildren(cell, h('a', { href: href.agent(vmName), class: 'badge-link' }, badge(agentBadge(row.status))));
}

function renderProgress(el: HTMLElement, t: TrackedOperation | null): void {
  if (t === null) {
    if (el.childElementCount > 0) replaceChildren(el);
    return;
  }
  const pct = Math.max(0, Math.min(100, t.op.progress_percent));
  const label = `${t.label}: ${t.op.status} ${pct}%`;
  const bar = el.querySelector<HTMLElement>('.progress-fill');
  if (bar === null) {
    replaceChildren(
      el,
      h(
        'span',
        { class: 'progress', role: 'progressbar', 'aria-label': t.label, 'aria-valuemin': 0, 'aria-valuemax': 100 },
        h('span', { class: 'progress-fill' }),
      ),
      h('span', { class: 'progress-text' }),
    );
  }
  const fill = el.querySelector<HTMLElement>('.progress-fill');
  if (fill !== null) fill.style.width = `${pct}%`;
  el.querySelector('.progress')?.setAttribute('aria-valuenow', String(pct));
  const text = el.querySelector('.progress-text');
  if (text !== null) setText(text, `${pct}%`);
  el.title = label;
}
