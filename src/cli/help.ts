/**
 * Help texts: `sbx --help` (every command, global flags, environment, exit codes), `sbx <noun>
 * --help` and `sbx <noun> <verb> --help`.
 */
import { GLOBAL_FLAGS, type FlagSpec } from './args.js';
import { aliasesOf, type CommandDef } from './commands/command.js';
import { DEFAULT_SERVER } from './config.js';
import { EXIT_CODE_TABLE } from './exit-codes.js';

function commandName(c: CommandDef): string {
  return c.verb === '' ? c.noun : `${c.noun} ${c.verb}`;
}

/** `vm list (ls)`: the name with its aliases, for the command lists. */
function listedName(c: CommandDef): string {
  const aliases = aliasesOf(c.verb);
  return aliases.length === 0 ? commandName(c) : `${commandName(c)} (${aliases.join(', ')})`;
}

function usageLine(c: CommandDef): string {
  const args = c.args.map((a) => (a.variadic === true ? `[-- ${a.name}...]` : a.required ? a.name : `[${a.name}]`)).join(' ');
  return `sbx ${commandName(c)}${args !== '' ? ` ${args}` : ''}${c.flags.length > 0 ? ' [flags]' : ''}`;
}

function flagLines(flags: readonly FlagSpec[]): string[] {
  const left = flags.map(
    (f) => `${f.short !== undefined ? `-${f.short}, ` : '    '}--${f.name}${f.value !== undefined ? ` ${f.value}` : ''}`,
  );
  const w = Math.max(0, ...left.map((l) => l.length));
  return flags.map((f, i) => `  ${(left[i] ?? '').padEnd(w)}  ${f.description}`);
}

export function exitCodeHelp(): string {
  return EXIT_CODE_TABLE.map((r) => `  ${String(r.code).padStart(3)}  ${r.meaning}`).join('\n');
}

/** `sbx --help`. */
export function mainHelp(all: readonly CommandDef[], version: string): string {
  const commands = all.filter((c) => c.hidden !== true);
  const names = commands.map(listedName);
  const w = Math.max(...names.map((n) => n.length));
  return `sbx ${version} — command-line client of a sandboxd server (its public HTTP/WS API)

usage: sbx <noun> <verb> [arguments] [flags]     sbx <noun> <verb> --help for details

commands:
${commands.map((c, i) => `  ${(names[i] ?? '').padEnd(w)}  ${c.summary}`).join('\n')}

aliases (kubectl habits): ls = list, rm = delete (sbx vm ls, sbx vm rm NAME, sbx context rm NAME);
  -f = --follow (sbx task logs ID -f).

flags of every command:
${flagLines([...GLOBAL_FLAGS, { name: 'version', type: 'boolean', description: 'print the version (sbx --version)' }]).join('\n')}

server and context:
  A context names a server (and optionally a WebSocket base, a role and an actor); they live in
  $XDG_CONFIG_HOME/sbx/config.json (else ~/.config/sbx/config.json), mode 0600.
  Server:  --server, SBX_SERVER, the context's server, ${DEFAULT_SERVER}.
  Context: --context, SBX_CONTEXT, the current context (sbx context use NAME).
  Actor:   --actor, SVC_GATEWAY_SSH_ACTOR, the context's actor, the context's role, the OS user.
  Operator: SBX_OPERATOR_CERTS=DIR (ca.pem, operator.pem, operator-key.pem of sandboxd certs
           issue-operator) is presented to an https:// server (the admin listener; SSH leases need it).

output:
  Tables for people; --json prints the server's JSON (streams: one object per line). Colour only
  on a terminal, never with NO_COLOR or --no-color. Progress of operations goes to stderr.

exit codes:
${exitCodeHelp()}

Errors print the server's code and message, e.g.  sbx: VM_NOT_FOUND: VM 'agent-x' not found
`;
}

/** `sbx <noun> --help`. */
export function nounHelp(noun: string, commands: readonly CommandDef[]): string {
  const mine = commands.filter((c) => c.noun === noun);
  const lines = mine.map((c) => usageLine(c));
  const w = Math.max(...lines.map((l) => l.length));
  const aliases = mine.flatMap((c) => aliasesOf(c.verb).map((a) => `sbx ${noun} ${a} = sbx ${noun} ${c.verb}`));
  const aliasText = aliases.length === 0 ? '' : `\naliases: ${aliases.join(', ')}\n`;
  return `usage:\n${mine.map((c, i) => `  ${(lines[i] ?? '').padEnd(w)}  ${c.summary}`).join('\n')}\n${aliasText}\nsbx ${noun} <verb> --help for the flags of one command.\n`;
}

/** `sbx <noun> <verb> --help`. */
export function commandHelp(c: CommandDef): string {
  const parts = [`usage: ${usageLine(c)}`];
  const aliases = aliasesOf(c.verb);
  if (aliases.length > 0) parts.push(`alias: ${aliases.map((a) => `sbx ${c.noun} ${a}`).join(', ')}`);
  parts.push('', c.summary.charAt(0).toUpperCase() + c.summary.slice(1) + '.');
  if (c.details !== undefined) parts.push('', c.details);
  if (c.args.length > 0) {
    const w = Math.max(...c.args.map((a) => a.name.length));
    parts.push('', 'arguments:', ...c.args.map((a) => `  ${a.name.padEnd(w)}  ${a.description}`));
  }
  if (c.flags.length > 0) parts.push('', 'flags:', ...flagLines(c.flags));
  parts.push('', 'plus the flags of every command (sbx --help).');
  return `${parts.join('\n')}\n`;
}
