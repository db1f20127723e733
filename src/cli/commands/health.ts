/** `sbx health` (spec 4.1): the deep health check; exit 5 when the server is not ready. */
import { ExitCode } from '../exit-codes.js';
import { duration, paint, renderFields, stateColor } from '../format.js';
import type { CommandDef } from './command.js';

const health: CommandDef = {
  noun: 'health',
  verb: '',
  summary: 'check the server (exit 5 when unreachable or not ready)',
  args: [],
  flags: [],
  async run(ctx) {
    const deep = await ctx.api.deepHealth({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(deep);
    else {
      ctx.out(
        renderFields([
          ['server', ctx.settings.server],
          ['status', paint(deep.status, stateColor(deep.status), ctx.color)],
          ['ready', deep.ready ? 'yes' : 'no'],
          ['uptime', duration(deep.uptime_seconds)],
          ['agents', String(deep.agent_count)],
          ['active tasks', String(deep.active_tasks)],
          [
            'actors',
            `${deep.actors.mode}, ${deep.actors.shards} shard${deep.actors.shards === 1 ? '' : 's'}, ${deep.actors.restarts} restart${deep.actors.restarts === 1 ? '' : 's'}`,
          ],
          ['uWebSockets.js', deep.uws.native ? 'native' : `fallback (${deep.uws.detail})`],
          ...deep.degraded_reasons.map((r) => ['degraded', r] as const),
        ]),
      );
    }
    return deep.ready ? undefined : ExitCode.SERVER;
  },
};

export const HEALTH_COMMANDS: readonly CommandDef[] = [health];
