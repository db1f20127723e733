/**
 * The process logger (spec part 1: LOG_FORMAT, LOG_LEVEL, LOG_FILE, LOG_FILE_ROTATION,
 * LOG_FILE_RETENTION_DAYS), on pino. Made once in main and passed down; modules bind ids with
 * plain pino children (`logger.child({ agent_id })`).
 *
 * Data path: pino's JSON line → redactText → format (json: as is; pretty: pino-pretty's
 * synchronous prettyFactory; compact: formatCompactLine) → sink (asynchronous sonic-boom writes,
 * so a slow terminal or disk never blocks the event loop). No worker thread, no transport to
 * start or to lose records in.
 *
 * Secrets never reach the output, in three layers: pino's compiled `redact` for common shallow
 * paths (it also covers `%j` interpolation and mixins, which no hook sees); a key walk over every
 * logged object, binding and error at any depth (redactKeys); a scrub of the final text for PEM
 * blocks, bearer tokens, JWTs and URL credentials, messages and stacks included (redactText).
 *
 * Every error- and fatal-level line is counted (STYLE point 6: an error that is logged also bumps
 * a metric): the same logMethod hook that walks the arguments bumps the counters attached with
 * countErrorLines, so call sites only log. The hook sits on the root logger and every child
 * inherits it, which also covers the lines worker shards forward to the main logger.
 */
import { accessSync, constants, mkdirSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pino, stdSerializers } from 'pino';
import type { Bindings, DestinationStream, LogFn, Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import { SvcError } from '../core/errors.js';
import { errorMessage } from '../util/error-message.js';

/** Logger settings, as parsed from the LOG_* variables by src/config. */
export interface LogConfig {
  /** pretty (human, colour on a terminal), json (pino NDJSON) or compact (one short line). */
  format: 'pretty' | 'json' | 'compact';
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
  /** Log to this file instead of stdout; null logs to stdout. */
  file: string | null;
  /** daily: roll `file` every day (with `file` set); none: one file, appended to. */
  rotation: 'daily' | 'none';
  /** With daily rotation, how many rotated files (days) are kept besides the active one. Default 7. */
  retentionDays: number;
}

/** What createLogger returns. */
export interface LogHandle {
  logger: Logger;
  /**
   * Resolves once every record logged so far has been handed to the OS (file or stdout).
   * Rejects with SvcError `server.timeout` when that takes longer than `timeoutMs`
   * (default 5000 ms), e.g. because stdout's reader stopped reading.
   */
  flush(timeoutMs?: number): Promise<void>;
}

/** What counts error lines: prom-client's `Counter<'component'>` (svc_errors_logged_total) fits. */
export interface ErrorLineCounter {
  inc(labels: { component: string }): void;
}

/** Label of a counted line whose logger and fields name no component (the composition root's own lines). */
export const ERROR_COMPONENT_NONE = 'main';
/** Label of a counted line whose component is not a plain module name (keeps the label set bounded). */
export const ERROR_COMPONENT_OTHER = 'other';
const COMPONENT_RE = /^[a-z][a-z0-9_.-]{0,39}$/;
/** Where a logger made by createLogger keeps its error counters; children inherit it. */
const kErrorCounters = Symbol('sandboxd.errorCounters');
/** pino's number for the error level; fatal is 60. */
const kErrorLevel = 50;

/** What a redacted value is replaced with. */
export const REDACTED = '[REDACTED]';

/** Keys whose values are secrets, compared after lower-casing and dropping `_` and `-`. */
const SECRET_KEYS = new Set(['secrets', 'cookie', 'setcookie', 'authorization', 'proxyauthorization', 'credentials', 'cert']);
/** Key endings that mark a secret (agentToken, db_password, tls_key_pem, x-api-key, ...). */
const SECRET_SUFFIXES = ['password', 'passwd', 'passphrase', 'secret', 'token', 'apikey', 'privatekey', 'pem', 'certificate'];

/** The compiled shallow paths for pino's redact (the key walk covers deeper levels). */
const REDACT_PATHS = [
  'password',
  'passphrase',
  'secret',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'apiKey',
  'api_key',
  'privateKey',
  'private_key',
  'key_pem',
  'cert_pem',
  'certificate',
  'authorization',
  'cookie',
]
  .flatMap((k) => [k, `*.${k}`])
  .concat([
    'headers.authorization',
    'headers.cookie',
    'headers["set-cookie"]',
    '*.headers.authorization',
    '*.headers.cookie',
    '*.headers["set-cookie"]',
  ]);

/**
 * Objects nested deeper than this are replaced by a marker rather than left unchecked (this also
 * ends reference cycles); real log records are far shallower.
 */
const MAX_WALK_DEPTH = 16;

function isSecretKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[-_]/g, '');
  return SECRET_KEYS.has(k) || SECRET_SUFFIXES.some((s) => k.endsWith(s));
}

