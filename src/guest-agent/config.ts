/**
 * sandbox-agent configuration: flags, with environment variables as the fallback, parsed once into
 * a deep-frozen AgentConfig. No other agent module reads process.env; the environment children
 * inherit is carried here too (childEnv).
 *
 * Precedence: flag > environment variable > default. `--flag value` and `--flag=value` both work.
 */
import { isAbsolute, resolve } from 'node:path';
import {
  ConfigValueError,
  parseBytes,
  parseEnum,
  parseIntInRange,
  parseListenAddress,
  parseNonEmpty,
  parsePairs,
  type ListenAddress,
} from '../config/parsers.js';

/** Log levels pino knows, plus silent. */
export const AGENT_LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type AgentLogLevel = (typeof AGENT_LOG_LEVELS)[number];

export interface AgentConfig {
  /** sandboxd's gRPC listener. */
  readonly server: ListenAddress;
  /** Folder holding ca.pem, agent.pem and agent-key.pem (with a bootstrap token file: where enrollment writes them). */
  readonly certsDir: string;
  /**
   * Staged bootstrap material (README "Secure bootstrap"): when set, the agent first enrolls with
   * its single-use token (enroll.ts), writes the certificate into certsDir and deletes the file.
   * agentId and instanceId then default to the material's. Absolute; null without.
   */
  readonly bootstrapTokenFile: string | null;
  /**
   * A file that will hold bootstrap material later (a qemu guest's fw_cfg file, replaced when a
   * pre-enrollment checkpoint is restored): the agent polls it until it parses as material, copies
   * it to bootstrapTokenFile (required with it) and enrolls (bootstrap-wait.ts). Absolute; null without.
   */
  readonly bootstrapWait: string | null;
  /**
   * What the VM's loadout and profile give it (a built image's fw_cfg copy, JSON): applied to the
   * work directory once per material at start, its environment added to childEnv
   * (src/core/loadout-apply.ts). A missing or empty file is no loadout. Absolute; null without.
   */
  readonly loadoutFile: string | null;
  /** Human agent name (AgentRegistration.agent_id, metadata x-agent-id). */
  readonly agentId: string;
  /** Instance id; must equal the certificate's spiffe://<td>/agent/<instance_id>. */
  readonly instanceId: string;
  readonly profile: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Default working directory of commands, and the filesystem disk metrics describe. Absolute. */
  readonly workDir: string;
  /** TLS server name checked against the server certificate. Default: the server host, or `localhost` when it is an IP. */
  readonly tlsServerName: string;
  readonly logFormat: 'json' | 'pretty';
  readonly logLevel: AgentLogLevel;
  /** Bound of output kept while the server is unreachable or slow, in bytes. Default 64 MiB. */
  readonly outputBufferBytes: number;
  /** Between SIGTERM and SIGKILL when a command times out or is killed, in ms. Default 5000. */
  readonly killGraceMs: number;
  /** Longest wait between reconnect attempts, in ms. Default 30000. */
  readonly reconnectMaxMs: number;
  /**
   * `stdin`: stop as on SIGTERM when standard input reaches its end. A local agent's stdin is a
   * pipe from the sandboxd that started it, and the pipe closes however sandboxd ends, killed
   * included, so its agents do not outlive it (src/vms/local-agents.ts). Null: stdin is ignored.
   */
  readonly exitWith: 'stdin' | null;
  /** Environment handed to commands (the agent's own, minus SANDBOX_AGENT_*), before CommandRequest.env. */
  readonly childEnv: Readonly<Record<string, string>>;
}

/** A bad or missing setting; `flag` names the flag to fix. The binary prints it and exits 2. */
export class AgentConfigError extends Error {
  override readonly name = 'AgentConfigError';
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
  }
}

/** Raised for --help: the caller prints AGENT_USAGE and exits 0. */
export class AgentHelpRequested extends Error {
  override readonly name = 'AgentHelpRequested';
}

type Key =
  | keyof Omit<AgentConfig, 'childEnv' | 'tlsServerName' | 'bootstrapTokenFile' | 'bootstrapWait'>
  | 'tlsServerName'
  | 'bootstrapTokenFile'
  | 'bootstrapWait';

