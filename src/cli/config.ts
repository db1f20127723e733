/**
 * sbx settings: the contexts file, the environment, and how a command's server and actor are
 * resolved. The only CLI module that reads process.env (readCliEnv); everything else receives
 * a CliEnv, so tests pass their own.
 *
 * Contexts file: `$XDG_CONFIG_HOME/sbx/config.json`, else `~/.config/sbx/config.json`
 * (directory 0700, file 0600, written atomically: temp file, fsync, rename):
 *
 *   {"version": 1, "current": "lab",
 *    "contexts": {"lab": {"server": "http://10.0.0.5:8122", "ws": "ws://10.0.0.5:8122", "role": "operator", "actor": "alice"}}}
 *
 * Server: --server, SBX_SERVER, the context's server, http://127.0.0.1:8122.
 * Context: --context, SBX_CONTEXT, the file's current one (none: the built-in `default`).
 * Actor (spec 4.14): --actor, SVC_GATEWAY_SSH_ACTOR, the context's actor, the context's role,
 * the OS user — in that order (the context's `actor` is our addition, ahead of its role).
 */
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';

export const DEFAULT_SERVER = 'http://127.0.0.1:8122';
export const DEFAULT_CONTEXT_NAME = 'default';
const CONTEXT_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The environment variables sbx reads. */
export interface CliEnv {
  SBX_CONTEXT?: string | undefined;
  SBX_SERVER?: string | undefined;
  SVC_GATEWAY_SSH_ACTOR?: string | undefined;
  /** Folder of an operator certificate (ca.pem, operator.pem, operator-key.pem) for an https:// server. */
  SBX_OPERATOR_CERTS?: string | undefined;
  /** sbx ssh: the connector's address (default 127.0.0.1:8124). */
  SVC_GATEWAY_SSH_CONNECT?: string | undefined;
  XDG_CONFIG_HOME?: string | undefined;
  HOME?: string | undefined;
  USER?: string | undefined;
  LOGNAME?: string | undefined;
  NO_COLOR?: string | undefined;
  TERM?: string | undefined;
  /** sbx mission dispatch: the executor's dispatch bearer token (never a flag). */
  SBX_EXECUTOR_TOKEN?: string | undefined;
}

/** Reads the variables of CliEnv from the process environment. */
export function readCliEnv(): CliEnv {
  const e = process.env;
  return {
    SBX_CONTEXT: e['SBX_CONTEXT'],
    SBX_SERVER: e['SBX_SERVER'],
    SVC_GATEWAY_SSH_ACTOR: e['SVC_GATEWAY_SSH_ACTOR'],
    SVC_GATEWAY_SSH_CONNECT: e['SVC_GATEWAY_SSH_CONNECT'],
    SBX_OPERATOR_CERTS: e['SBX_OPERATOR_CERTS'],
    XDG_CONFIG_HOME: e['XDG_CONFIG_HOME'],
    HOME: e['HOME'],
    USER: e['USER'],
    LOGNAME: e['LOGNAME'],
    NO_COLOR: e['NO_COLOR'],
    TERM: e['TERM'],
    SBX_EXECUTOR_TOKEN: e['SBX_EXECUTOR_TOKEN'],
  };
}

export interface SbxContext {
  server: string;
  /** Base of WebSocket URLs (pty-ws.v1); default: the server's URL with ws(s)://. */
  ws?: string;
  role?: string;
  actor?: string;
}

export interface SbxConfigFile {
  version: 1;
  current: string | null;
  contexts: Record<string, SbxContext>;
}

/** A bad contexts file or a bad value for it (exit code 2). */
export class ConfigFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigFileError';
  }
}

const set = (v: string | undefined): v is string => v !== undefined && v !== '';

/** Path of the contexts file. */
export function configPath(env: CliEnv): string {
  const base = set(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(set(env.HOME) ? env.HOME : homedir(), '.config');
  return join(base, 'sbx', 'config.json');
}

export function emptyConfig(): SbxConfigFile {
  return { version: 1, current: null, contexts: {} };
}

/** Checks a context name; throws ConfigFileError. */
export function checkContextName(name: string): string {
  if (!CONTEXT_NAME_RE.test(name)) throw new ConfigFileError(`context name ${JSON.stringify(name)} must match ${CONTEXT_NAME_RE.source}`);
  return name;
}

/** Checks an http(s) or ws(s) base URL and returns it without a trailing slash. */
export function checkUrl(value: string, what: 'server' | 'ws'): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigFileError(
      `${what} ${JSON.stringify(value)} is not a URL (example: ${what === 'server' ? DEFAULT_SERVER : 'ws://127.0.0.1:8122'})`,
    );
  }
  const schemes = what === 'server' ? ['http:', 'https:'] : ['ws:', 'wss:'];
  if (!schemes.includes(u.protocol)) throw new ConfigFileError(`${what} URL must start with ${schemes.map((s) => `${s}//`).join(' or ')}`);
  if (u.search !== '' || u.hash !== '') throw new ConfigFileError(`${what} URL must not have a query or fragment`);
  return value.replace(/\/+$/, '');
}

