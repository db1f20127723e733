/**
 * `sbx profile list|get|create|update|delete` and `sbx loadout create|list|get` (spec 4.13, README
 * "Startup profiles and loadouts"). `profile update` reads the profile, lays the flags (and -f)
 * over it and sends it with the revision it read, so a change made meanwhile by someone else is
 * refused (profile.revision_mismatch) instead of overwritten. Mutations take --idempotency-key.
 */
import { readFile } from 'node:fs/promises';
import type { LoadoutJson, StartupProfileJson } from '../../client/types.js';
import { int, str, UsageError, type FlagSpec, type FlagValues } from '../args.js';
import { renderFields, renderTable } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const NAME = { name: 'NAME', required: true, description: 'profile name' } as const;
const KEY: FlagSpec = {
  name: 'idempotency-key',
  type: 'string',
  value: 'KEY',
  description: 'retry-safe key (a retry replays the first answer)',
};
const FIELD_FLAGS: readonly FlagSpec[] = [
  { name: 'file', short: 'f', type: 'string', value: 'FILE', description: 'a JSON file with profile fields (flags override it)' },
  { name: 'description', type: 'string', value: 'TEXT', description: 'what the profile is for' },
  { name: 'vcpus', type: 'number', value: 'N', description: 'virtual CPUs (1-64; default 4)' },
  { name: 'memory-mb', type: 'number', value: 'MB', description: 'memory in MiB (256-262144; default 8192)' },
  { name: 'disk-gb', type: 'number', value: 'GB', description: 'disk in GiB (1-2048; default 50)' },
  { name: 'image', type: 'string', value: 'REF', description: 'a container image ref (GET /api/v1/container-images)' },
  { name: 'loadout', type: 'string', value: 'NAME', description: "a loadout applied to the profile's VMs ('' for none)" },
  { name: 'env', type: 'string', value: 'K=V,...', description: 'agent environment (no secrets), comma-separated' },
];