/** Settings that may be absent (no default). */
const OPTIONAL: readonly Key[] = ['tlsServerName', 'bootstrapTokenFile', 'bootstrapWait', 'loadoutFile', 'exitWith'];

/** Required settings a bootstrap token file supplies when they are not given. */
const FROM_BOOTSTRAP: readonly Key[] = ['agentId', 'instanceId'];

interface Option {
  readonly key: Key;
  readonly flag: string;
  readonly env: string;
  readonly arg: string;
  readonly doc: string;
  /** Raw default; undefined = required (or computed). */
  readonly defaultRaw?: (cwd: string) => string;
  readonly parse: (raw: string) => unknown;
}

function parseLabels(raw: string): Readonly<Record<string, string>> {
  if (raw.trim() === '') return Object.freeze({});
  return Object.freeze(Object.fromEntries(parsePairs(raw)));
}

function parseId(raw: string): string {
  const v = parseNonEmpty(raw);
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(v)) {
    throw new ConfigValueError(`"${raw}" must be 1-128 characters of letters, digits, '.', '_', ':' or '-'`);
  }
  return v;
}

const OPTIONS: readonly Option[] = [
  {
    key: 'server',
    flag: '--server',
    env: 'SANDBOX_AGENT_SERVER',
    arg: 'HOST:PORT',
    doc: "sandboxd's gRPC address (required)",
    parse: parseListenAddress,
  },
  {
    key: 'certsDir',
    flag: '--certs',
    env: 'SANDBOX_AGENT_CERTS',
    arg: 'DIR',
    doc: 'folder with ca.pem, agent.pem, agent-key.pem (required)',
    parse: parseNonEmpty,
  },
  {
    key: 'bootstrapTokenFile',
    flag: '--bootstrap-token-file',
    env: 'SANDBOX_AGENT_BOOTSTRAP_TOKEN_FILE',
    arg: 'FILE',
    doc: 'staged bootstrap material: enroll once with its single-use token, write the certificate into --certs, delete FILE',
    parse: parseNonEmpty,
  },
  {
    key: 'bootstrapWait',
    flag: '--bootstrap-wait',
    env: 'SANDBOX_AGENT_BOOTSTRAP_WAIT',
    arg: 'FILE',
    doc: 'wait until FILE (a fw_cfg file) holds bootstrap material, copy it to --bootstrap-token-file, then enroll',
    parse: parseNonEmpty,
  },
  {
    key: 'loadoutFile',
    flag: '--loadout-file',
    env: 'SANDBOX_AGENT_LOADOUT_FILE',
    arg: 'FILE',
    doc: "the VM's loadout material (JSON): files written under --work-dir once, environment given to commands; missing or empty = none",
    parse: parseNonEmpty,
  },
  { key: 'agentId', flag: '--agent-id', env: 'SANDBOX_AGENT_ID', arg: 'NAME', doc: 'agent name (required)', parse: parseId },
  {
    key: 'instanceId',
    flag: '--instance-id',
    env: 'SANDBOX_AGENT_INSTANCE_ID',
    arg: 'ID',
    doc: "instance id in the certificate's SPIFFE id (required)",
    parse: parseId,
  },
  {
    key: 'profile',
    flag: '--profile',
    env: 'SANDBOX_AGENT_PROFILE',
    arg: 'NAME',
    doc: 'profile reported at registration',
    defaultRaw: () => 'basic',
    parse: parseNonEmpty,
  },
  {
    key: 'labels',
    flag: '--labels',
    env: 'SANDBOX_AGENT_LABELS',
    arg: 'k=v,k2=v2',
    doc: 'labels reported at registration',
    defaultRaw: () => '',
    parse: parseLabels,
  },
  {
    key: 'workDir',
    flag: '--work-dir',
    env: 'SANDBOX_AGENT_WORK_DIR',
    arg: 'DIR',
    doc: 'default command directory; disk metrics describe its filesystem',
    defaultRaw: (cwd) => cwd,
    parse: parseNonEmpty,
  },
  {
    key: 'tlsServerName',
    flag: '--tls-server-name',
    env: 'SANDBOX_AGENT_TLS_SERVER_NAME',
    arg: 'NAME',
    doc: 'name expected in the server certificate (default: the host, or localhost for an IP)',
    parse: parseNonEmpty,
  },
  {
    key: 'logFormat',
    flag: '--log-format',
    env: 'SANDBOX_AGENT_LOG_FORMAT',
    arg: 'json|pretty',
    doc: 'log format on stderr',
    defaultRaw: () => 'json',
    parse: parseEnum(['json', 'pretty'] as const),
  },
  {
    key: 'logLevel',
    flag: '--log-level',
    env: 'SANDBOX_AGENT_LOG_LEVEL',
    arg: 'LEVEL',
    doc: AGENT_LOG_LEVELS.join(', '),
    defaultRaw: () => 'info',
    parse: parseEnum(AGENT_LOG_LEVELS),
  },
  {
    key: 'outputBufferBytes',
    flag: '--output-buffer',
    env: 'SANDBOX_AGENT_OUTPUT_BUFFER',
    arg: 'SIZE',
    doc: 'output kept while disconnected (e.g. 64MiB); oldest dropped first',
    defaultRaw: () => '64MiB',
    parse: parseBytes(64 * 1024, 16 * 1024 ** 3),
  },
  {
    key: 'killGraceMs',
    flag: '--kill-grace-ms',
    env: 'SANDBOX_AGENT_KILL_GRACE_MS',
    arg: 'MS',
    doc: 'SIGTERM to SIGKILL delay on timeout and kill',
    defaultRaw: () => '5000',
    parse: parseIntInRange(0, 600_000),
  },
  {
    key: 'reconnectMaxMs',
    flag: '--reconnect-max-ms',
    env: 'SANDBOX_AGENT_RECONNECT_MAX_MS',
    arg: 'MS',
    doc: 'longest reconnect backoff (starts at 500 ms, doubles, full jitter)',
    defaultRaw: () => '30000',
    parse: parseIntInRange(100, 3_600_000),
  },
  {
    key: 'exitWith',
    flag: '--exit-with',
    env: 'SANDBOX_AGENT_EXIT_WITH',
    arg: 'stdin',
    doc: 'stop gracefully when standard input ends (a pipe from the process that started the agent: it closes when that process ends, even killed)',
    parse: (raw) => {
      if (raw !== 'stdin') throw new ConfigValueError(`"${raw}" must be stdin`);
      return raw;
    },
  },
];

