/**
 * What a command talks to: the process streams (injected, so tests use in-memory ones), the
 * output mode (--json or human, colour or not) and the resolved settings.
 */
import type { Readable, Writable } from 'node:stream';
import type { ApiClient } from '../client/api-client.js';
import type { WebSocketConstructor } from '../client/http-transport.js';
import type { CliEnv, ResolvedSettings } from './config.js';

/** A writable that may be a terminal. */
export type OutStream = Writable & { isTTY?: boolean; columns?: number; rows?: number };
/** A readable that may be a terminal (raw mode for attach). */
export type InStream = Readable & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };

export interface CliIo {
  readonly stdout: OutStream;
  readonly stderr: OutStream;
  readonly stdin: InStream;
  readonly env: CliEnv;
  /** Unix ms clock (relative times). Default Date.now. */
  readonly now?: () => number;
  /** SIGINT/SIGTERM hooks; the default (bin) installs process signal handlers. */
  readonly onInterrupt?: (handler: () => void) => () => void;
  /** SIGWINCH-style resize notifications of the terminal. */
  readonly onResize?: (handler: () => void) => () => void;
  /** The argv that runs this sbx again, node first (sbx ssh's ProxyCommand). Default: process.execPath and process.argv[1]. */
  readonly self?: readonly string[];
  /** Loads a WebSocket implementation (session attach). */
  readonly webSocket?: () => Promise<WebSocketConstructor>;
}

export interface CommandContext {
  readonly io: CliIo;
  readonly api: ApiClient;
  readonly settings: ResolvedSettings;
  readonly configPath: string;
  readonly json: boolean;
  /** Colour on stdout (a TTY, no NO_COLOR, no --no-color, not --json). */
  readonly color: boolean;
  /** stderr is a terminal: progress may redraw one line. */
  readonly stderrTty: boolean;
  /** Aborted on Ctrl-C / SIGTERM. */
  readonly signal: AbortSignal;
  now(): number;
  /** Writes a line (or lines) to stdout. */
  out(text: string): void;
  /** Writes a line to stderr. */
  err(text: string): void;
  /** Prints a value as JSON on stdout (one line when `compact`). */
  printJson(value: unknown, compact?: boolean): void;
}

export function writeText(stream: OutStream, text: string): void {
  stream.write(text.endsWith('\n') ? text : `${text}\n`);
}
