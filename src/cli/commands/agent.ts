/** `sbx agent list|reprovision` (spec 4.2). */
import type { Agent } from '../../client/types.js';
import { bytes, relativeTime, renderTable, stateColor } from '../format.js';
import type { CommandDef } from './command.js';

function memory(a: Agent): string {
  const m = a.metrics;
  if (m === undefined || m.memory_total_bytes <= 0) return '-';
  return `${bytes(m.memory_used_bytes)}/${bytes(m.memory_total_bytes)}`;
}

const list: CommandDef = {
  noun: 'agent',
  verb: 'list',
  summary: 'list connected and recently seen agents',
  args: [],
  flags: [],
  async run(ctx) {
    const res = await ctx.api.listAgents({ signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(res);
      return undefined;
    }
    const now = ctx.now();
    ctx.out(
      renderTable(
        res.agents,
        [
          { header: 'ID', value: (a) => a.id },
          { header: 'STATUS', value: (a) => a.status, color: (a) => stateColor(a.status) },
          { header: 'HOSTNAME', value: (a) => a.hostname || '-' },
          { header: 'IP', value: (a) => a.ip_address || '-' },
          { header: 'CPU', value: (a) => (a.metrics !== undefined ? `${a.metrics.cpu_percent.toFixed(0)}%` : '-'), right: true },
          { header: 'MEMORY', value: memory, right: true },
          { header: 'CONNECTED', value: (a) => relativeTime(a.connected_at, now) },
          { header: 'HEARTBEAT', value: (a) => relativeTime(a.last_heartbeat, now) },
        ],
        { color: ctx.color, empty: 'No agents connected.' },
      ),
    );
    return undefined;
  },
};

const reprovision: CommandDef = {
  noun: 'agent',
  verb: 'reprovision',
  summary: "queue a reprovision of an agent's VM",
  args: [{ name: 'AGENT', required: true, description: 'agent id' }],
  flags: [],
  async run(ctx, { args }) {
    const res = await ctx.api.reprovisionAgent(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(res);
    else ctx.out(`reprovision of ${args[0] as string} ${res.status}: operation ${res.operation_id}`);
    return undefined;
  },
};

export const AGENT_COMMANDS: readonly CommandDef[] = [list, reprovision];
