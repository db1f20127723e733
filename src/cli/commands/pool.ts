/**
 * `sbx checkpoint create|restore|list` and `sbx pool create|list|handoff` (spec 4.10, README
 * "Checkpoints and warm pools"). Every mutating command waits for its admin operation with a
 * progress display unless --no-wait (a failed operation exits 6), and takes --idempotency-key
 * (spec 4.11: a retry with the same key replays the original answer instead of acting twice).
 */
import type { AdminAccepted, Checkpoint, WarmPool } from '../../client/types.js';
import { bool, int, str, UsageError, type FlagSpec, type FlagValues } from '../args.js';
import { paint, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import { followAccepted } from '../progress.js';
import { NO_WAIT, type CommandDef } from './command.js';

const KEY: FlagSpec = {
  name: 'idempotency-key',
  type: 'string',
  value: 'KEY',
  description: 'retry-safe key (a retry with the same key replays the first answer)',
};

const keyOf = (flags: FlagValues): { idempotencyKey?: string } => {
  const k = str(flags, 'idempotency-key');
  return k === undefined ? {} : { idempotencyKey: k };
};

/** Waits for (or prints) the operation, then prints what it made. */
async function finish(
  ctx: CommandContext,
  accepted: AdminAccepted,
  flags: FlagValues,
  done: (result: Record<string, unknown>) => string,
): Promise<void> {
  const op = await followAccepted(ctx, accepted, bool(flags, 'no-wait'));
  if (op !== null && !ctx.json) ctx.out(done(op.result ?? {}));
}

function checkpointTable(ctx: CommandContext, list: readonly Checkpoint[]): string {
  return renderTable(
    list,
    [
      { header: 'CHECKPOINT', value: (c) => c.checkpoint_id },
      { header: 'VM', value: (c) => c.vm },
      { header: 'STATUS', value: (c) => c.status, color: (c) => stateColor(c.status) },
      { header: 'POOL', value: (c) => c.pool ?? '-' },
      { header: 'CREATED', value: (c) => c.created_at },
    ],
    { color: ctx.color, empty: 'no checkpoints' },
  );
}

function poolTable(ctx: CommandContext, list: readonly WarmPool[]): string {
  return renderTable(
    list,
    [
      { header: 'POOL', value: (p) => p.pool },
      { header: 'READY', value: (p) => String(p.ready_slots), right: true },
      { header: 'TARGET', value: (p) => String(p.target_size), right: true },
      { header: 'RESTORING', value: (p) => String(p.restoring), right: true },
      { header: 'HANDOFFS', value: (p) => String(p.handoffs_total), right: true },
      {
        header: 'REFILL',
        value: (p) => (p.refill.running ? 'running' : p.refill.last_error !== null ? `failing (${p.refill.failures_total})` : 'idle'),
      },
    ],
    { color: ctx.color, empty: 'no warm pools' },
  );
}

const checkpointCreate: CommandDef = {
  noun: 'checkpoint',
  verb: 'create',
  summary: 'save a deferred-enrollment VM into a pre-enrollment checkpoint (the VM stops; the image holds it)',
  details: 'Example: sbx vm create agent-base --deferred-enrollment && sbx checkpoint create agent-base base-1',
  args: [
    { name: 'VM', required: true, description: 'a running VM created with --deferred-enrollment' },
    { name: 'ID', required: true, description: 'checkpoint id ([a-z0-9-], at most 63)' },
  ],
  flags: [KEY, NO_WAIT],
  async run(ctx, { args, flags }) {
    const accepted = await ctx.api.createCheckpoint(
      { vm: args[0] as string, checkpoint_id: args[1] as string, pre_enrollment: true },
      { ...keyOf(flags), signal: ctx.signal },
    );
    await finish(ctx, accepted, flags, () => `checkpoint ${args[1] as string} of ${args[0] as string} is ready`);
    return undefined;
  },
};

const checkpointRestore: CommandDef = {
  noun: 'checkpoint',
  verb: 'restore',
  summary: 'restore a checkpoint with a fresh identity; waits until its agent enrolled and is Ready',
  args: [{ name: 'ID', required: true, description: 'checkpoint id' }],
  flags: [KEY, NO_WAIT],
  async run(ctx, { args, flags }) {
    const accepted = await ctx.api.restoreCheckpoint(args[0] as string, {}, { ...keyOf(flags), signal: ctx.signal });
    await finish(ctx, accepted, flags, (r) => {
      const vm = (r['vm'] ?? {}) as { name?: string };
      return `VM ${vm.name ?? '?'} restored from ${args[0] as string}: instance ${String(r['instance_id'])}, agent ${paint('Ready', stateColor('Ready'), ctx.color)}`;
    });
    return undefined;
  },
};

const checkpointList: CommandDef = {
  noun: 'checkpoint',
  verb: 'list',
  summary: 'list checkpoints',
  args: [],
  flags: [],
  async run(ctx) {
    const { checkpoints } = await ctx.api.listCheckpoints({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(checkpoints);
    else ctx.out(checkpointTable(ctx, checkpoints));
    return undefined;
  },
};

const poolCreate: CommandDef = {
  noun: 'pool',
  verb: 'create',
  summary: 'make a warm pool of ready checkpoints (each one slot)',
  details: 'Example: sbx pool create fast base-1,base-2,base-3 --target-size 3',
  args: [
    { name: 'POOL', required: true, description: 'pool name ([a-z0-9-], at most 40)' },
    { name: 'CHECKPOINTS', required: true, description: 'comma-separated ready checkpoint ids' },
  ],
  flags: [
    {
      name: 'target-size',
      type: 'number',
      value: 'N',
      description: 'slots refill keeps (default: the number of checkpoints; 0 = no refill)',
    },
    KEY,
    NO_WAIT,
  ],
  async run(ctx, { args, flags }) {
    const ids = (args[1] as string)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    if (ids.length === 0) throw new UsageError('name at least one checkpoint', 'usage: sbx pool create POOL ID[,ID...]');
    const target = int(flags, 'target-size', 0, 100);
    const accepted = await ctx.api.createWarmPool(
      { pool: args[0] as string, checkpoint_ids: ids, ...(target !== undefined && { target_size: target }) },
      { ...keyOf(flags), signal: ctx.signal },
    );
    await finish(ctx, accepted, flags, () => `warm pool ${args[0] as string}: ${ids.length} slot(s)`);
    return undefined;
  },
};

const poolList: CommandDef = {
  noun: 'pool',
  verb: 'list',
  summary: 'list warm pools with their ready slots',
  args: [],
  flags: [],
  async run(ctx) {
    const { pools } = await ctx.api.listWarmPools({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(pools);
    else ctx.out(poolTable(ctx, pools));
    return undefined;
  },
};

const poolHandoff: CommandDef = {
  noun: 'pool',
  verb: 'handoff',
  summary: 'take one VM from a warm pool; waits until its agent enrolled and is Ready',
  args: [{ name: 'POOL', required: true, description: 'pool name' }],
  flags: [KEY, NO_WAIT],
  async run(ctx, { args, flags }) {
    const accepted = await ctx.api.handoff(args[0] as string, { ...keyOf(flags), signal: ctx.signal });
    await finish(ctx, accepted, flags, (r) => {
      const vm = (r['vm'] ?? {}) as { name?: string };
      return `VM ${vm.name ?? '?'} handed off from ${args[0] as string} (checkpoint ${String(r['checkpoint_id'])}, instance ${String(r['instance_id'])})`;
    });
    return undefined;
  },
};

export const CHECKPOINT_COMMANDS: readonly CommandDef[] = [checkpointCreate, checkpointRestore, checkpointList];
export const POOL_COMMANDS: readonly CommandDef[] = [poolCreate, poolList, poolHandoff];
