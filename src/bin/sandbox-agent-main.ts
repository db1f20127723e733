/**
 * The sandbox-agent program (runs inside each VM): parses the command line, starts the agent,
 * and exits when it stops. src/bin/sandbox-agent.ts runs it from the compiled tree; images ship
 * it as one bundle (src/image/agent-bundle.ts) whose loader calls `main` (src/image/agent-loader.ts).
 *
 *   sandbox-agent --server HOST:PORT --certs DIR --agent-id NAME --instance-id ID [options]
 *
 * Exit codes: 0 after a graceful stop (SIGTERM, SIGINT or the server's ShutdownSignal),
 * 2 for a bad or missing setting, 1 when stopped by a second signal or a crash.
 */
import { statSync } from 'node:fs';
import { Agent } from '../guest-agent/agent.js';
import { AGENT_USAGE, AgentConfigError, AgentHelpRequested, parseAgentConfig, type AgentConfig } from '../guest-agent/config.js';
import { createAgentLogger } from '../guest-agent/log.js';
import { AGENT_VERSION } from '../guest-agent/version.js';

/** Runs the agent with process.argv and process.env; exits the process when it stops. */
export function main(): void {
  let cfg: AgentConfig;
  try {
    cfg = parseAgentConfig(process.argv.slice(2), process.env, process.cwd());
  } catch (err) {
    if (err instanceof AgentHelpRequested) {
      process.stdout.write(AGENT_USAGE);
      process.exit(0);
    }
    if (err instanceof AgentConfigError) {
      process.stderr.write(`sandbox-agent: ${err.message}\n(see sandbox-agent --help)\n`);
      process.exit(2);
    }
    throw err;
  }
  if (!statSync(cfg.workDir, { throwIfNoEntry: false })?.isDirectory()) {
    process.stderr.write(`sandbox-agent: --work-dir: ${cfg.workDir} is not a directory\n`);
    process.exit(2);
  }
  const log = createAgentLogger(cfg.logFormat, cfg.logLevel, { agentId: cfg.agentId, instanceId: cfg.instanceId });
  log.info(
    { version: AGENT_VERSION, server: `${cfg.server.host}:${cfg.server.port}`, workDir: cfg.workDir, profile: cfg.profile },
    'sandbox-agent starting',
  );
  const agent = new Agent({ config: cfg, log, version: AGENT_VERSION });

  let signalled = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (signalled) {
      log.warn({ signal: sig }, 'second signal: exiting at once');
      process.exit(1);
    }
    signalled = true;
    agent.stop(cfg.killGraceMs, sig).catch((err: unknown) => log.error({ err }, 'stop failed'));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });

  // The agent's own timers are unref'd; this keeps the process up through reconnect backoffs.
  const keepAlive = setInterval(() => undefined, 3_600_000);
  agent.start();
  // Stopped by a signal or by the server's ShutdownSignal: exit 0 once the stop completed.
  void agent.stopped.then(() => {
    clearInterval(keepAlive);
    process.exit(0);
  });
}