/**
 * Returns `value` with every property whose key names a secret replaced by REDACTED, at any depth.
 * Copy-on-write: the caller's objects are never modified and are returned as-is when clean.
 */
export function redactKeys(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || value instanceof Date) return value;
  if (depth > MAX_WALK_DEPTH) return `[nested deeper than ${MAX_WALK_DEPTH}]`;
  if (value instanceof Error) return redactKeys(stdSerializers.err(value), depth);
  // what JSON.stringify would write is what must be clean
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return redactKeys((value as { toJSON(): unknown }).toJSON(), depth + 1);
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const r = redactKeys(v, depth + 1);
      if (r !== v) (copy ??= value.slice())[i] = r;
    }
    return copy ?? value;
  }
  const obj = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    const r = v !== undefined && v !== null && isSecretKey(key) ? REDACTED : redactKeys(v, depth + 1);
    if (r !== v) (copy ??= { ...obj })[key] = r;
  }
  return copy ?? value;
}

// A PEM block: lazily up to its END line without crossing a JSON string's closing quote; a block
// cut short (no END line) is consumed as far as base64, header and (escaped) newline text goes.
const PEM_RX = /-----BEGIN ([A-Z0-9 ]{1,64})-----(?:[^"]*?-----END \1-----|(?:[A-Za-z0-9+/=\s:,.-]|\\[nr])*)/g;
const BEARER_RX = /\b(Bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*/gi;
const JWT_RX = /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g;
/** user:password@ in a URL (database, proxy and git URLs). */
const URL_CREDENTIALS_RX = /(\/\/)[^/\s:@"]+:[^/\s@"]+@/g;

/**
 * Replaces PEM blocks (keys, certificates, requests), bearer tokens, JWTs and URL credentials in
 * free text with markers that name what was removed. Cheap when there is nothing to remove (a few
 * substring scans), so it runs on every log line; usable on any text that leaves the process.
 */
export function redactText(text: string): string {
  let out = text;
  if (out.includes('-----BEGIN ')) out = out.replace(PEM_RX, (_m, label: string) => `[REDACTED ${label.trim()}]`);
  if (/bearer/i.test(out)) out = out.replace(BEARER_RX, `$1 ${REDACTED}`);
  if (out.includes('eyJ')) out = out.replace(JWT_RX, '[REDACTED JWT]');
  if (out.includes('://')) out = out.replace(URL_CREDENTIALS_RX, `$1${REDACTED}@`);
  return out;
}

const LEVEL_LABELS: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields the compact format prints in fixed positions or leaves out. */
const COMPACT_FIXED = new Set(['time', 'level', 'msg', 'component', 'pid', 'hostname']);

function compactValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=\\]+$/.test(v) ? v : JSON.stringify(v);
  if (typeof v === 'object' && v !== null) {
    const e = v as { type?: unknown; message?: unknown };
    // errors as `Type: message`; the stack is for the json and pretty formats
    if (typeof e.message === 'string') return JSON.stringify(`${typeof e.type === 'string' ? e.type : 'Error'}: ${e.message}`);
    return JSON.stringify(v);
  }
  return String(v);
}

/**
 * The compact format: `HH:MM:SS.mmm LEVEL component msg key=value ...` on one line (time in UTC,
 * like the json `time`; component only when bound; strings quoted when they contain spaces,
 * quotes or `=`; objects as JSON; errors as `"Type: message"`). Input is one pino JSON line.
 */
export function formatCompactLine(jsonLine: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(jsonLine) as Record<string, unknown>;
  } catch {
    return jsonLine.endsWith('\n') ? jsonLine : `${jsonLine}\n`;
  }
  const time = typeof rec.time === 'number' ? new Date(rec.time).toISOString().slice(11, 23) : '--:--:--.---';
  const level = typeof rec.level === 'number' ? (LEVEL_LABELS[rec.level] ?? `L${rec.level}`) : 'INFO';
  const parts = [time, level.padEnd(5)];
  if (typeof rec.component === 'string') parts.push(rec.component);
  if (typeof rec.msg === 'string' && rec.msg !== '') parts.push(rec.msg.trimEnd().replace(/\r?\n/g, '\\n'));
  for (const [k, v] of Object.entries(rec)) if (!COMPACT_FIXED.has(k)) parts.push(`${k}=${compactValue(v)}`);
  return `${parts.join(' ')}\n`;
}

/** Where formatted lines go: a string writer that can report when all it took is written. */
interface Sink {
  write(line: string): void;
  flushed(): Promise<void>;
}

