/**
 * `sbx executor register|list|get|delete` and `sbx mission dispatch|list|get` (spec 4.16, README
 * "Missions and dispatch"). The dispatch token is read from SBX_EXECUTOR_TOKEN, never from a
 * flag (a flag would land in shell history and process listings).
 */
import { randomUUID } from 'node:crypto';
import type { Executor, Mission } from '../../wire/missions.js';
import { bool, int, str, UsageError, type FlagSpec } from '../args.js';
import { renderFields, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const list = (v: string | undefined): string[] =>
  v === undefined
    ? []
    : v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');

function executorFields(e: Executor): string {
  return renderFields([
    ['executor', e.executor_id],
    ['agent', e.agent_id],
    ['name', e.name],
    ['capabilities', e.capabilities.length === 0 ? '-' : e.capabilities.join(',')],
    ['command', e.command === null ? '(SVC_MISSION_COMMAND)' : JSON.stringify(e.command)],
    ['created', `${e.created_at} by ${e.created_by}`],
    ['last dispatch', e.last_dispatch_at ?? '-'],
  ]);
}

function missionFields(m: Mission): string {
  return renderFields([
    ['mission', m.mission_id],
    ['status', m.status],
    ['agent', m.agent_id],
    ['executor', m.executor_id],
    ['session', m.session_id],
    ['command_id', m.command_id],
    ['objective', m.objective],
    ['created', m.created_at],
    ['started', m.started_at ?? '-'],
    ['finished', m.finished_at ?? '-'],
    ['exit code', m.exit_code === null ? '-' : String(m.exit_code)],
    ['reason', m.reason === null ? '-' : `${m.reason}: ${m.error ?? ''}`],
  ]);
}

const executorRegister: CommandDef = {
  noun: 'executor',
  verb: 'register',
  summary: 'register a mission executor for an agent; prints its dispatch token once (stored hashed, never shown again)',
  details: 'Example: sbx executor register agent-dev --capabilities shell --command \'["sh","-c","run-mission"]\'',
  args: [{ name: 'AGENT', required: true, description: 'the agent whose missions it runs' }],
  flags: [
    { name: 'name', type: 'string', value: 'NAME', description: 'a name (default: the agent id)' },
    { name: 'capabilities', type: 'string', value: 'A,B', description: 'capabilities a dispatch filter may ask for' },
    { name: 'command', type: 'string', value: 'JSON', description: 'argv its missions run (JSON array; default SVC_MISSION_COMMAND)' },
  ],
  async run(ctx, { args, flags }) {
    const raw = str(flags, 'command');
    let command: string[] | undefined;
    if (raw !== undefined) {
      try {
        command = JSON.parse(raw) as string[];
      } catch {
        throw new UsageError('--command must be a JSON array of strings', 'e.g. --command \'["sh","-c","echo hi"]\'');
      }
    }
    const name = str(flags, 'name');
    const r = await ctx.api.registerExecutor(
      {
        agent_id: args[0] as string,
        ...(name !== undefined && { name }),
        capabilities: list(str(flags, 'capabilities')),
        ...(command !== undefined && { command }),
      },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(r);
    else {
      ctx.out(executorFields(r.executor));
      ctx.out(`token        ${r.token}`);
      ctx.out('The token is shown this once: give it to the orchestration server (Authorization: Bearer <token>).');
    }
    return undefined;
  },
};

const executorList: CommandDef = {
  noun: 'executor',
  verb: 'list',
  summary: 'list mission executors (never their tokens)',
  args: [],
  flags: [{ name: 'agent', type: 'string', value: 'AGENT', description: "only this agent's" }],
  async run(ctx, { flags }) {
    const agent = str(flags, 'agent');
    const { executors } = await ctx.api.listExecutors(agent === undefined ? {} : { agent_id: agent }, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(executors);
    else
      ctx.out(
        renderTable(
          executors,
          [
            { header: 'EXECUTOR', value: (e) => e.executor_id },
            { header: 'AGENT', value: (e) => e.agent_id },
            { header: 'NAME', value: (e) => e.name },
            { header: 'CAPABILITIES', value: (e) => (e.capabilities.length === 0 ? '-' : e.capabilities.join(',')) },
            { header: 'LAST DISPATCH', value: (e) => e.last_dispatch_at ?? '-' },
          ],
          { color: ctx.color, empty: 'no executors' },
        ),
      );
    return undefined;
  },
};

const executorGet: CommandDef = {
  noun: 'executor',
  verb: 'get',
  summary: 'show an executor',
  args: [{ name: 'ID', required: true, description: 'executor id (exe-…)' }],
  flags: [],
  async run(ctx, { args }) {
    const e = await ctx.api.getExecutor(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(e);
    else ctx.out(executorFields(e));
    return undefined;
  },
};

const executorDelete: CommandDef = {
  noun: 'executor',
  verb: 'delete',
  summary: 'delete an executor: its token stops working at once (its running missions go on)',
  args: [{ name: 'ID', required: true, description: 'executor id (exe-…)' }],
  flags: [],
  async run(ctx, { args }) {
    const r = await ctx.api.deleteExecutor(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else ctx.out(`executor ${r.executor_id} deleted`);
    return undefined;
  },
};

const LONG: FlagSpec = { name: 'long-running', type: 'boolean', description: 'no timeout (default: SVC_MISSION_TIMEOUT_SECONDS)' };

const missionDispatch: CommandDef = {
  noun: 'mission',
  verb: 'dispatch',
  summary: "dispatch a mission as an orchestration server would (token from SBX_EXECUTOR_TOKEN); runs on the token's executor's agent",
  details: 'Example: SBX_EXECUTOR_TOKEN=sbxe_… sbx mission dispatch "summarise the logs" --session orch-1',
  args: [{ name: 'OBJECTIVE', required: true, description: 'what the mission is to do' }],
  flags: [
    { name: 'session', type: 'string', value: 'ID', description: 'the orchestration session id of the path (default: cli)' },
    { name: 'mission-id', type: 'string', value: 'UUID', description: 'default: a new UUID (the same id again replays)' },
    { name: 'completion', type: 'string', value: 'TEXT', description: 'when the mission counts as done' },
    { name: 'agent', type: 'string', value: 'AGENT', description: 'executor_filter.agent_id' },
    LONG,
  ],
  async run(ctx, { args, flags }) {
    const token = ctx.io.env.SBX_EXECUTOR_TOKEN;
    if (token === undefined || token === '')
      throw new UsageError('SBX_EXECUTOR_TOKEN is not set', 'export the token `sbx executor register` printed');
    const agent = str(flags, 'agent');
    const completion = str(flags, 'completion');
    const r = await ctx.api.dispatchMission(
      str(flags, 'session') ?? 'cli',
      token,
      {
        mission_id: str(flags, 'mission-id') ?? randomUUID(),
        objective: args[0] as string,
        ...(completion !== undefined && { completion }),
        long_running: bool(flags, 'long-running'),
        executor_filter: agent === undefined ? {} : { agent_id: agent },
        metadata: {},
      },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(r);
    else ctx.out(`mission ${r.mission_id} ${r.status} to executor ${r.executor_id} (start ${r.estimated_start})`);
    return undefined;
  },
};

const missionList: CommandDef = {
  noun: 'mission',
  verb: 'list',
  summary: 'list dispatched missions, newest last',
  args: [],
  flags: [
    { name: 'agent', type: 'string', value: 'AGENT', description: "only this agent's" },
    { name: 'status', type: 'string', value: 'STATUS', description: 'assigned, running, completed or failed' },
    { name: 'limit', type: 'number', value: 'N', description: 'at most N (1-1000, default 100)' },
  ],
  async run(ctx, { flags }) {
    const agent = str(flags, 'agent');
    const status = str(flags, 'status');
    const limit = int(flags, 'limit', 1, 1000);
    const { missions } = await ctx.api.listMissions(
      { ...(agent !== undefined && { agent_id: agent }), ...(status !== undefined && { status }), ...(limit !== undefined && { limit }) },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(missions);
    else
      ctx.out(
        renderTable(
          missions,
          [
            { header: 'MISSION', value: (m) => m.mission_id },
            { header: 'STATUS', value: (m) => m.status, color: (m) => stateColor(m.status) },
            { header: 'AGENT', value: (m) => m.agent_id },
            { header: 'EXIT', value: (m) => (m.exit_code === null ? '-' : String(m.exit_code)), right: true },
            { header: 'REASON', value: (m) => m.reason ?? '-' },
            { header: 'CREATED', value: (m) => m.created_at },
          ],
          { color: ctx.color, empty: 'no missions' },
        ),
      );
    return undefined;
  },
};

const missionGet: CommandDef = {
  noun: 'mission',
  verb: 'get',
  summary: 'show a mission',
  args: [{ name: 'MISSION_ID', required: true, description: 'the mission id (a UUID)' }],
  flags: [],
  async run(ctx: CommandContext, { args }) {
    const m = await ctx.api.getMission(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(m);
    else ctx.out(missionFields(m));
    return undefined;
  },
};

export const EXECUTOR_COMMANDS: readonly CommandDef[] = [executorRegister, executorList, executorGet, executorDelete];
export const MISSION_COMMANDS: readonly CommandDef[] = [missionDispatch, missionList, missionGet];
