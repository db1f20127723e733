/**
 * `sbx fleet workloads` and `sbx fleet reconcile` (spec 4.13, README "Fleet inventory and
 * reconcile"). A reconcile names the inventory_revision it was previewed at (`sbx fleet
 * workloads` prints it); `--dry-run` prints the plan and acts on nothing; otherwise it waits for
 * the fleet_reconcile operation with a progress display unless --no-wait (a failed operation
 * exits 6), and takes --idempotency-key (spec 4.11).
 */
import type { FleetReconcileDryRun, ReconcilePlanStep, ReconcileStepResult, WorkloadJson } from '../../client/types.js';
import { bool, int, str, UsageError, type FlagSpec } from '../args.js';
import { paint, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import { followAccepted } from '../progress.js';
import { NO_WAIT, type CommandDef } from './command.js';

const driftColor = (drift: string): 'green' | 'yellow' | 'red' | undefined =>
  drift === 'none' ? 'green' : drift === 'missing' || drift === 'unmanaged' ? 'red' : drift === 'foreign' ? undefined : 'yellow';

function workloadTable(ctx: CommandContext, list: readonly WorkloadJson[]): string {
  return renderTable(
    list,
    [
      { header: 'NAME', value: (w) => w.name },
      { header: 'DESIRED', value: (w) => w.desired?.state ?? '-' },
      {
        header: 'OBSERVED',
        value: (w) => w.observed.domain?.state ?? 'absent',
        color: (w) => stateColor(w.observed.domain?.state ?? 'failed'),
      },
      { header: 'AGENT', value: (w) => w.observed.agent?.status ?? '-' },
      { header: 'DRIFT', value: (w) => w.drift, color: (w) => driftColor(w.drift) },
      { header: 'PROFILE', value: (w) => w.desired?.profile ?? '-' },
      { header: 'OWNER', value: (w) => w.desired?.owner.actor ?? '-' },
      { header: 'ORIGIN', value: (w) => w.lineage?.origin ?? '-' },
      { header: 'REV', value: (w) => String(w.revision), right: true },
    ],
    { color: ctx.color, empty: 'no workloads' },
  );
}

function stepTable(ctx: CommandContext, steps: readonly (ReconcilePlanStep & Partial<ReconcileStepResult>)[]): string {
  return renderTable(
    steps,
    [
      { header: 'WORKLOAD', value: (s) => s.workload },
      { header: 'DRIFT', value: (s) => s.drift, color: (s) => driftColor(s.drift) },
      { header: 'ACTION', value: (s) => s.action },
      ...(steps.some((s) => s.outcome !== undefined)
        ? [
            {
              header: 'OUTCOME',
              value: (s: ReconcilePlanStep & Partial<ReconcileStepResult>) => s.outcome ?? '-',
              color: (s: ReconcilePlanStep & Partial<ReconcileStepResult>) => (s.outcome === 'failed' ? ('red' as const) : undefined),
            },
          ]
        : []),
      { header: 'REASON', value: (s) => (s.error !== undefined && s.error !== null ? `${s.reason}: ${s.error}` : s.reason) },
    ],
    { color: ctx.color, empty: 'no workloads' },
  );
}

const workloads: CommandDef = {
  noun: 'fleet',
  verb: 'workloads',
  summary: 'list the fleet inventory: desired and observed VMs, their drift, and the inventory_revision',
  args: [],
  flags: [],
  async run(ctx) {
    const inv = await ctx.api.fleetWorkloads({ signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(inv);
      return undefined;
    }
    ctx.out(workloadTable(ctx, inv.workloads));
    const drift = Object.entries(inv.drift_counts)
      .filter(([, n]) => n > 0)
      .map(([d, n]) => `${n} ${d}`)
      .join(', ');
    ctx.out(
      `inventory_revision ${inv.inventory_revision}${drift === '' ? '' : ` (${drift})`}${inv.sweep_error !== null ? ` ${paint(`sweep failed: ${inv.sweep_error}`, 'red', ctx.color)}` : ''}`,
    );
    return undefined;
  },
};

const KEY: FlagSpec = {
  name: 'idempotency-key',
  type: 'string',
  value: 'KEY',
  description: 'retry-safe key (a retry with the same key replays the first answer)',
};

const reconcile: CommandDef = {
  noun: 'fleet',
  verb: 'reconcile',
  summary: 'converge the fleet to its desired set (create missing, start/stop mismatched, delete unmanaged sandboxd VMs)',
  details:
    'Example: sbx fleet workloads && sbx fleet reconcile --before-revision 42 --dry-run. A revision that is no longer current is refused (exit 3, fleet.stale_inventory_revision): preview again.',
  args: [],
  flags: [
    { name: 'before-revision', type: 'number', value: 'N', description: 'the inventory_revision you previewed (required)' },
    { name: 'dry-run', type: 'boolean', description: 'print the plan and act on nothing' },
    KEY,
    NO_WAIT,
  ],
  async run(ctx, { flags }) {
    const before = int(flags, 'before-revision', 0);
    if (before === undefined) throw new UsageError('--before-revision N is required (sbx fleet workloads prints the current one)');
    const key = str(flags, 'idempotency-key');
    const answer = await ctx.api.fleetReconcile(
      { before_revision: before, dry_run: bool(flags, 'dry-run') },
      { ...(key !== undefined ? { idempotencyKey: key } : {}), signal: ctx.signal },
    );
    if ('plan' in answer) {
      const dry: FleetReconcileDryRun = answer;
      if (ctx.json) ctx.printJson(dry);
      else ctx.out(`${stepTable(ctx, dry.plan.steps)}\ndry run at inventory_revision ${dry.before_revision}: nothing was done`);
      return undefined;
    }
    const op = await followAccepted(ctx, answer, bool(flags, 'no-wait'));
    if (op !== null && !ctx.json && op.status === 'completed') {
      const steps = (op.result?.['steps'] ?? []) as ReconcileStepResult[];
      ctx.out(`${stepTable(ctx, steps)}\nreconciled: inventory_revision ${before} → ${String(op.result?.['after_revision'])}`);
    }
    return undefined;
  },
};

export const FLEET_COMMANDS: readonly CommandDef[] = [workloads, reconcile];