function reportSinkError(what: string, err: unknown): void {
  // the logger cannot log its own failure; stderr is the one channel left
  process.stderr.write(`sandboxd: logging to ${what} failed: ${errorMessage(err)}\n`);
}

/** A sonic-boom stream (pino.destination or pino-roll) with drain tracking for flushed(). */
function sonicSink(stream: ReturnType<typeof pino.destination>, what: string): Sink {
  let dirty = false;
  let reported = false;
  const waiters: (() => void)[] = [];
  const settle = (): void => {
    dirty = false;
    for (const w of waiters.splice(0)) w();
  };
  // async sonic-boom emits 'drain' every time its buffer has been written out completely
  stream.on('drain', settle);
  stream.on('error', (err: NodeJS.ErrnoException) => {
    settle();
    // EPIPE: stdout's reader went away (pino's destination stops writing); nothing to tell
    if (err.code !== 'EPIPE' && !reported) reportSinkError(what, err);
    reported = true;
  });
  return {
    write(line) {
      dirty = true;
      stream.write(line);
    },
    flushed: () => (dirty ? new Promise((r) => waiters.push(r)) : Promise.resolve()),
  };
}

/** A caller-supplied stream (tests, embedding); honours its backpressure signal for flushed(). */
function streamSink(stream: NodeJS.WritableStream): Sink {
  return {
    write(line) {
      stream.write(line);
    },
    flushed: () =>
      (stream as { writableNeedDrain?: boolean }).writableNeedDrain === true
        ? new Promise((r) => stream.once('drain', () => r()))
        : Promise.resolve(),
  };
}

// pino-roll ships no type declarations; this is the part of its API used here
type RollOptions = {
  file: string;
  frequency: 'daily';
  dateFormat: string;
  mkdir: boolean;
  sync: boolean;
  limit: { count: number; removeOtherLogFiles: boolean };
};
const buildRoll = createRequire(import.meta.url)('pino-roll') as (o: RollOptions) => Promise<ReturnType<typeof pino.destination>>;
/** Lines held while pino-roll opens its file; beyond this, startup lines are dropped. */
const MAX_PENDING_LINES = 10_000;

/** pino-roll opens its file asynchronously; lines logged meanwhile are queued, then replayed. */
function rollingSink(file: string, retentionDays: number): Sink {
  let target: Sink | undefined;
  let pending: string[] = [];
  const attach = (sink: Sink): void => {
    target = sink;
    for (const line of pending) sink.write(line);
    pending = [];
  };
  const ready = buildRoll({
    file,
    frequency: 'daily',
    dateFormat: 'yyyy-MM-dd',
    mkdir: true,
    sync: false,
    // removeOtherLogFiles: retention also covers files left by earlier runs of the server
    limit: { count: retentionDays, removeOtherLogFiles: true },
  }).then(
    (stream) => {
      // pino.destination flushes its own async streams at exit; do the same for this one
      process.once('exit', () => {
        try {
          stream.flushSync();
        } catch {
          /* nothing is left to report to at exit */
        }
      });
      attach(sonicSink(stream, file));
    },
    (err: unknown) => {
      reportSinkError(`${file} (logging to stderr instead)`, err);
      attach(streamSink(process.stderr));
    },
  );
  return {
    write(line) {
      if (target) target.write(line);
      else if (pending.length < MAX_PENDING_LINES) pending.push(line);
    },
    flushed: () => ready.then(() => target?.flushed()),
  };
}

/**
 * Prepares LOG_FILE now (directories created; the file opened for append, mode 0640, or with
 * rotation its directory checked for write access), so a bad path fails at startup with its name.
 */
function prepareLogFile(path: string, rotation: LogConfig['rotation']): number | null {
  try {
    mkdirSync(dirname(path), { recursive: true });
    if (rotation === 'daily') {
      accessSync(dirname(path), constants.W_OK);
      return null;
    }
    return openSync(path, 'a', 0o640);
  } catch (err) {
    throw new Error(`cannot open LOG_FILE ${path}: ${errorMessage(err)}`, { cause: err });
  }
}

function chooseSink(cfg: LogConfig, destination: NodeJS.WritableStream | undefined): Sink {
  if (destination) return streamSink(destination);
  if (cfg.file === null) return sonicSink(pino.destination({ dest: 1, sync: false }), 'stdout');
  const path = resolve(cfg.file);
  const fd = prepareLogFile(path, cfg.rotation);
  return fd === null ? rollingSink(path, cfg.retentionDays) : sonicSink(pino.destination({ dest: fd, sync: false }), path);
}

