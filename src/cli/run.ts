/**
 * The sbx dispatcher: finds the command, parses its arguments, resolves settings, runs it, and
 * turns whatever it threw into a message on stderr and an exit code (exit-codes.ts).
 */
import { ApiClient } from '../client/api-client.js';
import { isAbortError } from '../client/api-error.js';
import { parseArgs, UsageError } from './args.js';
import { AGENT_COMMANDS } from './commands/agent.js';
import { VERB_ALIASES, type CommandDef } from './commands/command.js';
import { CONTEXT_COMMANDS } from './commands/context.js';
import { CRED_COMMANDS } from './commands/cred.js';
import { EVENTS_COMMANDS } from './commands/events.js';
import { FLEET_COMMANDS } from './commands/fleet.js';
import { HEALTH_COMMANDS } from './commands/health.js';
import { MCP_COMMANDS } from './commands/mcp.js';
import { OPS_COMMANDS } from './commands/ops.js';
import { CHECKPOINT_COMMANDS, POOL_COMMANDS } from './commands/pool.js';
import { SESSION_COMMANDS } from './commands/session.js';
import { SSH_COMMANDS } from './commands/ssh.js';
import { TASK_COMMANDS } from './commands/task.js';
import { VM_COMMANDS } from './commands/vm.js';
import { LOADOUT_COMMANDS, PROFILE_COMMANDS } from './commands/profile.js';
import { CELLD_COMMANDS } from './commands/celld.js';
import { STORAGE_COMMANDS } from './commands/storage.js';
import { EXECUTOR_COMMANDS, MISSION_COMMANDS } from './commands/mission.js';
import { AIWG_COMMANDS } from './commands/aiwg.js';
import { A2A_COMMANDS } from './commands/a2a.js';
import { configPath, loadConfigFile, resolveSettings, type ResolvedSettings } from './config.js';
import { errorLine, ExitCode, exitCodeFor, OutcomeFailedError } from './exit-codes.js';
import { commandHelp, mainHelp, nounHelp } from './help.js';
import { operatorFetch } from './operator-tls.js';
import { writeText, type CliIo, type CommandContext } from './io.js';
import { errorMessage } from '../util/error-message.js';

export const SBX_VERSION = '0.1.0';

/** Every command, in help order. */
export const COMMANDS: readonly CommandDef[] = [
  ...VM_COMMANDS,
  ...AGENT_COMMANDS,
  ...SESSION_COMMANDS,
  ...TASK_COMMANDS,
  ...EVENTS_COMMANDS,
  ...OPS_COMMANDS,
  ...CHECKPOINT_COMMANDS,
  ...POOL_COMMANDS,
  ...CRED_COMMANDS,
  ...SSH_COMMANDS,
  ...MCP_COMMANDS,
  ...HEALTH_COMMANDS,
  ...CONTEXT_COMMANDS,
  // startup profiles and loadouts (issue 21)
  ...PROFILE_COMMANDS,
  ...LOADOUT_COMMANDS,
  // Celld (README "Celld")
  ...CELLD_COMMANDS,
  ...FLEET_COMMANDS,
  ...STORAGE_COMMANDS,
  // missions and dispatch (README "Missions and dispatch")
  ...EXECUTOR_COMMANDS,
  ...MISSION_COMMANDS,
  // aiwg bridge (README "Orchestration link and aiwg bridge")
  ...AIWG_COMMANDS,
  // A2A (README "A2A")
  ...A2A_COMMANDS,
];

const NOUNS = [...new Set(COMMANDS.map((c) => c.noun))];

/**
 * Finds the command of argv (a verb may be an alias: `ls` for list, `rm` for delete); returns it
 * and the remaining tokens. Throws UsageError.
 */
export function findCommand(argv: readonly string[]): { command: CommandDef; rest: string[] } | { help: string } {
  const noun = argv[0];
  if (noun === undefined || noun === '--help' || noun === '-h' || noun === 'help') return { help: mainHelp(COMMANDS, SBX_VERSION) };
  if (!NOUNS.includes(noun)) throw new UsageError(`unknown command ${JSON.stringify(noun)}`, `commands: ${NOUNS.join(', ')} (sbx --help)`);
  const bare = COMMANDS.find((c) => c.noun === noun && c.verb === '');
  if (bare !== undefined) return { command: bare, rest: argv.slice(1) };
  const verb = argv[1];
  if (verb === undefined || verb === '--help' || verb === '-h' || verb === 'help') return { help: nounHelp(noun, COMMANDS) };
  const command = COMMANDS.find((c) => c.noun === noun && (c.verb === verb || c.verb === VERB_ALIASES[verb]));
  if (command === undefined) {
    const verbs = COMMANDS.filter((c) => c.noun === noun).map((c) => c.verb);
    throw new UsageError(`unknown command "${noun} ${verb}"`, `sbx ${noun} ${verbs.join('|')} (sbx ${noun} --help)`);
  }
  return { command, rest: argv.slice(2) };
}

