/**
 * Command-line parsing for `sbx <noun> <verb> [args] [flags]`: declarative flag specs, GNU-style
 * long flags (`--name value`, `--name=value`), single-letter aliases (`-f file`), `--` ending
 * flags, and global flags accepted anywhere. Every mistake is a UsageError (exit code 2) whose
 * message names the flag or argument.
 */

export type FlagType = 'boolean' | 'string' | 'number';

export interface FlagSpec {
  /** Long name without dashes (`no-wait`). */
  readonly name: string;
  readonly short?: string;
  readonly type: FlagType;
  /** Placeholder in help (`FILE`). */
  readonly value?: string;
  readonly description: string;
}

export interface ArgSpec {
  readonly name: string;
  readonly required: boolean;
  readonly description: string;
  /** The last argument only: takes every argument left (`sbx ssh NAME -- ARGS...`). */
  readonly variadic?: boolean;
}

export type FlagValues = Record<string, string | number | boolean | undefined>;

export interface ParsedArgs {
  readonly args: string[];
  readonly flags: FlagValues;
}

/** A command-line mistake: printed with a hint, exit code 2. */
export class UsageError extends Error {
  /** `sbx vm create --help` style hint, when known. */
  readonly hint: string | undefined;
  constructor(message: string, hint?: string) {
    super(message);
    this.name = 'UsageError';
    this.hint = hint;
  }
}

/** Flags every command accepts. */
export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  { name: 'json', type: 'boolean', description: "print the server's JSON (one object per line for streams)" },
  { name: 'context', type: 'string', value: 'NAME', description: 'use this context (default: SBX_CONTEXT, then the current one)' },
  {
    name: 'server',
    type: 'string',
    value: 'URL',
    description: 'server URL (default: SBX_SERVER, then the context, then http://127.0.0.1:8122)',
  },
  { name: 'actor', type: 'string', value: 'NAME', description: 'actor name (default: SVC_GATEWAY_SSH_ACTOR, the context, the OS user)' },
  { name: 'no-color', type: 'boolean', description: 'no colour (also when NO_COLOR is set or output is not a terminal)' },
  { name: 'help', short: 'h', type: 'boolean', description: 'show help' },
];

function findFlag(specs: readonly FlagSpec[], name: string, short: boolean): FlagSpec | undefined {
  return specs.find((f) => (short ? f.short === name : f.name === name));
}

function convert(spec: FlagSpec, raw: string, shown: string): string | number {
  if (spec.type === 'number') {
    const t = raw.trim();
    const n = Number(t);
    if (t === '' || !Number.isFinite(n)) throw new UsageError(`${shown} needs a number, got ${JSON.stringify(raw)}`);
    return n;
  }
  return raw;
}

/**
 * Parses `tokens` (after noun and verb). Command flags shadow global ones of the same name.
 * Positional arguments are checked against `argSpecs` (missing required, too many).
 */
export function parseArgs(
  tokens: readonly string[],
  flagSpecs: readonly FlagSpec[],
  argSpecs: readonly ArgSpec[],
  hint?: string,
): ParsedArgs {
  const specs = [...flagSpecs, ...GLOBAL_FLAGS.filter((g) => !flagSpecs.some((f) => f.name === g.name))];
  const flags: FlagValues = {};
  const args: string[] = [];
  let onlyArgs = false;
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i] as string;
    if (onlyArgs || tok === '-' || !tok.startsWith('-')) {
      args.push(tok);
      continue;
    }
    if (tok === '--') {
      onlyArgs = true;
      continue;
    }
    const isLong = tok.startsWith('--');
    const body = isLong ? tok.slice(2) : tok.slice(1);
    const eq = isLong ? body.indexOf('=') : -1;
    const name = eq === -1 ? body : body.slice(0, eq);
    const shown = isLong ? `--${name}` : `-${name}`;
    if (!isLong && name.length !== 1) throw new UsageError(`unknown flag ${tok} (long flags take two dashes)`, hint);
    const spec = findFlag(specs, name, !isLong);
    if (spec === undefined) throw new UsageError(`unknown flag ${shown}`, hint);
    if (spec.type === 'boolean') {
      if (eq !== -1) {
        const v = body.slice(eq + 1);
        if (v !== 'true' && v !== 'false') throw new UsageError(`${shown} takes no value (or =true/=false)`, hint);
        flags[spec.name] = v === 'true';
      } else {
        flags[spec.name] = true;
      }
      continue;
    }
    let raw: string;
    if (eq !== -1) raw = body.slice(eq + 1);
    else {
      const next = tokens[i + 1];
      if (next === undefined || (next.startsWith('-') && next !== '-' && spec.type !== 'number')) {
        throw new UsageError(`${shown} needs a value${spec.value !== undefined ? ` (${spec.value})` : ''}`, hint);
      }
      raw = next;
      i++;
    }
    flags[spec.name] = convert(spec, raw, shown);
  }
  if (flags['help'] === true) return { args, flags };
  const required = argSpecs.filter((a) => a.required).length;
  if (args.length < required) {
    const missing = argSpecs
      .slice(args.length)
      .filter((a) => a.required)
      .map((a) => a.name);
    throw new UsageError(`missing ${missing.join(' ')}`, hint);
  }
  if (args.length > argSpecs.length && argSpecs.at(-1)?.variadic !== true)
    throw new UsageError(`unexpected argument ${JSON.stringify(args[argSpecs.length])}`, hint);
  return { args, flags };
}

/** A string flag's value (undefined when absent). */
export function str(flags: FlagValues, name: string): string | undefined {
  const v = flags[name];
  return typeof v === 'string' ? v : undefined;
}

/** A number flag's value, checked to be an integer in [min, max]. */
export function int(flags: FlagValues, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new UsageError(`--${name} must be an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`);
  }
  return v;
}

export function bool(flags: FlagValues, name: string): boolean {
  return flags[name] === true;
}
