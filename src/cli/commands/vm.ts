/**
 * `sbx vm list|get|create|start|stop|destroy|restart|delete|deploy-agent` (spec 4.3).
 * create, restart and deploy-agent wait for their operation with a progress display unless
 * --no-wait; a failed operation exits 6.
 */
import { readFile } from 'node:fs/promises';
import type { Vm, VmCreateRequest } from '../../client/types.js';
import { bool, int, str, UsageError } from '../args.js';
import { bytes, duration, paint, renderFields, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import { followAccepted } from '../progress.js';
import { NO_WAIT, type CommandDef } from './command.js';

const NAME = { name: 'NAME', required: true, description: 'VM name (agent-...)' } as const;

function vmTable(ctx: CommandContext, vms: readonly Vm[]): string {
  return renderTable(
    vms,
    [
      { header: 'NAME', value: (v) => v.name },
      { header: 'STATE', value: (v) => v.state, color: (v) => stateColor(v.state) },
      { header: 'VCPUS', value: (v) => String(v.vcpus), right: true },
      { header: 'MEMORY', value: (v) => bytes(v.memory_mb * 1024 * 1024), right: true },
      { header: 'IP', value: (v) => (v.ip_address === '' ? '-' : v.ip_address) },
      { header: 'UPTIME', value: (v) => duration(v.uptime_seconds), right: true },
    ],
    { color: ctx.color, empty: 'No VMs. Create one with: sbx vm create agent-NAME' },
  );
}

const list: CommandDef = {
  noun: 'vm',
  verb: 'list',
  summary: 'list VMs',
  args: [],
  flags: [
    { name: 'state', type: 'string', value: 'STATE', description: 'running, stopped or all (default all)' },
    { name: 'prefix', type: 'string', value: 'PREFIX', description: "name prefix (default agent-; '*' for every domain)" },
  ],
  async run(ctx, { flags }) {
    const state = str(flags, 'state');
    if (state !== undefined && state !== 'running' && state !== 'stopped' && state !== 'all')
      throw new UsageError('--state must be running, stopped or all');
    const prefix = str(flags, 'prefix');
    const res = await ctx.api.listVms(
      { ...(state !== undefined ? { state } : {}), ...(prefix !== undefined ? { prefix } : {}) },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(res);
    else ctx.out(vmTable(ctx, res.vms));
    return undefined;
  },
};

const get: CommandDef = {
  noun: 'vm',
  verb: 'get',
  summary: 'show one VM and its agent',
  args: [NAME],
  flags: [],
  async run(ctx, { args }) {
    const vm = await ctx.api.getVm(args[0] as string, { signal: ctx.signal });
    if (ctx.json) {
      ctx.printJson(vm);
      return undefined;
    }
    const agent = vm.agent.connected
      ? `connected${vm.agent.hostname !== undefined ? ` (${vm.agent.hostname})` : ''}${vm.agent.connected_at !== undefined ? `, since ${new Date(vm.agent.connected_at).toISOString()}` : ''}`
      : 'not connected';
    ctx.out(
      renderFields([
        ['name', vm.name],
        ['state', paint(vm.state, stateColor(vm.state), ctx.color)],
        ['uuid', vm.uuid],
        ['vcpus', String(vm.vcpus)],
        ['memory', bytes(vm.memory_mb * 1024 * 1024)],
        ...(vm.disk_gb !== undefined && vm.disk_gb !== null ? [['disk', `${vm.disk_gb} GiB`] as const] : []),
        ['ip', vm.ip_address === '' ? '-' : vm.ip_address],
        ['uptime', duration(vm.uptime_seconds)],
        ...(vm.profile !== undefined && vm.profile !== null ? [['profile', vm.profile] as const] : []),
        ...(vm.host !== undefined ? [['host', vm.host] as const] : []),
        ...(vm.accelerator !== undefined && vm.accelerator !== null ? [['accelerator', vm.accelerator] as const] : []),
        ['agent', agent],
      ]),
    );
    return undefined;
  },
};

const create: CommandDef = {
  noun: 'vm',
  verb: 'create',
  summary: 'create a VM (waits for the vm_create operation)',
  args: [NAME],
  flags: [
    { name: 'profile', type: 'string', value: 'NAME', description: 'svc-dev (default), basic, or a startup profile (sbx profile list)' },
    { name: 'loadout', type: 'string', value: 'NAME', description: 'a loadout to apply at provisioning (sbx loadout list)' },
    { name: 'vcpus', type: 'number', value: 'N', description: 'virtual CPUs (default 4)' },
    { name: 'memory-mb', type: 'number', value: 'MB', description: 'memory in MiB (default 8192)' },
    { name: 'disk-gb', type: 'number', value: 'GB', description: 'disk in GiB (default 50)' },
    { name: 'no-agentshare', type: 'boolean', description: 'no shared storage' },
    { name: 'no-start', type: 'boolean', description: 'do not start it after provisioning' },
    {
      name: 'deferred-enrollment',
      type: 'boolean',
      description: 'give its agent no identity yet (enrollment: deferred), to checkpoint it before enrollment (sbx checkpoint create)',
    },
    { name: 'ssh-key', type: 'string', value: 'FILE', description: 'direct runtime SSH public key file (dev/break-glass)' },
    NO_WAIT,
  ],
  async run(ctx, { args, flags }) {
    const req: VmCreateRequest = { name: args[0] as string };
    const profile = str(flags, 'profile');
    if (profile !== undefined) req.profile = profile;
    const loadout = str(flags, 'loadout');
    if (loadout !== undefined) req.loadout = loadout;
    const vcpus = int(flags, 'vcpus', 1, 4096);
    if (vcpus !== undefined) req.vcpus = vcpus;
    const mem = int(flags, 'memory-mb', 1);
    if (mem !== undefined) req.memory_mb = mem;
    const disk = int(flags, 'disk-gb', 1);
    if (disk !== undefined) req.disk_gb = disk;
    if (bool(flags, 'no-agentshare')) req.agentshare = false;
    if (bool(flags, 'no-start')) req.start = false;
    if (bool(flags, 'deferred-enrollment')) req.enrollment = 'deferred';
    const keyFile = str(flags, 'ssh-key');
    if (keyFile !== undefined) req.ssh_key = (await readFile(keyFile, 'utf8')).trim();
    const startedMs = ctx.now();
    const accepted = await ctx.api.createVm(req, { signal: ctx.signal });
    const op = await followAccepted(ctx, accepted, bool(flags, 'no-wait'));
    if (op !== null && !ctx.json) {
      const vm = (op.result?.['vm'] ?? {}) as { name?: string; state?: string };
      ctx.out(`VM ${vm.name ?? req.name} created (${vm.state ?? 'state unknown'}) in ${((ctx.now() - startedMs) / 1000).toFixed(1)}s`);
    }
    return undefined;
  },
};

function lifecycle(verb: 'start' | 'stop' | 'destroy', summary: string): CommandDef {
  return {
    noun: 'vm',
    verb,
    summary,
    args: [NAME],
    flags: [],
    async run(ctx, { args }) {
      const name = args[0] as string;
      const res =
        verb === 'start'
          ? await ctx.api.startVm(name, { signal: ctx.signal })
          : verb === 'stop'
            ? await ctx.api.stopVm(name, { signal: ctx.signal })
            : await ctx.api.destroyVm(name, { signal: ctx.signal });
      if (ctx.json) ctx.printJson(res);
      else ctx.out(`${res.vm.name}: ${paint(res.vm.state, stateColor(res.vm.state), ctx.color)} — ${res.message}`);
      return undefined;
    },
  };
}

const restart: CommandDef = {
  noun: 'vm',
  verb: 'restart',
  summary: 'restart a running VM (waits for the vm_restart operation)',
  args: [NAME],
  flags: [
    { name: 'hard', type: 'boolean', description: 'force off instead of an ACPI shutdown' },
    {
      name: 'timeout',
      type: 'number',
      value: 'SECONDS',
      description: 'wait this long for a graceful shutdown before forcing (default 60)',
    },
    NO_WAIT,
  ],
  async run(ctx, { args, flags }) {
    const timeout = int(flags, 'timeout', 0, 86_400);
    const accepted = await ctx.api.restartVm(
      args[0] as string,
      { mode: bool(flags, 'hard') ? 'hard' : 'graceful', ...(timeout !== undefined ? { timeout_seconds: timeout } : {}) },
      { signal: ctx.signal },
    );
    const op = await followAccepted(ctx, accepted, bool(flags, 'no-wait'));
    if (op !== null && !ctx.json) ctx.out(`VM ${op.target} restarted`);
    return undefined;
  },
};

const remove: CommandDef = {
  noun: 'vm',
  verb: 'delete',
  summary: 'delete a VM definition (stopped, or --force)',
  args: [NAME],
  flags: [
    { name: 'force', type: 'boolean', description: 'delete even when running' },
    { name: 'delete-disk', type: 'boolean', description: 'remove its disk too' },
  ],
  async run(ctx, { args, flags }) {
    const res = await ctx.api.deleteVm(
      args[0] as string,
      { force: bool(flags, 'force'), deleteDisk: bool(flags, 'delete-disk') },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(res);
    else ctx.out(res.deleted ? `VM ${res.name} deleted${res.disk_deleted ? ' (disk removed)' : ''}` : `VM ${res.name} was not deleted`);
    return undefined;
  },
};

const deployAgent: CommandDef = {
  noun: 'vm',
  verb: 'deploy-agent',
  summary: 'reinstall the agent in a running VM (waits for the operation)',
  args: [NAME],
  flags: [NO_WAIT],
  async run(ctx, { args, flags }) {
    const op = await followAccepted(ctx, await ctx.api.deployAgent(args[0] as string, { signal: ctx.signal }), bool(flags, 'no-wait'));
    if (op !== null && !ctx.json) ctx.out(`agent deployed to ${op.target}`);
    return undefined;
  },
};

export const VM_COMMANDS: readonly CommandDef[] = [
  list,
  get,
  create,
  lifecycle('start', 'start a VM'),
  lifecycle('stop', 'stop a VM gracefully (ACPI shutdown)'),
  lifecycle('destroy', 'power a VM off at once'),
  restart,
  remove,
  deployAgent,
];
