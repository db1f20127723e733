/**
 * The sandbox-agent program (runs inside each VM): parses the command line, starts the agent,
 * and exits when it stops. src/bin/sandbox-agent.ts runs it from the compiled tree; images ship
 * it as one bundle (src/image/agent-bundle.ts) whose loader calls `main` (src/image/agent-loader.ts).
 *
 *   sandbox-agent --server HOST:PORT --certs DIR --agent-id NAME --instance-id ID [options]
 *   sandbox-agent --server HOST:PORT --certs DIR --bootstrap-token-file FILE [--bootstrap-wait FILE] [options]
 *
 * With --bootstrap-token-file the agent first enrolls with the staged single-use token
 * (guest-agent/enroll.ts) and writes its certificate into --certs; when FILE is gone but --certs
 * holds a bundle (a restart after enrolling) it just uses the bundle. A refused enrollment exits 2
 * with the taxonomy code in the log (never the token). With --bootstrap-wait it first waits for
 * the material to appear in that file (a restored checkpoint's fw_cfg file, bootstrap-wait.ts).
 * With --loadout-file it applies the VM's loadout material before it connects (a file that is not
 * material exits 2).
 *
 * With --exit-with stdin it stops as on SIGTERM when its standard input ends (a local agent's
 * pipe from sandboxd, src/vms/local-agents.ts).
 *
 * Exit codes: 0 after a graceful stop (SIGTERM, SIGINT, the end of stdin with --exit-with stdin,
 * or the server's ShutdownSignal),
 * 2 for a bad or missing setting, 1 when stopped by a second signal or a crash.
 */
import { statSync } from 'node:fs';
import { applyMaterialFile } from '../core/loadout-apply.js';
import { Agent } from '../guest-agent/agent.js';
import {
  AGENT_USAGE,
  AgentConfigError,
  AgentHelpRequested,
  parseAgentConfig,
  withBootstrapIdentity,
  type AgentConfig,
} from '../guest-agent/config.js';
import { waitForBootstrapMaterial } from '../guest-agent/bootstrap-wait.js';
import { enrolledBundle, enrollWithToken, EnrollmentError, readBootstrapMaterial } from '../guest-agent/enroll.js';
import { createAgentLogger } from '../guest-agent/log.js';
import { AGENT_VERSION } from '../guest-agent/version.js';

function exitBadConfig(message: string): never {
  process.stderr.write(`sandbox-agent: ${message}\n`);
  process.exit(2);
}

/** Runs the agent with process.argv and process.env; exits the process when it stops. */
export function main(): void {
  void mainAsync().catch((err: unknown) => {
    process.stderr.write(`sandbox-agent: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}

async function mainAsync(): Promise<void> {
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
    exitBadConfig(`--work-dir: ${cfg.workDir} is not a directory`);
  }
  let enroll = false;
  if (cfg.bootstrapWait !== null && cfg.bootstrapTokenFile !== null) {
    // A restored pre-enrollment checkpoint: the material comes by the wait file (bootstrap-wait.ts).
    const enrolled = await enrolledBundle(cfg.certsDir);
    if (enrolled === null && statSync(cfg.bootstrapTokenFile, { throwIfNoEntry: false }) === undefined) {
      const log = createAgentLogger(cfg.logFormat, cfg.logLevel, { agentId: cfg.agentId || '-', instanceId: '-' });
      const stop = new AbortController();
      const onSignal = (): void => stop.abort();
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
      const arrived = await waitForBootstrapMaterial({
        waitFile: cfg.bootstrapWait,
        tokenFile: cfg.bootstrapTokenFile,
        log,
        signal: stop.signal,
      });
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      if (!arrived) process.exit(0);
    }
  }
  if (cfg.bootstrapTokenFile !== null) {
    const staged = statSync(cfg.bootstrapTokenFile, { throwIfNoEntry: false }) !== undefined;
    if (staged) {
      try {
        cfg = withBootstrapIdentity(cfg, await readBootstrapMaterial(cfg.bootstrapTokenFile));
      } catch (err) {
        if (err instanceof EnrollmentError || err instanceof AgentConfigError) exitBadConfig(err.message);
        throw err;
      }
      enroll = true;
    } else {
      // Restarted after enrolling: the bundle and its record are in --certs.
      const record = await enrolledBundle(cfg.certsDir);
      if (record === null)
        exitBadConfig(`--bootstrap-token-file: ${cfg.bootstrapTokenFile} does not exist and --certs holds no enrolled bundle`);
      try {
        cfg = withBootstrapIdentity(cfg, record);
      } catch (err) {
        if (err instanceof AgentConfigError) exitBadConfig(err.message);
        throw err;
      }
    }
  }
  const log = createAgentLogger(cfg.logFormat, cfg.logLevel, { agentId: cfg.agentId, instanceId: cfg.instanceId });
  if (enroll && cfg.bootstrapTokenFile !== null) {
    try {
      await enrollWithToken({ materialFile: cfg.bootstrapTokenFile, certsDir: cfg.certsDir, log });
    } catch (err) {
      if (!(err instanceof EnrollmentError)) throw err;
      log.error({ code: err.code, status: err.httpStatus, reason: err.message }, 'bootstrap enrollment failed');
      process.exit(2);
    }
  }
  if (cfg.loadoutFile !== null) {
    try {
      const got = await applyMaterialFile(cfg.loadoutFile, cfg.workDir, { pathEnv: cfg.childEnv['PATH'] ?? '' });
      if (got !== null) {
        cfg = { ...cfg, childEnv: { ...cfg.childEnv, ...got.material.environment } };
        const r = got.applied;
        log.info(
          {
            loadout: got.material.loadout,
            environment: Object.keys(got.material.environment),
            ...(r === null
              ? { files: 'applied before' }
              : { files_written: r.files_written, missing_packages: r.packages.missing, missing_tools: r.tools.missing }),
          },
          'loadout applied',
        );
      }
    } catch (err) {
      exitBadConfig(`--loadout-file: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
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
  if (cfg.exitWith === 'stdin') {
    // The other end is held by the process that started us; it closes when that process ends.
    const parentGone = (): void => {
      if (signalled) return;
      log.info({}, 'standard input ended (--exit-with stdin): the process that started the agent is gone; stopping');
      onSignal('SIGTERM');
    };
    process.stdin.on('end', parentGone);
    process.stdin.on('error', parentGone);
    process.stdin.resume();
  }
  // Stopped by a signal or by the server's ShutdownSignal: exit 0 once the stop completed.
  void agent.stopped.then(() => {
    clearInterval(keepAlive);
    process.exit(0);
  });
}
