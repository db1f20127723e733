/**
 * The sandbox-agent: keeps one Connect stream to sandboxd (reconnecting with jittered exponential
 * backoff), registers, sends Heartbeat + Metrics at the acknowledged interval, and serves the
 * server's messages. Commands keep running while the connection is down; their output waits in
 * the OutputBuffer and is resumed after the next registration (RegistrationAck.cursors).
 *
 * Lifecycle: agent-state.ts. The heartbeat status is READY, BUSY (commands running) or
 * SHUTTING_DOWN.
 *
 * ConfigUpdate / RegistrationAck.config keys: config-update.ts.
 */
import { DEFAULT_HEARTBEAT_INTERVAL_SECONDS, v1 } from '../../proto/index.js';
import type { StateMachine } from '../core/state-machine.js';
import { sleep } from '../util/deadline.js';
import { AgentStateCause, LIVE_AGENT_STATES, agentLifecycle, type AgentState } from './agent-state.js';
import { Backoff } from './backoff.js';
import { CommandManager } from './commands.js';
import type { AgentConfig } from './config.js';
import { applyConfigUpdate } from './config-update.js';
import { AgentConnection } from './connection.js';
import type { Logger } from './log.js';
import { HeartbeatLoop } from './heartbeat.js';
import { MetricsSampler } from './metrics.js';
import { OutputBuffer } from './output-buffer.js';
import { OutputFlow } from './output-flow.js';
import { CommandSessionBackend, SessionManager, type SessionBackend } from './sessions.js';
import { readSystemInfo } from './system-info.js';
import { TmuxSessionBackend } from './tmux-sessions.js';
import { entryMessage, registrationMessage, sessionReportMessage } from './wire.js';

export interface AgentOptions {
  readonly config: AgentConfig;
  /** Root logger (its level follows log_level updates). */
  readonly log: Logger;
  readonly version: string;
  /** Session sources besides the agent's own commands and the managed tmux server. */
  readonly extraSessionBackends?: readonly SessionBackend[];
  /** How long to wait for RegistrationAck before redialing, in ms. Default 30000. */
  readonly registrationTimeoutMs?: number;
  /** HTTP/2 keepalive interval, in ms. Default 20000. */
  readonly keepaliveMs?: number;
  /** HTTP/2 keepalive timeout, in ms. Default 10000. */
  readonly keepaliveTimeoutMs?: number;
}

export type { AgentState };

/** Bound of the flush of pending output when stopping, in ms. */
const STOP_FLUSH_MS = 5000;