/** Runs sbx with `argv` (without node and the script); resolves with the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let json = argv.includes('--json');
  const ac = new AbortController();
  const offInterrupt = io.onInterrupt?.(() => ac.abort());
  try {
    if (argv[0] === '--version' || argv[0] === 'version') {
      writeText(io.stdout, json ? JSON.stringify({ version: SBX_VERSION }) : `sbx ${SBX_VERSION}`);
      return ExitCode.OK;
    }
    const found = findCommand(argv);
    if ('help' in found) {
      writeText(io.stdout, found.help);
      return ExitCode.OK;
    }
    const { command, rest } = found;
    const hint = `usage: sbx ${command.verb === '' ? command.noun : `${command.noun} ${command.verb}`} --help`;
    const parsed = parseArgs(rest, command.flags, command.args, hint);
    if (parsed.flags['help'] === true) {
      writeText(io.stdout, commandHelp(command));
      return ExitCode.OK;
    }
    json = parsed.flags['json'] === true;
    const ctx = await makeContext(io, parsed.flags, json, ac.signal);
    const code = await command.run(ctx, parsed);
    return code ?? ExitCode.OK;
  } catch (err) {
    // Streams end quietly on Ctrl-C (exit 0); a wait that is cut short rejects with AbortError.
    if (ac.signal.aborted && isAbortError(err)) {
      writeText(io.stderr, 'sbx: interrupted');
      return ExitCode.INTERRUPTED;
    }
    const code = exitCodeFor(err);
    // A failed outcome was printed already (the final operation or task is the JSON result).
    if (json && !(err instanceof OutcomeFailedError)) {
      writeText(io.stdout, JSON.stringify({ error: { code: errorCode(err), message: errorMessage(err) }, exit_code: code }));
    }
    writeText(io.stderr, errorLine(err));
    return code;
  } finally {
    offInterrupt?.();
  }
}

function errorCode(err: unknown): string {
  if (err instanceof UsageError) return 'usage';
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
}

async function makeContext(io: CliIo, flags: Record<string, unknown>, json: boolean, signal: AbortSignal): Promise<CommandContext> {
  const path = configPath(io.env);
  const str = (k: string): string | undefined => {
    const v = flags[k];
    return typeof v === 'string' ? v : undefined;
  };
  const noColor = flags['no-color'] === true || (io.env.NO_COLOR !== undefined && io.env.NO_COLOR !== '') || io.env.TERM === 'dumb';
  // Resolution errors (an unknown --context, a bad --server) surface only when a command uses
  // the settings, so `sbx context list/set/use` still work to repair them.
  let settings: ResolvedSettings | undefined;
  let settingsError: unknown;
  try {
    settings = resolveSettings({ context: str('context'), server: str('server'), actor: str('actor') }, io.env, await loadConfigFile(path));
  } catch (err) {
    settingsError = err;
  }
  let api: ApiClient | undefined;
  const ctx: CommandContext = {
    io,
    configPath: path,
    json,
    color: !json && !noColor && io.stdout.isTTY === true,
    stderrTty: io.stderr.isTTY === true,
    signal,
    now: io.now ?? Date.now,
    get settings(): ResolvedSettings {
      if (settings === undefined) throw settingsError;
      return settings;
    },
    get api(): ApiClient {
      const certs = io.env.SBX_OPERATOR_CERTS;
      api ??= new ApiClient({
        baseUrl: ctx.settings.server,
        headers: { 'user-agent': `sbx/${SBX_VERSION}` },
        ...(certs !== undefined && certs !== '' && ctx.settings.server.startsWith('https:') && { fetch: operatorFetch(certs) }),
      });
      return api;
    },
    out: (text) => writeText(io.stdout, text),
    err: (text) => writeText(io.stderr, text),
    printJson: (value, compact = false) => writeText(io.stdout, compact ? JSON.stringify(value) : JSON.stringify(value, null, 2)),
  };
  return ctx;
}