async function fieldsOf(flags: FlagValues): Promise<Record<string, unknown>> {
  const file = str(flags, 'file');
  let body: Record<string, unknown> = {};
  if (file !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(file, 'utf8'));
    } catch (err) {
      throw new UsageError(`${file}: not a JSON file (${(err as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError(`${file}: must hold a JSON object`);
    body = parsed as Record<string, unknown>;
  }
  const set = (k: string, v: unknown): void => {
    if (v !== undefined) body[k] = v;
  };
  set('description', str(flags, 'description'));
  set('vcpus', int(flags, 'vcpus', 1));
  set('memory_mb', int(flags, 'memory-mb', 1));
  set('disk_gb', int(flags, 'disk-gb', 1));
  set('image', str(flags, 'image'));
  const loadout = str(flags, 'loadout');
  if (loadout !== undefined) body['loadout'] = loadout === '' ? null : loadout;
  const env = str(flags, 'env');
  if (env !== undefined) {
    const pairs = env === '' ? [] : env.split(',');
    const out: Record<string, string> = {};
    for (const p of pairs) {
      const i = p.indexOf('=');
      if (i <= 0) throw new UsageError(`--env: "${p}" is not NAME=value`);
      out[p.slice(0, i)] = p.slice(i + 1);
    }
    const agent = (typeof body['agent'] === 'object' && body['agent'] !== null ? body['agent'] : {}) as Record<string, unknown>;
    body['agent'] = { ...agent, env: out };
  }
  return body;
}

const keyOf = (flags: FlagValues): { idempotencyKey?: string } => {
  const k = str(flags, 'idempotency-key');
  return k === undefined ? {} : { idempotencyKey: k };
};

function profileFields(p: StartupProfileJson): string {
  const env = Object.entries(p.agent.env).map(([k, v]) => `${k}=${v}`);
  return renderFields([
    ['name', p.name],
    ['description', p.description],
    ['builtin', String(p.builtin)],
    ['vcpus', String(p.vcpus)],
    ['memory_mb', String(p.memory_mb)],
    ['disk_gb', String(p.disk_gb)],
    ['image', p.image ?? '-'],
    ['network', p.network ?? '-'],
    ['loadout', p.loadout ?? '-'],
    ['agentshare', String(p.agent.agentshare)],
    ['enrollment', p.agent.enrollment],
    ['env', env.length === 0 ? '-' : env.join(' ')],
    ['revision', String(p.revision)],
    ['updated', p.updated_at],
  ]);
}

function printProfile(ctx: CommandContext, p: StartupProfileJson): void {
  if (ctx.json) ctx.printJson(p);
  else ctx.out(profileFields(p));
}

const profileList: CommandDef = {
  noun: 'profile',
  verb: 'list',
  summary: 'list startup profiles (the built-ins first)',
  args: [],
  flags: [],
  async run(ctx) {
    const { startup_profiles: list } = await ctx.api.listStartupProfiles({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(list);
    else
      ctx.out(
        renderTable(
          list,
          [
            { header: 'PROFILE', value: (p) => p.name },
            { header: 'VCPUS', value: (p) => String(p.vcpus), right: true },
            { header: 'MEMORY_MB', value: (p) => String(p.memory_mb), right: true },
            { header: 'DISK_GB', value: (p) => String(p.disk_gb), right: true },
            { header: 'LOADOUT', value: (p) => p.loadout ?? '-' },
            { header: 'REV', value: (p) => (p.builtin ? 'built-in' : String(p.revision)) },
          ],
          { color: ctx.color, empty: 'no startup profiles' },
        ),
      );
    return undefined;
  },
};

const profileGet: CommandDef = {
  noun: 'profile',
  verb: 'get',
  summary: 'show a startup profile',
  args: [NAME],
  flags: [],
  async run(ctx, { args }) {
    printProfile(ctx, await ctx.api.getStartupProfile(args[0] as string, { signal: ctx.signal }));
    return undefined;
  },
};

const profileCreate: CommandDef = {
  noun: 'profile',
  verb: 'create',
  summary: 'create a startup profile (sbx vm create NAME --profile P selects it)',
  details: 'Example: sbx profile create small --vcpus 2 --memory-mb 2048 --disk-gb 20 --loadout dev-tools',
  args: [NAME],
  flags: [...FIELD_FLAGS, KEY],
  async run(ctx, { args, flags }) {
    const body = { ...(await fieldsOf(flags)), name: args[0] as string };
    printProfile(ctx, await ctx.api.createStartupProfile(body, { ...keyOf(flags), signal: ctx.signal }));
    return undefined;
  },
};

const profileUpdate: CommandDef = {
  noun: 'profile',
  verb: 'update',
  summary: 'change a startup profile (the flags over what it holds now; refused if it changed meanwhile)',
  args: [NAME],
  flags: [...FIELD_FLAGS, KEY],
  async run(ctx, { args, flags }) {
    const name = args[0] as string;
    const current = await ctx.api.getStartupProfile(name, { signal: ctx.signal });
    const base: Record<string, unknown> = {
      description: current.description,
      vcpus: current.vcpus,
      memory_mb: current.memory_mb,
      disk_gb: current.disk_gb,
      image: current.image,
      network: current.network,
      agent: current.agent,
      loadout: current.loadout,
    };
    const body = { ...base, ...(await fieldsOf(flags)), expected_revision: current.revision };
    printProfile(ctx, await ctx.api.updateStartupProfile(name, body, { ...keyOf(flags), signal: ctx.signal }));
    return undefined;
  },
};

const profileDelete: CommandDef = {
  noun: 'profile',
  verb: 'delete',
  summary: 'delete a startup profile (refused while a VM created with it exists or is being created)',
  args: [NAME],
  flags: [KEY],
  async run(ctx, { args, flags }) {
    const r = await ctx.api.deleteStartupProfile(args[0] as string, { ...keyOf(flags), signal: ctx.signal });
    if (ctx.json) ctx.printJson(r);
    else ctx.out(`startup profile ${r.name} deleted`);
    return undefined;
  },
};

const LOADOUT_NAME = { name: 'NAME', required: true, description: 'loadout name (its metadata.name)' } as const;

function loadoutFields(l: LoadoutJson): string {
  const list = (v: readonly string[]): string => (v.length > 0 ? v.join(' ') : '-');
  const env = Object.entries(l.environment).map(([k, v]) => `${k}=${v}`);
  const files = l.files.map((f) => `${f.path} (${f.mode}, ${f.size_bytes} B)`);
  return renderFields([
    ['name', l.name],
    ['description', l.description],
    ['packages', list(l.packages)],
    ['tools', list(l.tools)],
    ['environment', env.length === 0 ? '-' : env.join(' ')],
    ['files', files.length === 0 ? '-' : files.join(', ')],
    ['sha256', l.document_sha256],
    ['created', l.created_at],
  ]);
}

const loadoutCreate: CommandDef = {
  noun: 'loadout',
  verb: 'create',
  summary: 'create a loadout from its YAML document (create-only; metadata.name must be NAME)',
  details: 'Example: sbx loadout create dev-tools -f dev-tools.yaml',
  args: [LOADOUT_NAME],
  flags: [{ name: 'file', short: 'f', type: 'string', value: 'FILE', description: "the loadout YAML, '-' for stdin (required)" }],
  async run(ctx, { args, flags }) {
    const file = str(flags, 'file');
    if (file === undefined) throw new UsageError('loadout create needs -f FILE', 'usage: sbx loadout create NAME -f loadout.yaml');
    const text = file === '-' ? await readAll(ctx.io.stdin) : await readFile(file, 'utf8');
    const l = await ctx.api.createLoadout(args[0] as string, text, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(l);
    else ctx.out(loadoutFields(l));
    return undefined;
  },
};

const loadoutList: CommandDef = {
  noun: 'loadout',
  verb: 'list',
  summary: 'list loadouts',
  args: [],
  flags: [],
  async run(ctx) {
    const { loadouts } = await ctx.api.listLoadouts({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(loadouts);
    else
      ctx.out(
        renderTable(
          loadouts,
          [
            { header: 'LOADOUT', value: (l) => l.name },
            { header: 'PACKAGES', value: (l) => String(l.packages.length), right: true },
            { header: 'FILES', value: (l) => String(l.files.length), right: true },
            { header: 'ENV', value: (l) => String(Object.keys(l.environment).length), right: true },
            { header: 'DESCRIPTION', value: (l) => l.description },
          ],
          { color: ctx.color, empty: 'no loadouts' },
        ),
      );
    return undefined;
  },
};

const loadoutGet: CommandDef = {
  noun: 'loadout',
  verb: 'get',
  summary: 'show a loadout (--json: with file contents and the document)',
  args: [LOADOUT_NAME],
  flags: [],
  async run(ctx, { args }) {
    const l = await ctx.api.getLoadout(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(l);
    else ctx.out(loadoutFields(l));
    return undefined;
  },
};

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

export const PROFILE_COMMANDS: readonly CommandDef[] = [profileList, profileGet, profileCreate, profileUpdate, profileDelete];
export const LOADOUT_COMMANDS: readonly CommandDef[] = [loadoutCreate, loadoutList, loadoutGet];
