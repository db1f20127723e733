/**
 * `sbx task submit|list|get|logs|cancel|artifacts` (spec 4.6). A task that ends in any state but
 * `completed` makes `submit --wait`/`--follow` exit 6.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { TERMINAL_TASK_STATES as TERMINAL, type Task, type TaskSubmitRequest } from '../../client/types.js';
import { bool, int, str, UsageError } from '../args.js';
import { OutcomeFailedError } from '../exit-codes.js';
import { bytes, paint, relativeTime, renderFields, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const ID = { name: 'ID', required: true, description: 'task id (task-...)' } as const;

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

/** The POST body from a manifest file: YAML text as manifest_yaml; a .json file as manifest (or a full body). */
export function submissionOf(text: string, fileName: string): TaskSubmitRequest {
  if (!fileName.endsWith('.json')) return { manifest_yaml: text };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${fileName}: not valid JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError(`${fileName}: must hold a JSON object`);
  const o = parsed as Record<string, unknown>;
  if ('manifest' in o || 'manifest_yaml' in o) return o as TaskSubmitRequest;
  return { manifest: o };
}

function taskFields(ctx: CommandContext, t: Task): string {
  const now = ctx.now();
  return renderFields([
    ['id', t.id],
    ['name', t.name],
    ['state', paint(t.state, stateColor(t.state), ctx.color)],
    ['message', t.state_message],
    ['created', `${t.created_at} (${relativeTime(t.created_at, now)})`],
    ['started', t.started_at ?? '-'],
    ['changed', t.state_changed_at],
    ['vm', t.vm_name === null ? '-' : `${t.vm_name}${t.vm_ip !== null && t.vm_ip !== '' ? ` (${t.vm_ip})` : ''}`],
    ['exit code', t.exit_code === null ? '-' : String(t.exit_code)],
    ...(t.error !== null ? [['error', t.error] as const] : []),
    ['output', bytes(t.progress.output_bytes)],
    ['tool calls', `${t.progress.tool_calls}${t.progress.current_tool !== null ? ` (now: ${t.progress.current_tool})` : ''}`],
    ['last activity', relativeTime(t.progress.last_activity_at, now)],
  ]);
}

function finalOutcome(t: Task): void {
  if (t.state !== 'completed')
    throw new OutcomeFailedError(
      `task.${t.state}`,
      `task ${t.id} ${t.state}${t.error !== null ? `: ${t.error}` : t.state_message !== '' ? `: ${t.state_message}` : ''}`,
    );
}

/** How long a log without --follow may pause before the "log so far" is considered printed, ms. */
const kLogIdleMs = 1000;

function eventText(data: unknown): string | null {
  if (typeof data !== 'object' || data === null) return String(data);
  const o = data as Record<string, unknown>;
  // The coding agent's stream-json lines are in stdout already; the parsed copies are for programs (--json).
  if (o['kind'] === 'stream_json') return null;
  const kind = typeof o['kind'] === 'string' ? o['kind'] : 'event';
  if (kind === 'state' && typeof o['to'] === 'string')
    return `[state] ${o['to']}${typeof o['message'] === 'string' && o['message'] !== '' ? ` — ${o['message']}` : ''}`;
  const rest = Object.fromEntries(Object.entries(o).filter(([k]) => k !== 'kind'));
  return `[${kind}] ${typeof o['message'] === 'string' ? o['message'] : JSON.stringify(rest)}`;
}

/**
 * Streams the task's log to stdout/stderr. With `follow`: until the task finishes (reconnecting
 * after drops). Without: a finished task's whole log; a running task's log so far (until the
 * output pauses for a second).
 */
