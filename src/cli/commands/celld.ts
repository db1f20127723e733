/**
 * `sbx celld status|validate|preflight|diagnose|plan-upgrade|cell|command|outcome|reconcile`
 * (spec 4.13, README "Celld"). Documents are JSON files (`-f FILE`, `-` for stdin). `command`
 * waits for the ledger entry to finish unless --no-wait; a lost answer is resolved with
 * `sbx celld outcome CELL OPERATION_ID` (exit 0 with the entry, 3 when the command was never
 * accepted: sending it again is safe). A failed command exits 6.
 */
import { readFile } from 'node:fs/promises';
import type { CellCommandDocument, CellCommandRecord, CheckResult } from '../../client/types.js';
import { bool, int, str, UsageError, type FlagSpec, type FlagValues } from '../args.js';
import { OutcomeFailedError } from '../exit-codes.js';
import { paint, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import { NO_WAIT, type CommandDef } from './command.js';

const FILE: FlagSpec = { name: 'file', short: 'f', type: 'string', value: 'FILE', description: "JSON command document, '-' for stdin" };
const POLL_MS = 300;

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

async function documentOf(ctx: CommandContext, flags: FlagValues, required: boolean): Promise<unknown> {
  const file = str(flags, 'file');
  if (file === undefined) {
    if (required) throw new UsageError('this command needs -f FILE (or -f - for stdin)', 'usage: sbx celld validate -f command.json');
    return undefined;
  }
  const text = file === '-' ? await readAll(ctx.io.stdin) : await readFile(file, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${file === '-' ? 'stdin' : file} is not JSON: ${(err as Error).message}`);
  }
}

function checksTable(ctx: CommandContext, checks: readonly CheckResult[]): string {
  return renderTable(
    checks,
    [
      { header: 'CHECK', value: (c) => c.name },
      { header: 'STATUS', value: (c) => c.status, color: (c) => (c.status === 'fail' ? 'red' : c.status === 'warn' ? 'yellow' : 'green') },
      { header: 'DETAIL', value: (c) => c.detail },
    ],
    { color: ctx.color, empty: 'no checks' },
  );
}

function recordLine(ctx: CommandContext, r: CellCommandRecord): string {
  const err = r.error === null ? '' : `: ${r.error.code} ${r.error.message}`;
  return `${r.action} ${r.operation_id} in cell ${r.cell_id}: ${paint(r.status, stateColor(r.status), ctx.color)}${err}`;
}

const finished = (r: CellCommandRecord): boolean => r.status === 'succeeded' || r.status === 'failed' || r.status === 'unknown';

/** Polls the ledger entry until it is finished; throws OutcomeFailedError when it failed. */
async function follow(ctx: CommandContext, cell: string, first: CellCommandRecord): Promise<void> {
  let r = first;
  while (!finished(r)) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (ctx.signal.aborted) throw new UsageError('interrupted');
    r = await ctx.api.celldCommandRecord(cell, r.operation_id, { signal: ctx.signal });
  }
  if (ctx.json) ctx.printJson(r);
  else ctx.out(recordLine(ctx, r));
  if (r.status !== 'succeeded')
    throw new OutcomeFailedError(r.error?.code ?? 'celld.unknown_outcome', recordLine({ ...ctx, color: false }, r));
}

const status: CommandDef = {
  noun: 'celld',
  verb: 'status',
  summary: 'readiness of Celld: enabled, cell, backend, which commands are available, versions',
  args: [],
  flags: [],
  async run(ctx) {
    const s = await ctx.api.celldStatus({ signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(s);
      return undefined;
    }
    const avail = Object.entries(s.commands)
      .filter(([, on]) => on)
      .map(([c]) => c)
      .join(', ');
    ctx.out(
      [
        `readiness   ${paint(s.readiness, s.readiness === 'secure' || s.readiness === 'ready' ? 'green' : 'yellow', ctx.color)}${s.reason === null ? '' : ` (${s.reason_code ?? ''}: ${s.reason})`}`,
        `cell        ${s.cell_id ?? '-'} (${s.backend ?? 'no backend'})`,
        `commands    ${avail}`,
        `hypervisor  ${s.hypervisor.status}, ${s.hypervisor.hosts} host(s): ${s.hypervisor.providers
          .map(
            (p) =>
              `${p.provider}[${Object.entries(p.capabilities)
                .filter(([, on]) => on)
                .map(([c]) => c)
                .join(',')}]`,
          )
          .join(' ')}`,
        `fleet       ${s.fleet.linked ? `revision ${s.fleet.inventory_revision ?? '?'}` : 'not linked'}`,
        `versions    sandboxd ${s.versions.sandboxd}, ${s.versions.protocol}`,
      ].join('\n'),
    );
    return undefined;
  },
};

const validate: CommandDef = {
  noun: 'celld',
  verb: 'validate',
  summary: 'check a cell command document (changes nothing); exit 2 when invalid',
  args: [],
  flags: [FILE],
  async run(ctx, { flags }) {
    const r = await ctx.api.celldValidate(await documentOf(ctx, flags, true), { signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else if (r.valid) ctx.out(`valid; request_hash ${r.request_hash ?? ''}`);
    else ctx.out(r.problems.map((p) => `${p.path || '/'}: ${p.message}`).join('\n'));
    return r.valid ? undefined : 2;
  },
};

const preflight: CommandDef = {
  noun: 'celld',
  verb: 'preflight',
  summary: 'is the cell ready (hypervisor, agent listener, images, capacity, the document)? changes nothing; exit 1 on a failed check',
  args: [],
  flags: [{ ...FILE, description: "optional JSON command document to check against the cell, '-' for stdin" }],
  async run(ctx, { flags }) {
    const doc = (await documentOf(ctx, flags, false)) as CellCommandDocument | undefined;
    const r = await ctx.api.celldPreflight(doc, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else ctx.out(checksTable(ctx, r.checks));
    return r.ok ? undefined : 1;
  },
};

const diagnose: CommandDef = {
  noun: 'celld',
  verb: 'diagnose',
  summary: 'VM/agent mismatches of the cell (changes nothing); exit 1 when there are findings',
  args: [],
  flags: [],
  async run(ctx) {
    const r = await ctx.api.celldDiagnose({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else
      ctx.out(
        renderTable(
          r.findings,
          [
            { header: 'VM', value: (f) => f.vm },
            { header: 'FINDING', value: (f) => f.kind },
            { header: 'DETAIL', value: (f) => f.detail },
          ],
          { color: ctx.color, empty: `cell ${r.cell_id}: ${r.vms} VM(s), ${r.agents} agent(s), no findings` },
        ),
      );
    return r.findings.length === 0 ? undefined : 1;
  },
};

const planUpgrade: CommandDef = {
  noun: 'celld',
  verb: 'plan-upgrade',
  summary: 'what moving the cell to VERSION takes (changes nothing); exit 1 when not qualified',
  args: [{ name: 'VERSION', required: true, description: 'target sandboxd version, e.g. 0.2.0' }],
  flags: [],
  async run(ctx, { args }) {
    const p = await ctx.api.celldPlanUpgrade(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(p);
    else {
      ctx.out(`${p.from} → ${p.to}: ${p.kind}${p.reason === null ? '' : ` (${p.reason})`}`);
      p.steps.forEach((s, i) => ctx.out(`  ${i + 1}. ${s}`));
    }
    return p.qualified ? undefined : 1;
  },
};

const cell: CommandDef = {
  noun: 'celld',
  verb: 'cell',
  summary: "the cell's VMs, their agents, its inventory revision and command counts",
  args: [{ name: 'CELL', required: true, description: 'cell id (SVC_CELLD_CELL_ID of the server)' }],
  flags: [],
  async run(ctx, { args }) {
    const c = await ctx.api.celldCell(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(c);
    else
      ctx.out(
        renderTable(
          c.vms,
          [
            { header: 'VM', value: (v) => v.name },
            { header: 'STATE', value: (v) => v.state, color: (v) => stateColor(v.state) },
            { header: 'AGENT', value: (v) => v.agent ?? '-' },
          ],
          { color: ctx.color, empty: `cell ${c.cell_id}: no VMs` },
        ),
      );
    return undefined;
  },
};

const command: CommandDef = {
  noun: 'celld',
  verb: 'command',
  summary: 'send a cell command document (start, stop, destroy, reconcile); waits for its outcome unless --no-wait',
  details:
    "The document's operation_id is its idempotency key: sending the same document again answers the stored outcome; another document with the same id is refused (409 celld.operation_conflict).",
  args: [{ name: 'CELL', required: true, description: 'cell id' }],
  flags: [FILE, NO_WAIT],
  async run(ctx, { args, flags }) {
    const doc = (await documentOf(ctx, flags, true)) as CellCommandDocument;
    const cellId = args[0] as string;
    const r = await ctx.api.celldCommand(cellId, doc, { signal: ctx.signal });
    if (r.replayed && !ctx.json) ctx.err(`sbx: ${r.command.operation_id} was accepted before: this is its stored answer`);
    if (bool(flags, 'no-wait')) {
      if (ctx.json) ctx.printJson(r);
      else ctx.out(recordLine(ctx, r.command));
      return undefined;
    }
    await follow(ctx, cellId, r.command);
    return undefined;
  },
};

const outcome: CommandDef = {
  noun: 'celld',
  verb: 'outcome',
  summary: "a command's ledger entry: did it take effect? (exit 3 when it was never accepted: sending it is safe)",
  args: [
    { name: 'CELL', required: true, description: 'cell id' },
    { name: 'OPERATION_ID', required: true, description: "the command's operation_id" },
  ],
  flags: [],
  async run(ctx, { args }) {
    const r = await ctx.api.celldCommandRecord(args[0] as string, args[1] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else ctx.out(recordLine(ctx, r));
    return undefined;
  },
};

const reconcile: CommandDef = {
  noun: 'celld',
  verb: 'reconcile',
  summary: 'a generation-only reconcile of the cell: runs once, is never replayed (read it with sbx celld outcome)',
  args: [{ name: 'CELL', required: true, description: 'cell id' }],
  flags: [
    { name: 'generation', type: 'number', value: 'N', description: 'the previewed inventory revision (required)' },
    { name: 'operation-id', type: 'string', value: 'ID', description: 'client operation id (default: generated)' },
    NO_WAIT,
  ],
  async run(ctx, { args, flags }) {
    const generation = int(flags, 'generation', 0, Number.MAX_SAFE_INTEGER);
    if (generation === undefined) throw new UsageError('reconcile needs --generation N', 'usage: sbx celld reconcile CELL --generation N');
    const id = str(flags, 'operation-id') ?? `sbx-reconcile-${ctx.now().toString(36)}`;
    const cellId = args[0] as string;
    const r = await ctx.api.celldReconcile(cellId, id, generation, { signal: ctx.signal });
    if (bool(flags, 'no-wait')) {
      if (ctx.json) ctx.printJson(r);
      else ctx.out(recordLine(ctx, r.command));
      return undefined;
    }
    await follow(ctx, cellId, r.command);
    return undefined;
  },
};

export const CELLD_COMMANDS: readonly CommandDef[] = [
  status,
  validate,
  preflight,
  diagnose,
  planUpgrade,
  cell,
  command,
  outcome,
  reconcile,
];
