/**
 * The shape of one `sbx <noun> <verb>` command: its arguments and flags (for parsing and help)
 * and the function that runs it. `run` returns the exit code (undefined = 0) or throws; the
 * dispatcher maps what it throws to an exit code and prints the error.
 */
import type { ArgSpec, FlagSpec, ParsedArgs } from '../args.js';
import type { CommandContext } from '../io.js';

export interface CommandDef {
  readonly noun: string;
  readonly verb: string;
  readonly summary: string;
  readonly args: readonly ArgSpec[];
  readonly flags: readonly FlagSpec[];
  /** Left out of `sbx --help` (internal modes such as ssh-proxy). */
  readonly hidden?: boolean;
  /** More help text, printed under the usage line. */
  readonly details?: string;
  run(ctx: CommandContext, parsed: ParsedArgs): Promise<number | undefined>;
}

/**
 * Verb aliases people type from kubectl habits: `sbx vm ls`, `sbx context rm`. Each applies to
 * every noun that has the verb it stands for; help shows them.
 */
export const VERB_ALIASES: Readonly<Record<string, string>> = { ls: 'list', rm: 'delete' };

/** The aliases of `verb` (`['ls']` for list). */
export function aliasesOf(verb: string): string[] {
  return Object.entries(VERB_ALIASES)
    .filter(([, v]) => v === verb)
    .map(([alias]) => alias);
}

export const NO_WAIT: FlagSpec = {
  name: 'no-wait',
  type: 'boolean',
  description: 'return the operation at once instead of waiting for it',
};
