/**
 * `sbx session create|list|attach|kill` (spec 4.2): interactive terminals on an agent.
 * attach (attach.ts) is a raw terminal over pty-ws.v1; observer unless --control.
 */
import type { SessionEntry, SessionSignal } from '../../client/types.js';
import { ApiError } from '../../client/api-error.js';
import { bool, str, UsageError } from '../args.js';
import { attachTerminal, DETACH_KEY_NAME } from '../attach.js';
import { relativeTime, renderFields, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const AGENT = { name: 'AGENT', required: true, description: 'agent id' } as const;
const SESSION = { name: 'SESSION', required: true, description: 'session id or name' } as const;
const SIGNALS: readonly SessionSignal[] = ['TERM', 'KILL', 'INT', 'HUP'];

/** Finds a session of an agent by id or name (404 session.not_found when neither matches). */
export async function findSession(ctx: CommandContext, agentId: string, key: string): Promise<SessionEntry> {
  const list = await ctx.api.listSessions(agentId, { signal: ctx.signal });
  const found = list.sessions.find((s) => s.session_id === key) ?? list.sessions.find((s) => s.session_name === key);
  if (found === undefined) throw new ApiError(404, 'session.not_found', `no session ${JSON.stringify(key)} on agent ${agentId}`);
  return found;
}

const create: CommandDef = {
  noun: 'session',
  verb: 'create',
  summary: 'start a terminal session on an agent (tmux)',
  args: [AGENT],
  flags: [
    { name: 'command', type: 'string', value: 'CMD', description: 'what to run (default bash)' },
    { name: 'name', type: 'string', value: 'NAME', description: 'session name (default terminal-<hex>)' },
    { name: 'idempotency-key', type: 'string', value: 'KEY', description: 'retrying with the same key returns the same session' },
    { name: 'attach', type: 'boolean', description: 'attach to it right away (as controller)' },
  ],
  async run(ctx, { args, flags }) {
    const agent = args[0] as string;
    const command = str(flags, 'command');
    const name = str(flags, 'name');
    const key = str(flags, 'idempotency-key');
    const res = await ctx.api.createSession(
      agent,
      { ...(command !== undefined ? { command } : {}), ...(name !== undefined ? { session_name: name } : {}) },
      {
        signal: ctx.signal,
        ...(key !== undefined ? { idempotencyKey: key } : {}),
      },
    );
    if (bool(flags, 'attach')) {
      if (!ctx.json) ctx.err(`session ${res.session_id} (${res.session_name}) created`);
      return attachTerminal(ctx, res.session_id, true, async () =>
        (await ctx.api.listSessions(agent, { signal: ctx.signal })).sessions.some((s) => s.session_id === res.session_id),
      );
    }
    if (ctx.json) ctx.printJson(res);
    else {
      ctx.out(
        renderFields([
          ['session', res.session_id],
          ['name', res.session_name],
          ['command id', res.command_id],
          ['backend', `${res.session_backend}/${res.session_class}`],
          ['attach', `sbx session attach ${agent} ${res.session_id} [--control]`],
        ]),
      );
    }
    return undefined;
  },
};

const list: CommandDef = {
  noun: 'session',
  verb: 'list',
  summary: "list an agent's sessions",
  args: [AGENT],
  flags: [],
  async run(ctx, { args }) {
    const res = await ctx.api.listSessions(args[0] as string, { signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(res);
      return undefined;
    }
    const now = ctx.now();
    ctx.out(
      renderTable(
        res.sessions,
        [
          { header: 'SESSION', value: (s) => s.session_id },
          { header: 'NAME', value: (s) => s.session_name },
          { header: 'STATE', value: (s) => s.state ?? '-', color: (s) => stateColor(s.state ?? '') },
          { header: 'COMMAND', value: (s) => (s.command.length > 40 ? `${s.command.slice(0, 39)}…` : s.command) },
          { header: 'CREATED', value: (s) => relativeTime(s.created_at_secs * 1000, now) },
          { header: 'CONTROLLER', value: (s) => (s.membership.controllers.length > 0 ? 'held' : 'free') },
          { header: 'OBSERVERS', value: (s) => String(s.membership.observers.length), right: true },
        ],
        { color: ctx.color, empty: `No sessions on ${args[0] as string}. Start one with: sbx session create ${args[0] as string}` },
      ),
    );
    return undefined;
  },
};

const attach: CommandDef = {
  noun: 'session',
  verb: 'attach',
  summary: `attach this terminal to a session (observer unless --control; detach with ${DETACH_KEY_NAME})`,
  args: [AGENT, SESSION],
  flags: [{ name: 'control', type: 'boolean', description: 'ask for the controller role (granted only while no one else holds it)' }],
  details:
    `Observers see the output and cannot type or resize. With --control the server grants the single\n` +
    `controller lease if it is free, else attaches you as observer and says so. Your terminal is in raw\n` +
    `mode while attached: ${DETACH_KEY_NAME} (Ctrl and the right square bracket) detaches and restores it;\n` +
    `the session keeps running. A dropped connection (server restart, network) reconnects and resumes\n` +
    `the output for up to a minute. Exit 0 on detach or when the session ends, 3 when the session does\n` +
    `not exist, 5 when the connection is lost for good.`,
  async run(ctx, { args, flags }) {
    if (ctx.json) throw new UsageError('session attach is interactive and has no --json output');
    const agent = args[0] as string;
    const session = await findSession(ctx, agent, args[1] as string);
    const exists = async (): Promise<boolean> => {
      try {
        await findSession(ctx, agent, session.session_id);
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return false;
        throw err;
      }
    };
    return attachTerminal(ctx, session.session_id, bool(flags, 'control'), exists);
  },
};

const kill: CommandDef = {
  noun: 'session',
  verb: 'kill',
  summary: 'end a session',
  args: [AGENT, SESSION],
  flags: [{ name: 'signal', type: 'string', value: 'SIG', description: 'TERM (default), KILL, INT or HUP' }],
  async run(ctx, { args, flags }) {
    const raw = (str(flags, 'signal') ?? 'TERM').toUpperCase().replace(/^SIG/, '');
    if (!(SIGNALS as readonly string[]).includes(raw)) throw new UsageError('--signal must be TERM, KILL, INT or HUP');
    const agent = args[0] as string;
    const session = await findSession(ctx, agent, args[1] as string);
    const res = await ctx.api.killSession(agent, session.session_id, raw as SessionSignal, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(res);
    else ctx.out(res.killed ? `session ${session.session_id} killed (SIG${raw})` : `session ${session.session_id} was not killed`);
    return undefined;
  },
};

export const SESSION_COMMANDS: readonly CommandDef[] = [create, list, attach, kill];
