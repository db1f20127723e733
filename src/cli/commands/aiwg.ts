/**
 * `sbx aiwg status|reconnect` (spec 4.16): the aiwg bridge, i.e. the orchestration link
 * (README "Orchestration link and aiwg bridge"). reconnect against a standalone server fails with
 * aiwg.not_configured (409).
 */
import { paint, renderFields } from '../format.js';
import type { CommandDef } from './command.js';

const status: CommandDef = {
  noun: 'aiwg',
  verb: 'status',
  summary: 'show the aiwg bridge (the orchestration link): connected, sessions, last event',
  args: [],
  flags: [],
  async run(ctx) {
    const s = await ctx.api.aiwgStatus({ signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(s);
      return undefined;
    }
    ctx.out(
      renderFields([
        ['connected', paint(s.connected ? 'yes' : 'no', s.connected ? 'green' : s.configured ? 'red' : undefined, ctx.color)],
        ['state', s.state],
        ['endpoint', s.endpoint ?? '(not configured: ORCH_SERVE_ENDPOINT unset)'],
        ['sessions', String(s.session_count)],
        ['last event', s.last_event_secs < 0 ? 'none sent' : `${s.last_event_secs}s ago`],
        ['events sent', String(s.events_sent)],
        ['events dropped', String(s.events_dropped)],
        ['queued', String(s.queued)],
        ['connections', String(s.connections)],
      ]),
    );
    return undefined;
  },
};

const reconnect: CommandDef = {
  noun: 'aiwg',
  verb: 'reconnect',
  summary: 'make the orchestration link reconnect now (backoff reset)',
  args: [],
  flags: [],
  async run(ctx) {
    const r = await ctx.api.aiwgReconnect({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else ctx.out('reconnecting\n');
    return undefined;
  },
};

export const AIWG_COMMANDS: readonly CommandDef[] = [status, reconnect];
