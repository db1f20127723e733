/**
 * The agent's logger: pino to stderr (stdout stays free), one JSON object per line by default,
 * or pino-pretty for humans. Synchronous writes: the agent logs little, and a line written just
 * before exit must not be lost.
 */
import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import type { AgentLogLevel } from './config.js';

// Loaded only when asked for: inside a TCG guest every module the agent loads at start costs
// about 30 times what it costs on the host, and the default format is JSON.
const require = createRequire(import.meta.url);

export type { Logger };

/** @param bindings fields on every line (agent id, instance id). */
export function createAgentLogger(format: 'json' | 'pretty', level: AgentLogLevel, bindings: Record<string, string>): Logger {
  const stream =
    format === 'pretty'
      ? (require('pino-pretty') as typeof PinoPretty)({ destination: 2, sync: true, colorize: false })
      : pino.destination({ dest: 2, sync: true });
  return pino({ level, base: { pid: process.pid, ...bindings }, timestamp: pino.stdTimeFunctions.isoTime }, stream);
}
