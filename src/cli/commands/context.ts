/**
 * `sbx context list|use|set|current|delete`: named server contexts in the contexts file
 * (config.ts). Local commands: they never call the server.
 */
import { str, UsageError } from '../args.js';
import {
  checkContextName,
  checkUrl,
  DEFAULT_CONTEXT_NAME,
  DEFAULT_SERVER,
  loadConfigFile,
  saveConfigFile,
  type SbxContext,
} from '../config.js';
import { ExitCode } from '../exit-codes.js';
import { renderFields, renderTable } from '../format.js';
import type { CommandDef } from './command.js';

const NAME = { name: 'NAME', required: true, description: 'context name' } as const;

const list: CommandDef = {
  noun: 'context',
  verb: 'list',
  summary: 'list contexts (* marks the current one)',
  args: [],
  flags: [],
  async run(ctx) {
    const file = await loadConfigFile(ctx.configPath);
    const rows = Object.entries(file.contexts).map(([name, c]) => ({ name, ...c, current: name === file.current }));
    if (ctx.json) {
      ctx.printJson({ current: file.current, contexts: file.contexts, path: ctx.configPath });
      return undefined;
    }
    if (rows.length === 0) {
      ctx.out(`No contexts in ${ctx.configPath}; sbx uses ${DEFAULT_SERVER}.\nAdd one with: sbx context set NAME --server URL`);
      return undefined;
    }
    ctx.out(
      renderTable(rows, [
        { header: '', value: (r) => (r.current ? '*' : '') },
        { header: 'NAME', value: (r) => r.name },
        { header: 'SERVER', value: (r) => r.server },
        { header: 'WS', value: (r) => r.ws ?? '-' },
        { header: 'ROLE', value: (r) => r.role ?? '-' },
        { header: 'ACTOR', value: (r) => r.actor ?? '-' },
      ]),
    );
    return undefined;
  },
};

const use: CommandDef = {
  noun: 'context',
  verb: 'use',
  summary: 'make a context the current one',
  args: [NAME],
  flags: [],
  async run(ctx, { args }) {
    const name = args[0] as string;
    const file = await loadConfigFile(ctx.configPath);
    if (file.contexts[name] === undefined) {
      ctx.err(`sbx: context.not_found: no context named ${JSON.stringify(name)} (sbx context list)`);
      return ExitCode.NOT_FOUND;
    }
    file.current = name;
    await saveConfigFile(ctx.configPath, file);
    if (ctx.json) ctx.printJson({ current: name, context: file.contexts[name] });
    else ctx.out(`current context: ${name}`);
    return undefined;
  },
};

const setCmd: CommandDef = {
  noun: 'context',
  verb: 'set',
  summary: 'create or update a context',
  args: [NAME],
  flags: [
    { name: 'server', type: 'string', value: 'URL', description: `HTTP API address (default ${DEFAULT_SERVER} for a new context)` },
    {
      name: 'ws',
      type: 'string',
      value: 'URL',
      description: 'WebSocket base for terminals (default: the server with ws://); empty to clear',
    },
    { name: 'role', type: 'string', value: 'ROLE', description: 'your role on this server (an actor fallback); empty to clear' },
    { name: 'actor', type: 'string', value: 'NAME', description: 'actor name for this context; empty to clear' },
    { name: 'use', type: 'boolean', description: 'also make it the current context' },
  ],
  details: 'The first context created becomes the current one.',
  async run(ctx, { args, flags }) {
    const name = checkContextName(args[0] as string);
    const file = await loadConfigFile(ctx.configPath);
    const old = file.contexts[name];
    const server = str(flags, 'server');
    const next: SbxContext = { ...old, server: server !== undefined ? checkUrl(server, 'server') : (old?.server ?? DEFAULT_SERVER) };
    for (const k of ['ws', 'role', 'actor'] as const) {
      const v = str(flags, k);
      if (v === undefined) continue;
      if (v === '') delete next[k];
      else next[k] = k === 'ws' ? checkUrl(v, 'ws') : v;
    }
    file.contexts[name] = next;
    if (flags['use'] === true || file.current === null || file.contexts[file.current] === undefined) file.current = name;
    await saveConfigFile(ctx.configPath, file);
    if (ctx.json) ctx.printJson({ name, context: next, current: file.current === name });
    else
      ctx.out(`context ${name} ${old === undefined ? 'created' : 'updated'}${file.current === name ? ' (current)' : ''}: ${next.server}`);
    return undefined;
  },
};

const current: CommandDef = {
  noun: 'context',
  verb: 'current',
  summary: 'show the context, server and actor commands would use',
  args: [],
  flags: [],
  run(ctx) {
    const s = ctx.settings;
    if (ctx.json) {
      ctx.printJson({
        name: s.contextName,
        saved: s.contextSaved,
        server: s.server,
        server_source: s.serverSource,
        ws: s.ws,
        role: s.context.role ?? null,
        actor: s.actor,
        actor_source: s.actorSource,
        config_path: ctx.configPath,
      });
      return Promise.resolve(undefined);
    }
    ctx.out(
      renderFields([
        ['context', `${s.contextName}${s.contextSaved ? '' : ' (built-in)'}`],
        ['server', `${s.server} (from ${s.serverSource})`],
        ['ws', s.ws],
        ['role', s.context.role ?? '-'],
        ['actor', `${s.actor} (from ${s.actorSource})`],
        ['config', ctx.configPath],
      ]),
    );
    return Promise.resolve(undefined);
  },
};

const remove: CommandDef = {
  noun: 'context',
  verb: 'delete',
  summary: 'delete a context',
  args: [NAME],
  flags: [],
  async run(ctx, { args }) {
    const name = args[0] as string;
    if (name === DEFAULT_CONTEXT_NAME && (await loadConfigFile(ctx.configPath)).contexts[name] === undefined) {
      throw new UsageError('the built-in default context cannot be deleted');
    }
    const file = await loadConfigFile(ctx.configPath);
    if (file.contexts[name] === undefined) {
      ctx.err(`sbx: context.not_found: no context named ${JSON.stringify(name)}`);
      return ExitCode.NOT_FOUND;
    }
    delete file.contexts[name];
    if (file.current === name) file.current = null;
    await saveConfigFile(ctx.configPath, file);
    if (ctx.json) ctx.printJson({ deleted: name });
    else ctx.out(`context ${name} deleted`);
    return undefined;
  },
};

export const CONTEXT_COMMANDS: readonly CommandDef[] = [list, use, setCmd, current, remove];