export class Agent {
  readonly #cfg: AgentConfig;
  readonly #log: Logger;
  readonly #opts: AgentOptions;
  readonly #buffer: OutputBuffer;
  readonly #flow: OutputFlow;
  readonly #commands: CommandManager;
  readonly #sessions: SessionManager;
  readonly #beats: HeartbeatLoop;
  readonly #backoff: Backoff;
  readonly #abort = new AbortController();
  /** Sent output counts as delivered after this long on a live connection (a keepalive ping was answered since). */
  readonly #deliveredAfterMs: number;
  readonly #life: StateMachine<AgentState>;
  #conn: AgentConnection | undefined;
  #registered = false;
  #writable = true;
  #heartbeatS = DEFAULT_HEARTBEAT_INTERVAL_SECONDS;
  #releaseTimer: NodeJS.Timeout | undefined;
  #loop: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #onPendingEmpty: (() => void) | undefined;
  #lastEvictWarnMs = 0;
  #resolveStopped!: () => void;
  /** Resolves once a stop (signal or ShutdownSignal) completed. */
  readonly stopped: Promise<void> = new Promise((r) => (this.#resolveStopped = r));

  constructor(opts: AgentOptions) {
    this.#opts = opts;
    this.#cfg = opts.config;
    this.#log = opts.log;
    this.#life = agentLifecycle(this.#log);
    this.#buffer = new OutputBuffer(this.#cfg.outputBufferBytes);
    this.#deliveredAfterMs = (opts.keepaliveMs ?? 20_000) + (opts.keepaliveTimeoutMs ?? 10_000) + 5_000;
    this.#commands = new CommandManager({
      workDir: this.#cfg.workDir,
      childEnv: this.#cfg.childEnv,
      killGraceMs: this.#cfg.killGraceMs,
      log: this.#log,
      emit: (e) => {
        const evictedBefore = this.#buffer.evictedChunks;
        this.#buffer.push(e);
        if (this.#buffer.evictedChunks !== evictedBefore) this.#warnEvicting();
        if (e.kind === 'result') this.#flow.forget(e.commandId);
        this.#pump();
        if (e.kind === 'chunk') this.#flow.check(e.commandId);
      },
    });
    this.#flow = new OutputFlow({
      capacityBytes: this.#cfg.outputBufferBytes,
      unsentOf: (id) => this.#buffer.unsentBytesOf(id),
      unsentTotal: () => this.#buffer.unsentBytes,
      setReading: (id, reading) => {
        // One line per pause and resume: what a stalled command's log must show (issue 16).
        this.#log.debug(
          { commandId: id, unsent: this.#buffer.unsentBytesOf(id), unsentTotal: this.#buffer.unsentBytes, writable: this.#writable },
          reading ? 'output read again' : 'output paused',
        );
        this.#commands.setReading(id, reading);
      },
    });
    // The managed tmux server (tmux -L sandboxd) is a session source too: sessions outlive the agent.
    const tmux = new TmuxSessionBackend({ env: this.#cfg.childEnv });
    this.#sessions = new SessionManager([new CommandSessionBackend(this.#commands, tmux), tmux, ...(opts.extraSessionBackends ?? [])]);
    this.#beats = new HeartbeatLoop({
      agentId: this.#cfg.agentId,
      sampler: new MetricsSampler(this.#cfg.workDir),
      send: (msg) => this.#registered && this.#conn?.send(msg),
      state: () => {
        const running = this.#commands.runningCount;
        const status =
          this.#life.state === 'stopping' ? v1.AgentStatus.SHUTTING_DOWN : running > 0 ? v1.AgentStatus.BUSY : v1.AgentStatus.READY;
        return { status, running };
      },
      log: this.#log,
    });
    this.#backoff = new Backoff({ initialMs: 500, maxMs: this.#cfg.reconnectMaxMs });
  }

  get state(): AgentState {
    return this.#life.state;
  }

