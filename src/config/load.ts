/**
 * Parses the environment once against SCHEMA into a validated, deep-frozen Config. No other
 * module reads process.env: components receive the Config (or the part they need).
 */
import { cpus, homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { formatAddress, isLoopbackHost } from './parsers.js';
import { SCHEMA, type Config, type DefaultsContext, type SchemaKey } from './schema.js';
import { errorMessage } from '../util/error-message.js';

/** Start-up stops with this error; its message names every offending variable. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export function defaultsContextFromProcess(): DefaultsContext {
  return {
    cpuCount: cpus().length,
    stdoutIsTty: process.stdout.isTTY,
    homeDir: homedir(),
    xdgStateHome: process.env['XDG_STATE_HOME'] || undefined,
  };
}

/**
 * @param env the environment (process.env in production, a literal in tests)
 * @param ctx inputs of computed defaults
 * @throws ConfigError naming each invalid variable
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, ctx: DefaultsContext = defaultsContextFromProcess()): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(SCHEMA) as SchemaKey[]) {
    const e = SCHEMA[key];
    const given = env[key];
    const raw = given !== undefined && given !== '' ? given : typeof e.defaultRaw === 'function' ? e.defaultRaw(ctx) : e.defaultRaw;
    if (raw === null) {
      out[e.field] = null;
      continue;
    }
    try {
      out[e.field] = e.parse(raw);
    } catch (err) {
      const reason = errorMessage(err);
      problems.push(
        given !== undefined ? `${key}=${e.secret === true ? '<hidden>' : JSON.stringify(given)}: ${reason}` : `${key} (default): ${reason}`,
      );
    }
  }
  if (problems.length === 0) {
    out['stateDir'] = absolutize(out['stateDir'] as string);
    out['secretsDir'] = out['secretsDir'] === null ? join(out['stateDir'] as string, 'secrets') : absolutize(out['secretsDir'] as string);
    if (out['logFile'] !== null) out['logFile'] = absolutize(out['logFile'] as string);
    out['storageDir'] = out['storageDir'] === null ? join(out['stateDir'] as string, 'storage') : absolutize(out['storageDir'] as string);
    if (out['agentStaleAfterSeconds'] === null) out['agentStaleAfterSeconds'] = 3 * (out['agentHeartbeatSeconds'] as number);
    checkPlaintextListeners(out, problems);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(out) as unknown as Config;
}

function absolutize(p: string): string {
  return isAbsolute(p) ? p : resolve(p);
}

/**
 * Security by default: HTTP, WS and the SSH connector's prelude are plaintext, so a non-loopback address is refused unless
 * the operator sets the explicit unsafe override. gRPC and the admin listener (SVC_ADMIN_ADDR) are
 * mTLS-only (every caller presents a certificate of our CA) and are exempt.
 */
function checkPlaintextListeners(out: Record<string, unknown>, problems: string[]): void {
  if (out['allowInsecureRemote'] === true) return;
  const plaintext: readonly [SchemaKey, string][] = [
    ['SVC_HTTP_ADDR', 'httpAddr'],
    ['SVC_WS_ADDR', 'wsAddr'],
    // The SSH stream is encrypted end to end, but the prelude's actor is a plaintext claim checked
    // only against leases: off loopback that exposes every leased sshd's login to the network.
    ['SVC_GATEWAY_SSH_LISTEN', 'gatewaySshListen'],
  ];
  for (const [key, field] of plaintext) {
    const addr = out[field] as { host: string; port: number } | null;
    if (addr !== null && !isLoopbackHost(addr.host)) {
      problems.push(
        `${key}=${formatAddress(addr)}: plaintext listener on a non-loopback address is refused; ` +
          'use a loopback address with a tunnel, or set SVC_ALLOW_INSECURE_REMOTE=1 (unsafe)',
      );
    }
  }
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const inner of Object.values(v as object)) deepFreeze(inner);
  }
  return v;
}

/** Rows of the configuration table (README, --help): one per variable. */
export function configTableRows(): { name: string; default: string; meaning: string }[] {
  return (Object.keys(SCHEMA) as SchemaKey[]).map((k) => ({ name: k, default: SCHEMA[k].defaultText, meaning: SCHEMA[k].doc }));
}

/** The README's Markdown table, generated from the schema. */
export function configMarkdownTable(): string {
  const rows = configTableRows().map((r) => `| \`${r.name}\` | ${r.default} | ${r.meaning} |`);
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