/** --help text, generated from the option table. */
export const AGENT_USAGE: string = (() => {
  const rows = OPTIONS.map(
    (o) => [`${o.flag} ${o.arg}`, o.env, o.doc + (o.defaultRaw && o.key !== 'workDir' ? ` [${o.defaultRaw('') || 'none'}]` : '')] as const,
  );
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  const lines = rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`);
  return [
    'usage: sandbox-agent --server HOST:PORT --certs DIR --agent-id NAME --instance-id ID [options]',
    '       sandbox-agent --server HOST:PORT --certs DIR --bootstrap-token-file FILE [--bootstrap-wait FILE] [options]',
    '',
    'Runs inside a sandbox VM: dials sandboxd over gRPC with mTLS, registers, sends heartbeats and',
    'metrics, runs commands and PTYs and streams their output. SIGTERM/SIGINT stop it gracefully.',
    '',
    'options (flag, environment variable, meaning [default]):',
    ...lines,
    '  --help, -h',
    '',
  ].join('\n');
})();

function splitArgv(argv: readonly string[]): Map<string, string> {
  const byFlag = new Map(OPTIONS.map((o) => [o.flag, o]));
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--help' || a === '-h') throw new AgentHelpRequested('help requested');
    const eq = a.indexOf('=');
    const flag = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    const opt = byFlag.get(flag);
    if (!opt) throw new AgentConfigError(a, `unknown argument "${a}" (see --help)`);
    let value: string | undefined;
    if (flag !== a) value = a.slice(eq + 1);
    else {
      value = argv[i + 1];
      i += 1;
      if (value === undefined) throw new AgentConfigError(flag, `${flag} needs a value (${opt.arg})`);
    }
    if (out.has(flag)) throw new AgentConfigError(flag, `${flag} given twice`);
    out.set(flag, value);
  }
  return out;
}

function deepFreeze<T extends object>(o: T): Readonly<T> {
  for (const v of Object.values(o)) if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) deepFreeze(v as object);
  return Object.freeze(o);
}

/**
 * Parses flags (argv without node and the script) over env. Throws AgentConfigError naming the
 * flag for a bad or missing value, AgentHelpRequested for --help.
 * @param cwd default of --work-dir and base of a relative one.
 */
export function parseAgentConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, cwd: string): AgentConfig {
  const flags = splitArgv(argv);
  const values: Partial<Record<Key, unknown>> = {};
  for (const o of OPTIONS) {
    const fromFlag = flags.get(o.flag);
    const fromEnv = env[o.env];
    const raw = fromFlag ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : undefined) ?? o.defaultRaw?.(cwd);
    if (raw === undefined) {
      if (OPTIONAL.includes(o.key)) continue;
      if (
        FROM_BOOTSTRAP.includes(o.key) &&
        (flags.get('--bootstrap-token-file') ?? env['SANDBOX_AGENT_BOOTSTRAP_TOKEN_FILE'] ?? '') !== ''
      ) {
        values[o.key] = '';
        continue;
      }
      throw new AgentConfigError(o.flag, `${o.flag} (or ${o.env}) is required: ${o.doc}`);
    }
    try {
      values[o.key] = o.parse(raw);
    } catch (err) {
      if (!(err instanceof ConfigValueError)) throw err;
      const source = fromFlag !== undefined ? o.flag : o.env;
      throw new AgentConfigError(o.flag, `${source}: ${err.message}`);
    }
  }
  if (values.bootstrapWait !== undefined && values.bootstrapTokenFile === undefined) {
    throw new AgentConfigError('--bootstrap-wait', '--bootstrap-wait needs --bootstrap-token-file (where the material is copied to)');
  }
  const server = values.server as ListenAddress;
  const workDirRaw = values.workDir as string;
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !k.startsWith('SANDBOX_AGENT_')) childEnv[k] = v;
  const isIp = /^[\d.]+$/.test(server.host) || server.host.includes(':');
  const cfg: AgentConfig = {
    server,
    certsDir: resolve(cwd, values.certsDir as string),
    bootstrapTokenFile: values.bootstrapTokenFile === undefined ? null : resolve(cwd, values.bootstrapTokenFile as string),
    bootstrapWait: values.bootstrapWait === undefined ? null : resolve(cwd, values.bootstrapWait as string),
    loadoutFile: values.loadoutFile === undefined ? null : resolve(cwd, values.loadoutFile as string),
    agentId: values.agentId as string,
    instanceId: values.instanceId as string,
    profile: values.profile as string,
    labels: values.labels as Record<string, string>,
    workDir: isAbsolute(workDirRaw) ? workDirRaw : resolve(cwd, workDirRaw),
    tlsServerName: (values.tlsServerName as string | undefined) ?? (isIp ? 'localhost' : server.host),
    logFormat: values.logFormat as 'json' | 'pretty',
    logLevel: values.logLevel as AgentLogLevel,
    outputBufferBytes: values.outputBufferBytes as number,
    killGraceMs: values.killGraceMs as number,
    reconnectMaxMs: values.reconnectMaxMs as number,
    exitWith: values.exitWith === undefined ? null : 'stdin',
    childEnv,
  };
  return deepFreeze(cfg);
}

/**
 * The config with the identity of bootstrap material: agentId and instanceId default to the
 * material's; given ones must equal it (AgentConfigError otherwise: the wrong file for this agent).
 */
export function withBootstrapIdentity(cfg: AgentConfig, material: { agent_id: string; instance_id: string }): AgentConfig {
  const pick = (key: 'agentId' | 'instanceId', flag: string, fromMaterial: string): string => {
    const given = cfg[key];
    if (given !== '' && given !== fromMaterial)
      throw new AgentConfigError(flag, `${flag} ${given} differs from the bootstrap material's ${fromMaterial}`);
    return parseId(fromMaterial);
  };
  return deepFreeze({
    ...cfg,
    agentId: pick('agentId', '--agent-id', material.agent_id),
    instanceId: pick('instanceId', '--instance-id', material.instance_id),
  });
}