  /** Starts connecting (idempotent). */
  start(): void {
    if (this.#loop) return;
    this.#loop = this.#run().catch((err: unknown) => this.#log.fatal({ err }, 'connection loop crashed'));
  }

  /**
   * Graceful stop: refuse new commands, give running ones graceMs, SIGKILL their groups, send
   * what is pending (at most STOP_FLUSH_MS), close the stream. Idempotent.
   */
  stop(graceMs: number, reason: string): Promise<void> {
    this.#stopping ??= this.#stop(graceMs, reason);
    return this.#stopping;
  }

  async #stop(graceMs: number, reason: string): Promise<void> {
    this.#log.info({ reason, graceMs }, 'agent stopping');
    this.#life.transition(LIVE_AGENT_STATES, 'stopping', AgentStateCause.stopRequested, { reason });
    this.#commands.refuseNew(`agent is shutting down (${reason})`);
    if (this.#registered) this.#beats.beat();
    await this.#commands.stopAll(graceMs);
    await this.#flushPending(STOP_FLUSH_MS);
    const conn = this.#conn;
    this.#abort.abort();
    await conn?.closeGracefully(2000);
    this.#stopTimers();
    await this.#loop;
    this.#life.transition(['stopping'], 'stopped', AgentStateCause.stopCompleted);
    this.#log.info('agent stopped');
    this.#resolveStopped();
  }

  async #run(): Promise<void> {
    while (!this.#abort.signal.aborted) {
      await this.#session().catch((err: unknown) => this.#log.error({ err }, 'connection attempt failed'));
      if (this.#abort.signal.aborted) break;
      const delayMs = this.#backoff.nextDelayMs();
      this.#log.info({ delayMs, attempt: this.#backoff.attempts }, 'reconnecting after backoff');
      await sleep(delayMs, this.#abort.signal).catch(() => undefined);
    }
  }

  /** One connection, from dial to close. */
  async #session(): Promise<void> {
    this.#life.transition(['idle'], 'connecting', AgentStateCause.dialing);
    const system = await readSystemInfo(this.#cfg.workDir);
    let onClosed!: (reason: string) => void;
    const closed = new Promise<string>((r) => (onClosed = r));
    let conn: AgentConnection;
    try {
      conn = await AgentConnection.open(
        {
          server: this.#cfg.server,
          tlsServerName: this.#cfg.tlsServerName,
          certsDir: this.#cfg.certsDir,
          agentId: this.#cfg.agentId,
          instanceId: this.#cfg.instanceId,
          ...(this.#opts.keepaliveMs !== undefined ? { keepaliveMs: this.#opts.keepaliveMs } : {}),
          ...(this.#opts.keepaliveTimeoutMs !== undefined ? { keepaliveTimeoutMs: this.#opts.keepaliveTimeoutMs } : {}),
        },
        {
          onMessage: (m) => this.#onMessage(m),
          onDrain: () => {
            this.#writable = true;
            this.#pump();
          },
          onClose: (reason) => onClosed(reason),
        },
      );
    } catch (err) {
      this.#log.error({ err: (err as Error).message }, 'cannot connect');
      return;
    }
    if (this.#abort.signal.aborted) {
      conn.close(); // stop() ran while dialing
      return;
    }
    this.#conn = conn;
    this.#writable = true;
    this.#registered = false;
    const cursors = this.#buffer.cursors();
    this.#log.info(
      { server: `${this.#cfg.server.host}:${this.#cfg.server.port}`, cursors: cursors.length },
      'connecting; sending registration',
    );
    conn.send(
      registrationMessage({
        agentId: this.#cfg.agentId,
        instanceId: this.#cfg.instanceId,
        profile: this.#cfg.profile,
        labels: this.#cfg.labels,
        agentVersion: this.#opts.version,
        system,
        cursors,
      }),
    );
    const ackTimer = setTimeout(() => {
      if (!this.#registered) {
        this.#log.warn('no registration_ack in time; redialing');
        conn.close();
      }
    }, this.#opts.registrationTimeoutMs ?? 30_000);
    ackTimer.unref();
    const reason = await closed;
    clearTimeout(ackTimer);
    const wasRegistered = this.#registered;
    this.#conn = undefined;
    this.#registered = false;
    this.#flow.setConnected(false);
    this.#stopTimers();
    this.#life.transition(['registered'], 'connecting', AgentStateCause.streamEnded, { reason });
    this.#log.warn({ reason, wasRegistered, pendingOutput: this.#buffer.pending }, 'disconnected');
  }

  #onMessage(m: v1.ManagementMessage): void {
    switch (m.payload) {
      case 'registrationAck':
        this.#onAck(m.registrationAck as v1.IRegistrationAck);
        return;
      case 'command':
        if (!this.#registered) this.#log.warn('command before registration_ack; running it anyway');
        this.#commands.start(m.command as v1.ICommandRequest);
        return;
      case 'stdin':
        this.#commands.stdin(m.stdin as v1.IStdinChunk);
        return;
      case 'ptyControl':
        this.#commands.control(m.ptyControl as v1.IPtyControl);
        return;
      case 'outputFlow':
        this.#log.debug({ commandId: m.outputFlow?.commandId, paused: m.outputFlow?.paused === true }, 'output flow from the server');
        this.#flow.serverFlow(m.outputFlow?.commandId ?? '', m.outputFlow?.paused === true);
        return;
      case 'ping':
        this.#conn?.send({ pong: { timestampMs: m.ping?.timestampMs ?? 0 } });
        return;
      case 'config':
        if (m.config?.requiresRestart === true) this.#log.info('config update asks for a restart; applying what can be applied live');
        this.#applyConfig(m.config?.config ?? {});
        return;
      case 'shutdown': {
        const graceS = Math.max(0, m.shutdown?.gracePeriodSeconds ?? 0);
        this.stop(graceS * 1000, `server shutdown: ${m.shutdown?.reason || 'no reason given'}`).catch((err: unknown) =>
          this.#log.error({ err }, 'stop failed'),
        );
        return;
      }
      case 'sessionQuery':
        this.#sessions
          .report(m.sessionQuery as v1.ISessionQuery)
          .then((s) => this.#conn?.send(sessionReportMessage(this.#cfg.agentId, s)))
          .catch((err: unknown) => this.#log.error({ err }, 'session report failed'));
        return;
      case 'sessionReconcile':
        this.#sessions
          .reconcile(m.sessionReconcile as v1.ISessionReconcile)
          .then((r) => {
            this.#log.info(r, 'sessions reconciled');
            this.#conn?.send({
              sessionReconcileAck: {
                agentId: this.#cfg.agentId,
                killedSessionIds: r.killed,
                keptSessionIds: r.kept,
                failedToKill: r.failed,
                timestampMs: Date.now(),
              },
            });
          })
          .catch((err: unknown) => this.#log.error({ err }, 'session reconcile failed'));
        return;
      default:
        // Rule 6 of proto/README.md: a newer server's oneof member decodes as "no payload".
        this.#log.debug('management message without a known payload ignored');
    }
  }

  #onAck(ack: v1.IRegistrationAck): void {
    if (this.#registered) {
      this.#log.warn('second registration_ack ignored');
      return;
    }
    if (ack.accepted !== true) {
      this.#log.error({ message: ack.message }, 'registration refused by the server');
      this.#conn?.close();
      return;
    }
    this.#registered = true;
    this.#backoff.reset();
    this.#life.transition(['connecting'], 'registered', AgentStateCause.registered);
    this.#heartbeatS =
      (ack.heartbeatIntervalSeconds ?? 0) > 0 ? (ack.heartbeatIntervalSeconds as number) : DEFAULT_HEARTBEAT_INTERVAL_SECONDS;
    this.#applyConfig(ack.config ?? {});
    const holds = new Map((ack.cursors ?? []).map((c) => [c.commandId ?? '', c.lastSeq ?? 0] as const));
    this.#buffer.rewind(holds);
    this.#flow.setConnected(true);
    this.#log.info({ heartbeatS: this.#heartbeatS, resend: this.#buffer.pending, message: ack.message }, 'registered');
    this.#beats.start(this.#heartbeatS);
    this.#releaseTimer = setInterval(() => this.#buffer.releaseDelivered(Date.now() - this.#deliveredAfterMs), 5000);
    this.#releaseTimer.unref();
    this.#pump();
  }

  #applyConfig(config: Record<string, string>): void {
    applyConfigUpdate(
      config,
      {
        setHeartbeatSeconds: (n) => {
          this.#heartbeatS = n;
          if (this.#beats.running) this.#beats.start(n);
        },
        setLogLevel: (level) => {
          this.#log.level = level;
        },
      },
      this.#log,
    );
  }

  /** Sends queued output while the stream takes it. */
  #pump(): void {
    const conn = this.#conn;
    if (conn && this.#registered) {
      while (this.#writable) {
        const e = this.#buffer.next();
        if (!e) break;
        if (!conn.send(entryMessage(e))) this.#writable = false;
      }
      this.#flow.afterSend();
    }
    if (this.#buffer.pending === 0) this.#onPendingEmpty?.();
  }

  #flushPending(timeoutMs: number): Promise<void> {
    if (this.#buffer.pending === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#onPendingEmpty = undefined;
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      this.#onPendingEmpty = done;
    });
  }

  /** At most one warning per 10 s while the output buffer drops its oldest chunks. */
  #warnEvicting(): void {
    const now = Date.now();
    if (now - this.#lastEvictWarnMs < 10_000) return;
    this.#lastEvictWarnMs = now;
    this.#log.warn(
      {
        ...this.#buffer.stats(),
        pausedCommands: this.#flow.pausedCount,
        capacityBytes: this.#cfg.outputBufferBytes,
        connected: this.#registered,
      },
      'output buffer full: oldest output dropped (reported to the server as a gap)',
    );
  }

  #stopTimers(): void {
    this.#beats.stop();
    clearInterval(this.#releaseTimer);
    this.#releaseTimer = undefined;
  }
}
