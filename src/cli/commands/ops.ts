/** `sbx ops get|wait` (spec 4.4). */
import type { Operation } from '../../client/types.js';
import { int } from '../args.js';
import { paint, renderFields, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import { waitWithProgress } from '../progress.js';
import type { CommandDef } from './command.js';

const ID = { name: 'ID', required: true, description: 'operation id (op-...)' } as const;

function show(ctx: CommandContext, op: Operation): void {
  ctx.out(
    renderFields([
      ['id', op.id],
      ['type', op.type],
      ['target', op.target],
      ['status', paint(op.status, stateColor(op.status), ctx.color)],
      ['progress', `${op.progress_percent}%`],
      ['created', op.created_at],
      ...(op.completed_at !== undefined ? [['completed', op.completed_at] as const] : []),
      ...(op.error !== undefined ? [['error', `${op.error_code !== undefined ? `${op.error_code}: ` : ''}${op.error}`] as const] : []),
      ...(op.result !== undefined ? [['result', JSON.stringify(op.result)] as const] : []),
    ]),
  );
}

const get: CommandDef = {
  noun: 'ops',
  verb: 'get',
  summary: 'show an operation',
  args: [ID],
  flags: [],
  async run(ctx, { args }) {
    const op = await ctx.api.getOperation(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(op);
    else show(ctx, op);
    return undefined;
  },
};

const wait: CommandDef = {
  noun: 'ops',
  verb: 'wait',
  summary: 'wait for an operation to finish (exit 6 when it failed)',
  args: [ID],
  flags: [{ name: 'timeout', type: 'number', value: 'SECONDS', description: 'give up after this long (exit 5)' }],
  async run(ctx, { args, flags }) {
    const timeoutS = int(flags, 'timeout', 1);
    const op = await waitWithProgress(ctx, args[0] as string, timeoutS !== undefined ? { timeoutMs: timeoutS * 1000 } : {});
    if (ctx.json) ctx.printJson(op);
    else show(ctx, op);
    return undefined;
  },
};

export const OPS_COMMANDS: readonly CommandDef[] = [get, wait];
