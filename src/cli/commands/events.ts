/**
 * `sbx events list|tail` (spec 4.5). tail follows until Ctrl-C (exit 0), reconnecting and
 * resuming after the last event seen when the server restarts or the connection drops.
 */
import type { EventFilters, EventRecord } from '../../client/types.js';
import { int, str, type FlagSpec, type FlagValues } from '../args.js';
import { paint, sanitize } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const FILTER_FLAGS: readonly FlagSpec[] = [
  { name: 'type', type: 'string', value: 'TYPE', description: "event type, or a prefix ending in '*' (agent.*)" },
  { name: 'agent', type: 'string', value: 'ID', description: 'only this agent' },
  { name: 'vm', type: 'string', value: 'NAME', description: 'only this VM' },
  { name: 'since', type: 'number', value: 'ID', description: 'only events after this event id' },
];

function filters(flags: FlagValues): EventFilters {
  const f: EventFilters = {};
  const type = str(flags, 'type');
  if (type !== undefined) f.event_type = type;
  const agent = str(flags, 'agent');
  if (agent !== undefined) f.agent_id = agent;
  const vm = str(flags, 'vm');
  if (vm !== undefined) f.vm_name = vm;
  const since = int(flags, 'since', 0);
  if (since !== undefined) f.since = since;
  return f;
}

/** One human line: `12:00:01  #42  vm.started  vm=agent-a agent=a1  {details}`. */
export function eventLine(e: EventRecord, color: boolean): string {
  const t = Number.isFinite(Date.parse(e.timestamp)) ? new Date(e.timestamp).toISOString().slice(11, 19) : e.timestamp;
  const where = [e.vm_name !== '' ? `vm=${e.vm_name}` : '', e.agent_id !== '' ? `agent=${e.agent_id}` : '']
    .filter((s) => s !== '')
    .join(' ');
  const details = Object.keys(e.details).length > 0 ? JSON.stringify(e.details) : '';
  return sanitize(
    [paint(t, 'dim', color), paint(`#${e.id}`, 'dim', color), paint(e.event_type, 'cyan', color), where, details]
      .filter((s) => s !== '')
      .join('  '),
  );
}

function print(ctx: CommandContext, e: EventRecord): void {
  if (ctx.json) ctx.printJson(e, true);
  else ctx.out(eventLine(e, ctx.color));
}

const list: CommandDef = {
  noun: 'events',
  verb: 'list',
  summary: 'recent events, oldest first',
  args: [],
  flags: [...FILTER_FLAGS, { name: 'limit', type: 'number', value: 'N', description: 'newest N matches (1-5000, default 100)' }],
  async run(ctx, { flags }) {
    const limit = int(flags, 'limit', 1, 5000);
    const page = await ctx.api.listEvents({ ...filters(flags), ...(limit !== undefined ? { limit } : {}) }, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(page);
    else if (page.events.length === 0) ctx.out('No events.');
    else for (const e of page.events) print(ctx, e);
    return undefined;
  },
};

const tail: CommandDef = {
  noun: 'events',
  verb: 'tail',
  summary: 'follow events live until Ctrl-C (--json: one object per line)',
  args: [],
  flags: FILTER_FLAGS,
  async run(ctx, { flags }) {
    const stream = ctx.api.tailEvents(filters(flags), {
      signal: ctx.signal,
      onReconnect: ({ delayMs, error }) => {
        ctx.err(
          `sbx: ${error !== null ? `${error.code}: ${error.message}; ` : 'stream ended; '}reconnecting in ${(delayMs / 1000).toFixed(1)}s`,
        );
      },
    });
    for await (const e of stream) print(ctx, e);
    return undefined;
  },
};

export const EVENTS_COMMANDS: readonly CommandDef[] = [list, tail];