function chooseFormat(cfg: LogConfig, destination: NodeJS.WritableStream | undefined): (jsonLine: string) => string {
  if (cfg.format === 'compact') return formatCompactLine;
  if (cfg.format === 'json') return (line) => line;
  const out = destination ?? (cfg.file === null ? process.stdout : undefined);
  const colorize = (out as { isTTY?: boolean } | undefined)?.isTTY === true;
  return pinoPretty.prettyFactory({ colorize, translateTime: 'UTC:yyyy-mm-dd HH:MM:ss.l', ignore: 'pid,hostname' });
}

/**
 * The `component` label of an error line: the logged object's `component` field, else the
 * logger's `component` binding (`logger.child({ component: 'http' })`), else "main"; anything
 * that is not a short lower-case module name becomes "other".
 */
function componentOf(logger: Logger, args: readonly unknown[]): string {
  const first = args[0];
  let c: unknown =
    typeof first === 'object' && first !== null && !(first instanceof Error) ? (first as { component?: unknown }).component : undefined;
  if (typeof c !== 'string') c = logger.bindings()['component'];
  if (typeof c !== 'string') return ERROR_COMPONENT_NONE;
  return COMPONENT_RE.test(c) ? c : ERROR_COMPONENT_OTHER;
}

/**
 * Counts every error- and fatal-level line that `logger`, its root and every child of that root
 * write from now on into `counter`, labelled by component (see componentOf). Lines below the
 * logger's level are not written and not counted. Returns the function that detaches the counter
 * (idempotent). A logger not made by createLogger (a bare `pino()` in a test) has no hook: then
 * nothing is counted and the returned function does nothing.
 */
export function countErrorLines(logger: Logger, counter: ErrorLineCounter): () => void {
  const counters = (logger as unknown as { [kErrorCounters]?: Set<ErrorLineCounter> })[kErrorCounters];
  if (counters === undefined) return () => undefined;
  counters.add(counter);
  return () => {
    counters.delete(counter);
  };
}

/**
 * Builds the process logger.
 *
 * Output goes to LOG_FILE when it is set and to stdout otherwise, never both: an operator who
 * names a file expects stdout to stay quiet (and under systemd, not to double every line in the
 * journal). The file is opened (directories created, mode 0640, appended to) before this returns,
 * so a bad path throws here. With `rotation: 'daily'`, pino-roll writes `<name>.YYYY-MM-DD.N.<ext>`
 * next to `file` (e.g. sandboxd.log → sandboxd.2026-05-01.1.log), starts a new file at midnight
 * (local time) and keeps `retentionDays` rotated files, including ones left by earlier runs.
 * Colour (pretty only) is used only when the output is a terminal. Writes are asynchronous;
 * pending lines are written synchronously at process exit, and `flush()` awaits them at shutdown.
 *
 * @param opts.destination write formatted lines here instead (tests, embedding); overrides `file`.
 * @throws Error when LOG_FILE cannot be created or opened.
 */
export function createLogger(cfg: LogConfig, opts: { destination?: NodeJS.WritableStream } = {}): LogHandle {
  const sink = chooseSink(cfg, opts.destination);
  const format = chooseFormat(cfg, opts.destination);
  const dest: DestinationStream = { write: (line) => sink.write(format(redactText(line))) };
  const errorCounters = new Set<ErrorLineCounter>();
  const logger = pino(
    {
      level: cfg.level,
      redact: { paths: REDACT_PATHS, censor: REDACTED },
      // the logMethod hook has already turned errors inside logged objects into walked plain objects
      serializers: { err: (e: unknown) => (e instanceof Error ? redactKeys(e) : e) },
      formatters: { bindings: (b) => redactKeys(b) as Bindings },
      hooks: {
        logMethod(args: Parameters<LogFn>, method: LogFn, level: number) {
          if (level >= kErrorLevel && errorCounters.size > 0) {
            const component = componentOf(this, args);
            for (const c of errorCounters) c.inc({ component });
          }
          // a leading Error stays an Error: pino takes the message from it and the err serializer walks it
          const walked = args.map((a: unknown, i) => (i === 0 && a instanceof Error ? a : redactKeys(a))) as Parameters<LogFn>;
          method.apply(this, walked);
        },
      },
    },
    dest,
  );
  // children are created with Object.create(parent), so they all find the root's set
  Object.defineProperty(logger, kErrorCounters, { value: errorCounters });
  return {
    logger,
    flush(timeoutMs = 5000) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new SvcError('server.timeout', `log output not flushed within ${timeoutMs} ms`)),
          timeoutMs,
        ).unref();
      });
      return Promise.race([sink.flushed(), deadline]).finally(() => clearTimeout(timer));
    },
  };
}
