/**
 * `sbx cred add|list|lease|revoke|audit`: credentials, their leases and the credential audit
 * (README "Credentials and the credential proxy"). A value is read from stdin only, never from
 * the command line, where other users see it in the process list.
 */
import type { CredentialLease } from '../../client/types.js';
import { int, str, UsageError, type FlagValues } from '../args.js';
import { paint, renderFields, renderTable, stateColor } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

const list = (flags: FlagValues, name: string): string[] =>
  (str(flags, name) ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

function showLease(ctx: CommandContext, l: CredentialLease): void {
  const p = l.proxy_policy;
  ctx.out(
    renderFields([
      ['lease', l.id],
      ['credential', l.credential],
      ['state', paint(l.state, stateColor(l.state), ctx.color)],
      ['scope', `agent ${l.agent_id}, instance ${l.instance_id}, session ${l.session_id ?? 'any'}`],
      ['expires', l.expires_at],
      [
        'policy',
        p === null
          ? 'none (no proxy calls)'
          : `hosts ${p.hosts.join(',')}; paths ${p.path_prefixes.join(',')}; methods ${p.methods.join(',')}; headers ${p.header_allowlist.join(',') || '-'}`,
      ],
    ]),
  );
}

const add: CommandDef = {
  noun: 'cred',
  verb: 'add',
  summary: 'register a credential; its value is read from stdin',
  details: 'Example: printf %s "$TOKEN" | sbx cred add model-api --header authorization --prefix \'Bearer \'',
  args: [{ name: 'NAME', required: true, description: 'credential name ([a-z0-9._-], at most 64)' }],
  flags: [
    { name: 'header', type: 'string', value: 'NAME', description: 'header the value is injected into (default authorization)' },
    { name: 'prefix', type: 'string', value: 'TEXT', description: "text before the value in that header (default 'Bearer ')" },
  ],
  async run(ctx, { args, flags }) {
    const value = (await readAll(ctx.io.stdin)).replace(/\r?\n$/, '');
    if (value === '')
      throw new UsageError('sbx cred add reads the value from stdin, and stdin was empty', 'usage: printf %s "$TOKEN" | sbx cred add NAME');
    const header = str(flags, 'header');
    const prefix = str(flags, 'prefix');
    const c = await ctx.api.addCredential(
      {
        name: args[0] as string,
        value,
        ...((header !== undefined || prefix !== undefined) && {
          injection: { ...(header !== undefined && { header_name: header }), ...(prefix !== undefined && { value_prefix: prefix }) },
        }),
      },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(c);
    else ctx.out(`credential ${c.name} registered (injected as ${c.injection.header_name}: ${c.injection.value_prefix}<value>)`);
    return undefined;
  },
};

const ls: CommandDef = {
  noun: 'cred',
  verb: 'list',
  summary: 'list credentials (names and injection rules; never values), or with --leases their leases',
  args: [],
  flags: [
    { name: 'leases', type: 'boolean', description: 'list leases instead' },
    { name: 'state', type: 'string', value: 'STATE', description: 'with --leases: active, revoked or expired' },
  ],
  async run(ctx, { flags }) {
    if (flags['leases'] === true) {
      const state = str(flags, 'state');
      const { leases } = await ctx.api.listCredentialLeases(state === undefined ? {} : { state }, { signal: ctx.signal });
      if (ctx.json) ctx.printJson(leases);
      else
        ctx.out(
          renderTable(
            leases,
            [
              { header: 'lease', value: (l) => l.id },
              { header: 'credential', value: (l) => l.credential },
              { header: 'state', value: (l) => l.state, color: (l) => stateColor(l.state) },
              { header: 'agent', value: (l) => l.agent_id },
              { header: 'instance', value: (l) => l.instance_id },
              { header: 'expires', value: (l) => l.expires_at },
            ],
            { color: ctx.color, empty: 'no leases' },
          ),
        );
      return undefined;
    }
    const { credentials } = await ctx.api.listCredentials({ signal: ctx.signal });
    if (ctx.json) ctx.printJson(credentials);
    else
      ctx.out(
        renderTable(
          credentials,
          [
            { header: 'name', value: (c) => c.name },
            { header: 'header', value: (c) => c.injection.header_name },
            { header: 'prefix', value: (c) => JSON.stringify(c.injection.value_prefix) },
            { header: 'active leases', value: (c) => String(c.active_leases), right: true },
            { header: 'created', value: (c) => c.created_at },
          ],
          { color: ctx.color, empty: 'no credentials' },
        ),
      );
    return undefined;
  },
};

const lease: CommandDef = {
  noun: 'cred',
  verb: 'lease',
  summary: 'lease a credential to one workload, with the proxy policy it may use',
  args: [{ name: 'NAME', required: true, description: 'credential name' }],
  flags: [
    { name: 'agent', type: 'string', value: 'ID', description: 'agent id (required)' },
    { name: 'instance', type: 'string', value: 'ID', description: 'instance id (required)' },
    { name: 'session', type: 'string', value: 'ID', description: 'session id (default: any session)' },
    { name: 'ttl', type: 'number', value: 'SECONDS', description: 'lifetime, 1-3600 (default 900)' },
    { name: 'host', type: 'string', value: 'LIST', description: 'allowed hosts, comma-separated (host, host:port, *.suffix)' },
    { name: 'path', type: 'string', value: 'LIST', description: 'allowed path prefixes (default /)' },
    { name: 'method', type: 'string', value: 'LIST', description: 'allowed methods (default GET)' },
    { name: 'allow-header', type: 'string', value: 'LIST', description: 'headers the workload may send' },
  ],
  async run(ctx, { args, flags }) {
    const agent = str(flags, 'agent');
    const instance = str(flags, 'instance');
    if (agent === undefined || instance === undefined) throw new UsageError('sbx cred lease needs --agent and --instance');
    const hosts = list(flags, 'host');
    const session = str(flags, 'session');
    const paths = list(flags, 'path');
    const methods = list(flags, 'method');
    const l = await ctx.api.grantCredentialLease(
      {
        credential: args[0] as string,
        agent_id: agent,
        instance_id: instance,
        session_id: session ?? null,
        ttl_seconds: int(flags, 'ttl', 1, 3600) ?? 900,
        proxy_policy:
          hosts.length === 0
            ? null
            : {
                hosts,
                path_prefixes: paths.length === 0 ? ['/'] : paths,
                methods: methods.length === 0 ? ['GET'] : methods,
                header_allowlist: list(flags, 'allow-header'),
              },
      },
      { signal: ctx.signal },
    );
    if (ctx.json) ctx.printJson(l);
    else showLease(ctx, l);
    return undefined;
  },
};

const revoke: CommandDef = {
  noun: 'cred',
  verb: 'revoke',
  summary: 'revoke a credential lease',
  args: [{ name: 'LEASE', required: true, description: 'lease id (credlease_...)' }],
  flags: [],
  async run(ctx, { args }) {
    const l = await ctx.api.revokeCredentialLease(args[0] as string, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(l);
    else showLease(ctx, l);
    return undefined;
  },
};

const audit: CommandDef = {
  noun: 'cred',
  verb: 'audit',
  summary: "the credential audit of one UTC day (the 200 newest records; default today's)",
  args: [],
  flags: [{ name: 'date', type: 'string', value: 'YYYY-MM-DD', description: 'the UTC day' }],
  async run(ctx, { flags }) {
    const date = str(flags, 'date') ?? new Date(ctx.now()).toISOString().slice(0, 10);
    const page = await ctx.api.credentialAudit(date, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(page);
    else if (!page.available) ctx.out('the credential audit is turned off on this server (SVC_CREDENTIAL_AUDIT=off)');
    else
      ctx.out(
        renderTable(
          page.records,
          [
            { header: 'time', value: (r) => r.timestamp },
            { header: 'action', value: (r) => r.action },
            { header: 'outcome', value: (r) => r.outcome, color: (r) => (r.outcome === 'allowed' ? 'green' : 'red') },
            { header: 'reason', value: (r) => r.reason_code ?? '' },
            { header: 'actor', value: (r) => r.actor ?? '' },
            { header: 'lease', value: (r) => r.resource.lease_id ?? '' },
            { header: 'agent', value: (r) => r.correlation.agent_id ?? '' },
          ],
          { color: ctx.color, empty: `no audit records on ${date}` },
        ),
      );
    return undefined;
  },
};

export const CRED_COMMANDS: readonly CommandDef[] = [add, ls, lease, revoke, audit];
