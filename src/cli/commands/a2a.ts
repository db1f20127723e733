/**
 * `sbx a2a output|artifacts|card` (README "A2A"): what an A2A task's command printed, its artifact
 * records, and an instance's AgentCard. The tasks themselves are made by A2A clients over the
 * pty-ws.v1 binding.
 */
import type { CommandDef } from './command.js';

const INSTANCE = { name: 'instance', required: true, description: 'the instance id (the agent behind /agents/{instance_id})' } as const;
const TASK = { name: 'task', required: true, description: 'the A2A task id' } as const;

const output: CommandDef = {
  noun: 'a2a',
  verb: 'output',
  summary: "an A2A task's output, byte for byte: stdout to stdout, stderr to stderr",
  args: [INSTANCE, TASK],
  flags: [],
  async run(ctx, { args }) {
    const list = await ctx.api.listA2aArtifacts(args[0] ?? '', args[1] ?? '', { signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(list);
      return undefined;
    }
    let truncated = false;
    for (const r of list.artifacts) {
      if (r.artifact.kind === 'output_truncated') truncated = true;
      const bytes = Buffer.from(r.artifact.data_base64, 'base64');
      (r.artifact.stream === 'stderr' ? ctx.io.stderr : ctx.io.stdout).write(bytes);
    }
    if (truncated) ctx.err('sbx: the output was cut at the task output cap (README "A2A", Limits)');
    return undefined;
  },
};

const artifacts: CommandDef = {
  noun: 'a2a',
  verb: 'artifacts',
  summary: "an A2A task's artifact records (id, stream, bytes)",
  args: [INSTANCE, TASK],
  flags: [],
  async run(ctx, { args }) {
    const list = await ctx.api.listA2aArtifacts(args[0] ?? '', args[1] ?? '', { signal: ctx.signal });
    if (ctx.json) ctx.printJson(list);
    else if (list.artifacts.length === 0) ctx.out('No artifacts.');
    else
      for (const r of list.artifacts) {
        ctx.out(
          `${r.artifact_id}  ${r.artifact.stream}  ${Buffer.from(r.artifact.data_base64, 'base64').byteLength} B  ${r.artifact.kind}`,
        );
      }
    return undefined;
  },
};

const card: CommandDef = {
  noun: 'a2a',
  verb: 'card',
  summary: "an instance's A2A AgentCard (JSON)",
  args: [INSTANCE],
  flags: [],
  async run(ctx, { args }) {
    ctx.printJson(await ctx.api.a2aAgentCard(args[0] ?? '', { signal: ctx.signal }));
    return undefined;
  },
};

export const A2A_COMMANDS: readonly CommandDef[] = [output, artifacts, card];
