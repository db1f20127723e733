/**
 * Waiting for an operation with a progress display on stderr (stdout stays clean for --json):
 * on a terminal one line redrawn in place (`vm_create agent-a  running  45% [#####-----]`),
 * otherwise a plain line per change. Resolves with the final operation; a failed one throws
 * OutcomeFailedError (exit 6) after --json has printed it.
 */
import type { Operation } from '../client/types.js';
import { OutcomeFailedError } from './exit-codes.js';
import { paint, progressBar, stateColor } from './format.js';
import type { CommandContext } from './io.js';

/** One progress line (no newline). */
export function progressLine(op: Operation, color: boolean): string {
  const status = paint(op.status.padEnd(9), stateColor(op.status), color);
  return `${op.type} ${op.target}  ${status} ${String(op.progress_percent).padStart(3)}% ${progressBar(op.progress_percent)}`;
}

/** Polls the operation to the end, drawing progress; returns it (throws OutcomeFailedError when failed). */
export async function waitWithProgress(
  ctx: CommandContext,
  id: string,
  opts: { pollMs?: number; timeoutMs?: number } = {},
): Promise<Operation> {
  const tty = ctx.stderrTty;
  const color = tty && ctx.color;
  let drawn = false;
  let lastPlain = '';
  const draw = (op: Operation): void => {
    if (tty) {
      ctx.io.stderr.write(`\r\u001b[2K${progressLine(op, color)}`);
      drawn = true;
    } else {
      const line = `${op.type} ${op.target}: ${op.status} ${op.progress_percent}%`;
      if (line !== lastPlain) ctx.err(line);
      lastPlain = line;
    }
  };
  let op: Operation;
  try {
    op = await ctx.api.waitForOperation(id, {
      signal: ctx.signal,
      pollMs: opts.pollMs ?? 500,
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      onProgress: draw,
      onRetry: (err, attempt) => {
        if (tty && drawn) ctx.io.stderr.write('\n');
        drawn = false;
        ctx.err(`sbx: ${err.code}: ${err.message} (retry ${attempt})`);
      },
    });
  } catch (err) {
    if (ctx.signal.aborted) ctx.err(`sbx: stopped waiting; the operation goes on (sbx ops wait ${id})`);
    throw err;
  } finally {
    if (tty && drawn) ctx.io.stderr.write('\n');
  }
  if (op.status === 'failed') {
    if (ctx.json) ctx.printJson(op);
    throw new OutcomeFailedError(op.error_code ?? 'OPERATION_FAILED', `${op.type} ${op.target} failed: ${op.error ?? 'no reason given'}`);
  }
  return op;
}

/** After an accepted operation: wait (progress) or print it; returns the final operation or null. */
export async function followAccepted(
  ctx: CommandContext,
  accepted: { readonly operation: Operation; readonly warnings?: readonly string[] },
  noWait: boolean,
): Promise<Operation | null> {
  for (const w of accepted.warnings ?? []) ctx.err(`sbx: warning: ${w}`);
  if (noWait) {
    if (ctx.json) ctx.printJson(accepted);
    else
      ctx.out(
        `${accepted.operation.type} ${accepted.operation.target}: operation ${accepted.operation.id} ${accepted.operation.status} (sbx ops wait ${accepted.operation.id})`,
      );
    return null;
  }
  const op = await waitWithProgress(ctx, accepted.operation.id);
  if (ctx.json) ctx.printJson(op);
  return op;
}