async function streamLogs(ctx: CommandContext, id: string, follow: boolean): Promise<void> {
  const local = new AbortController();
  const onAbort = (): void => local.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  let idle: NodeJS.Timeout | undefined;
  const arm = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => local.abort(), kLogIdleMs);
  };
  if (!follow && !TERMINAL.includes((await ctx.api.getTask(id, { signal: ctx.signal })).state)) arm();
  const idleMode = idle !== undefined;
  try {
    const stream = ctx.api.taskLogs(id, {
      signal: local.signal,
      reconnect: follow,
      onOpen: () => {
        if (idleMode) arm();
      },
      onReconnect: ({ delayMs, error }) =>
        ctx.err(
          `sbx: ${error !== null ? `${error.code}: ${error.message}; ` : ''}reconnecting to the log in ${(delayMs / 1000).toFixed(1)}s`,
        ),
    });
    for await (const ev of stream) {
      if (idleMode) arm();
      if (ctx.json) {
        ctx.printJson(ev, true);
        continue;
      }
      switch (ev.type) {
        case 'stdout':
          ctx.io.stdout.write(ev.text);
          break;
        case 'stderr':
          ctx.io.stderr.write(ev.text);
          break;
        case 'event': {
          const line = eventText(ev.data);
          if (line !== null) ctx.err(paint(line, 'dim', ctx.color));
          break;
        }
        case 'completed':
          ctx.err(paint(`[completed] exit code ${ev.exitCode ?? '-'}`, 'dim', ctx.color));
          break;
        case 'error':
          ctx.err(`sbx: task ended: ${ev.message}`);
          break;
      }
    }
  } finally {
    clearTimeout(idle);
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

const submit: CommandDef = {
  noun: 'task',
  verb: 'submit',
  summary: 'submit a task manifest (YAML, or JSON when the file ends in .json)',
  args: [],
  flags: [
    { name: 'file', short: 'f', type: 'string', value: 'FILE', description: "manifest file, '-' for stdin (required)" },
    { name: 'wait', type: 'boolean', description: 'wait until the task finishes (exit 6 unless completed)' },
    { name: 'follow', type: 'boolean', description: 'stream its logs until it finishes (exit 6 unless completed)' },
  ],
  async run(ctx, { flags }) {
    const file = str(flags, 'file');
    if (file === undefined)
      throw new UsageError('task submit needs -f FILE (or -f - for stdin)', 'usage: sbx task submit -f manifest.yaml [--wait] [--follow]');
    const text = file === '-' ? await readAll(ctx.io.stdin) : await readFile(file, 'utf8');
    const res = await ctx.api.submitTask(submissionOf(text, file), { signal: ctx.signal });
    if (!res.accepted) {
      if (ctx.json) ctx.printJson(res);
      throw new OutcomeFailedError('task.rejected', res.error ?? 'the server did not accept the task');
    }
    const follow = bool(flags, 'follow');
    if (!follow && !bool(flags, 'wait')) {
      if (ctx.json) ctx.printJson(res);
      else ctx.out(res.task_id);
      return undefined;
    }
    if (!ctx.json) ctx.err(`task ${res.task_id} submitted`);
    if (follow) await streamLogs(ctx, res.task_id, true);
    let last = '';
    const task = await ctx.api.waitForTask(res.task_id, {
      signal: ctx.signal,
      onProgress: (t) => {
        if (follow || ctx.json || t.state === last) return;
        last = t.state;
        ctx.err(`${t.id}: ${t.state}${t.state_message !== '' ? ` — ${t.state_message}` : ''}`);
      },
    });
    if (ctx.json) ctx.printJson(task);
    else if (!follow) ctx.out(taskFields(ctx, task));
    finalOutcome(task);
    return undefined;
  },
};

const list: CommandDef = {
  noun: 'task',
  verb: 'list',
  summary: 'list tasks, newest first',
  args: [],
  flags: [
    { name: 'state', type: 'string', value: 'STATES', description: 'comma-separated states (running,completed)' },
    { name: 'limit', type: 'number', value: 'N', description: 'page size (default 50)' },
    { name: 'offset', type: 'number', value: 'N', description: 'skip this many (default 0)' },
  ],
  async run(ctx, { flags }) {
    const state = str(flags, 'state');
    const limit = int(flags, 'limit', 1);
    const offset = int(flags, 'offset', 0);
    const res = await ctx.api.listTasks(
      { ...(state !== undefined ? { state } : {}), ...(limit !== undefined ? { limit } : {}), ...(offset !== undefined ? { offset } : {}) },
      { signal: ctx.signal },
    );
    if (ctx.json) {
      ctx.printJson(res);
      return undefined;
    }
    const now = ctx.now();
    ctx.out(
      renderTable(
        res.tasks,
        [
          { header: 'ID', value: (t) => t.id },
          { header: 'NAME', value: (t) => t.name },
          { header: 'STATE', value: (t) => t.state, color: (t) => stateColor(t.state) },
          { header: 'CREATED', value: (t) => relativeTime(t.created_at, now) },
          { header: 'VM', value: (t) => t.vm_name ?? '-' },
          { header: 'EXIT', value: (t) => (t.exit_code === null ? '-' : String(t.exit_code)), right: true },
        ],
        { color: ctx.color, empty: 'No tasks. Submit one with: sbx task submit -f manifest.yaml' },
      ),
    );
    if (res.total_count > res.tasks.length) ctx.out(`(${res.tasks.length} of ${res.total_count}; see --limit and --offset)`);
    return undefined;
  },
};

const get: CommandDef = {
  noun: 'task',
  verb: 'get',
  summary: 'show a task',
  args: [ID],
  flags: [],
  async run(ctx, { args }) {
    const t = await ctx.api.getTask(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(t);
    else ctx.out(taskFields(ctx, t));
    return undefined;
  },
};

const logs: CommandDef = {
  noun: 'task',
  verb: 'logs',
  summary: "print a task's log so far (--follow or -f: until it finishes)",
  args: [ID],
  flags: [{ name: 'follow', short: 'f', type: 'boolean', description: 'keep streaming until the task finishes (reconnects after drops)' }],
  async run(ctx, { args, flags }) {
    await streamLogs(ctx, args[0] as string, bool(flags, 'follow'));
    return undefined;
  },
};

const cancel: CommandDef = {
  noun: 'task',
  verb: 'cancel',
  summary: 'cancel a task (exit 4 when it already finished)',
  args: [ID],
  flags: [{ name: 'reason', type: 'string', value: 'TEXT', description: 'why (recorded with the task)' }],
  async run(ctx, { args, flags }) {
    const id = args[0] as string;
    const res = await ctx.api.cancelTask(id, str(flags, 'reason') ?? 'cancelled with sbx', { signal: ctx.signal });
    if (ctx.json) ctx.printJson(res);
    else ctx.out(res.success ? `task ${id} cancelled` : `task ${id} not cancelled: ${res.error ?? 'no reason given'}`);
    return res.success ? undefined : 1;
  },
};

const artifacts: CommandDef = {
  noun: 'task',
  verb: 'artifacts',
  summary: "list a task's artifacts, or download one",
  args: [ID],
  flags: [
    { name: 'download', type: 'string', value: 'NAME', description: 'download this artifact' },
    {
      name: 'output',
      short: 'o',
      type: 'string',
      value: 'FILE',
      description: "where to write it (default: its base name here; '-' for stdout)",
    },
  ],
  async run(ctx, { args, flags }) {
    const id = args[0] as string;
    const name = str(flags, 'download');
    if (name === undefined) {
      if (str(flags, 'output') !== undefined) throw new UsageError('-o needs --download NAME');
      const res = await ctx.api.listTaskArtifacts(id, { signal: ctx.signal });
      if (ctx.json) ctx.printJson(res);
      else
        ctx.out(
          renderTable(
            res.artifacts,
            [
              { header: 'NAME', value: (a) => a.name },
              { header: 'SIZE', value: (a) => bytes(a.size_bytes), right: true },
              { header: 'TYPE', value: (a) => a.content_type },
              { header: 'SHA256', value: (a) => (a.checksum === '' ? '-' : a.checksum.slice(0, 12)) },
            ],
            { color: ctx.color, empty: 'No artifacts.' },
          ),
        );
      return undefined;
    }
    const file = await ctx.api.downloadTaskArtifact(id, name, { signal: ctx.signal });
    const target = str(flags, 'output') ?? basename(file.fileName);
    if (target === '-') {
      ctx.io.stdout.write(file.bytes);
      return undefined;
    }
    await writeFile(target, file.bytes);
    if (ctx.json) ctx.printJson({ name, file: target, size_bytes: file.bytes.byteLength, content_type: file.contentType });
    else ctx.out(`${name} → ${target} (${bytes(file.bytes.byteLength)})`);
    return undefined;
  },
};

export const TASK_COMMANDS: readonly CommandDef[] = [submit, list, get, logs, cancel, artifacts];
