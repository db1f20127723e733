#!/usr/bin/env node
/**
 * The sbx CLI: `sbx <noun> <verb>` against a sandboxd server (src/cli/run.ts; `sbx --help`).
 * Wires the process: streams, environment, Ctrl-C/SIGTERM, terminal resize, WebSocket.
 */
import { readCliEnv } from '../cli/config.js';
import { loadNodeWebSocket } from '../cli/node-websocket.js';
import { runCli } from '../cli/run.js';

function onSignals(signals: readonly NodeJS.Signals[], handler: () => void): () => void {
  for (const s of signals) process.on(s, handler);
  return () => {
    for (const s of signals) process.off(s, handler);
  };
}

// A reader that goes away (`sbx events tail | head`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: readCliEnv(),
  onInterrupt: (handler) => onSignals(['SIGINT', 'SIGTERM', 'SIGHUP'], handler),
  onResize: (handler) => {
    process.stdout.on('resize', handler);
    return () => process.stdout.off('resize', handler);
  },
  webSocket: loadNodeWebSocket,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`sbx: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