function validate(raw: unknown, path: string): SbxConfigFile {
  const bad = (why: string): never => {
    throw new ConfigFileError(`${path}: ${why}`);
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return bad('must be a JSON object');
  const o = raw as Record<string, unknown>;
  if (o['version'] !== 1) bad('version must be 1');
  const current = o['current'] ?? null;
  if (current !== null && typeof current !== 'string') bad('current must be a context name or null');
  const ctxs = o['contexts'] ?? {};
  if (typeof ctxs !== 'object' || ctxs === null || Array.isArray(ctxs)) return bad('contexts must be an object');
  const out: SbxConfigFile = { version: 1, current: current as string | null, contexts: {} };
  for (const [name, v] of Object.entries(ctxs as Record<string, unknown>)) {
    if (!CONTEXT_NAME_RE.test(name)) bad(`context name ${JSON.stringify(name)} is invalid`);
    if (typeof v !== 'object' || v === null) return bad(`contexts.${name} must be an object`);
    const c = v as Record<string, unknown>;
    if (typeof c['server'] !== 'string') bad(`contexts.${name}.server must be a URL string`);
    const ctx: SbxContext = { server: c['server'] as string };
    for (const k of ['ws', 'role', 'actor'] as const) {
      const f = c[k];
      if (f === undefined || f === null) continue;
      if (typeof f !== 'string') bad(`contexts.${name}.${k} must be a string`);
      ctx[k] = f as string;
    }
    out.contexts[name] = ctx;
  }
  return out;
}

/** Reads the contexts file; a missing file is an empty configuration. */
export async function loadConfigFile(path: string): Promise<SbxConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return emptyConfig();
    throw new ConfigFileError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigFileError(`${path}: not valid JSON (${(err as Error).message})`);
  }
  return validate(raw, path);
}

/** Writes the contexts file atomically with mode 0600 (its directory 0700). */
export async function saveConfigFile(path: string, cfg: SbxConfigFile): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  const fh = await open(tmp, 'wx', 0o600);
  try {
    await fh.writeFile(`${JSON.stringify(cfg, null, 2)}\n`, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Global flags that change settings. */
export interface SettingFlags {
  context?: string | undefined;
  server?: string | undefined;
  actor?: string | undefined;
}

export type ActorSource = '--actor' | 'SVC_GATEWAY_SSH_ACTOR' | 'context actor' | 'context role' | 'OS user';

export interface ResolvedSettings {
  contextName: string;
  /** False for the built-in default context (not in the file). */
  contextSaved: boolean;
  context: SbxContext;
  server: string;
  serverSource: '--server' | 'SBX_SERVER' | 'context' | 'default';
  /** WebSocket base URL. */
  ws: string;
  actor: string;
  actorSource: ActorSource;
}

/** The OS user's name (userInfo, else USER/LOGNAME, else `unknown`). */
export function osUser(env: CliEnv): string {
  try {
    const name = userInfo().username;
    if (name !== '') return name;
  } catch {
    // No passwd entry (containers): fall back to the environment.
  }
  return set(env.USER) ? env.USER : set(env.LOGNAME) ? env.LOGNAME : 'unknown';
}

/** The actor per the spec's order (see the file comment). */
export function resolveActor(
  flags: SettingFlags,
  env: CliEnv,
  ctx: SbxContext | undefined,
  os: () => string,
): { actor: string; source: ActorSource } {
  if (set(flags.actor)) return { actor: flags.actor, source: '--actor' };
  if (set(env.SVC_GATEWAY_SSH_ACTOR)) return { actor: env.SVC_GATEWAY_SSH_ACTOR, source: 'SVC_GATEWAY_SSH_ACTOR' };
  if (set(ctx?.actor)) return { actor: ctx.actor, source: 'context actor' };
  if (set(ctx?.role)) return { actor: ctx.role, source: 'context role' };
  return { actor: os(), source: 'OS user' };
}

/** Resolves context, server, ws and actor. Throws ConfigFileError for an unknown context or a bad URL. */
export function resolveSettings(
  flags: SettingFlags,
  env: CliEnv,
  file: SbxConfigFile,
  os: () => string = () => osUser(env),
): ResolvedSettings {
  const requested = set(flags.context) ? flags.context : set(env.SBX_CONTEXT) ? env.SBX_CONTEXT : (file.current ?? undefined);
  let contextName = DEFAULT_CONTEXT_NAME;
  let context: SbxContext = { server: DEFAULT_SERVER };
  let contextSaved = false;
  if (requested !== undefined) {
    const found = file.contexts[requested];
    if (found !== undefined) {
      contextName = requested;
      context = found;
      contextSaved = true;
    } else if (requested !== DEFAULT_CONTEXT_NAME) {
      const known = Object.keys(file.contexts);
      throw new ConfigFileError(
        `no context named ${JSON.stringify(requested)}${known.length > 0 ? ` (known: ${known.join(', ')})` : ' (create one with sbx context set)'}`,
      );
    }
  }
  let server: string;
  let serverSource: ResolvedSettings['serverSource'];
  if (set(flags.server)) [server, serverSource] = [checkUrl(flags.server, 'server'), '--server'];
  else if (set(env.SBX_SERVER)) [server, serverSource] = [checkUrl(env.SBX_SERVER, 'server'), 'SBX_SERVER'];
  else if (contextSaved) [server, serverSource] = [checkUrl(context.server, 'server'), 'context'];
  else [server, serverSource] = [DEFAULT_SERVER, 'default'];
  // An explicit server elsewhere than the context's makes the context's ws base meaningless.
  const ws = set(context.ws) && serverSource === 'context' ? checkUrl(context.ws, 'ws') : server.replace(/^http(s?):/i, 'ws$1:');
  const { actor, source } = resolveActor(flags, env, contextSaved ? context : undefined, os);
  return { contextName, contextSaved, context, server, serverSource, ws, actor, actorSource: source };
}
