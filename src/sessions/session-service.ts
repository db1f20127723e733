/**
 * The sessions component: create / list / kill (routes in src/sessions/routes.ts), one hub per live
 * session (pty-ws-routes.ts attaches clients to it), and the inputs the wiring feeds from the
 * agents server: command output and results, agent connect/disconnect, reconciliation plans.
 *
 * - create: validate → 404 unknown agent → Idempotency-Key → 503 agent not connected → registry
 *   (name unique, persisted) → CommandRequest {allocate_pty, argv: tmux new-session -A …}
 *   → running → create response. A failed send forgets the session.
 * - kill: a one-shot command runs tmux.ts's kill script on the agent (signal first, KILL after
 *   the grace period, then kill-session, then a check that no process of the panes is left);
 *   only a verified outcome answers {killed: true}; survivors → 500 with the count.
 * - A session's output seq is `generation * 2^32 + command seq` (session-types.ts).
 * - Brief network loss: sessions go `detached` and stay; only DELETE or the reconciler kills.
 */
import { randomUUID } from 'node:crypto';
import { SvcError } from '../core/errors.js';
import type { SessionAgentPort, SessionAgents } from './agent-port.js';
import type { HitlService } from './hitl.js';
import { MemoryBindingStore } from '../idempotency/binding-store.js';
import { Idempotency, JSON_ANSWER_CODEC, requestHash } from '../idempotency/idempotency.js';
import type { CounterLike, ReconcilePlan, SessionEvent } from './reconcile.js';
import type { SessionHostCapabilities } from './binding/frames.js';
import { SessionHub, StartError, type JoinSelection, type ScreenStatePort, type SessionHubOptions } from './session-hub.js';
import type { SessionRegistry } from './session-registry.js';
import { parseCreateSessionBody, type KillSignalName } from './session-request.js';
import { SessionCause, type SessionCauseName } from './session-state.js';
import {
  kGenerationSeqSpan,
  createResponseOf,
  listEntryOf,
  sessionSeq,
  withCallerUrls,
  type SessionCreateResponse,
  type SessionRecord,
  type SessionUrlBases,
} from './session-types.js';
import type { SessionKillResult, SessionList } from '../wire/sessions.js';
import { killOutcomeOf, tmuxCreateArgv, type TmuxSocket } from '../core/tmux-argv.js';
import { sessionBackendPlan, type SessionBackendPlan } from './session-backends.js';
import { checkSelection, SessionHostProbe } from './session-host.js';
import { checkJoinStart, type JoinStart } from './session-join.js';

export const DEFAULT_KILL_GRACE_SECONDS = 5;
export const DEFAULT_PTY_SIZE = { cols: 80, rows: 24 } as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Until the agent's host is probed: what every agent runs (tmux/managed). */
const PROBING_HOST: SessionHostCapabilities = {
  default_backend: 'tmux',
  default_class: 'managed',
  supported_backends: ['tmux'],
  supported_classes: ['managed'],
  pairs: [
    { session_backend: 'tmux', session_class: 'managed', available: true },
    { session_backend: 'screen', session_class: 'managed', available: false, reason: 'the agent host is being probed' },
    { session_backend: 'native', session_class: 'direct', available: false, reason: 'the agent host is being probed' },
  ],
  observe_supported: true,
  drive_supported: true,
  reattach_supported: true,
};

/** Where errors that have no caller go (pino fits). */
export interface SessionLogger {
  warn(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

export interface SessionServiceOptions {
  readonly registry: SessionRegistry;
  readonly agents: SessionAgents;
  readonly port: SessionAgentPort;
  /** The server's one Idempotency-Key mechanism (src/idempotency); in memory when absent. */
  readonly idempotency?: Idempotency;
  readonly hitl?: HitlService;
  readonly metrics?: { readonly sessionsKilledTotal: CounterLike };
  /** agent.pty.created / agent.pty.closed events. */
  readonly emit?: (e: SessionEvent) => void;
  readonly hub?: Pick<
    SessionHubOptions,
    'maxQueuedBytes' | 'replay' | 'pingIntervalMs' | 'pongTimeoutMs' | 'onSlowClient' | 'keyframeIntervalFrames' | 'keyframeIntervalMs'
  >;
  /** Screen state for keyframes (actors/terminal/); without it joins get Error KEYFRAME_UNAVAILABLE. */
  readonly screen?: ScreenStatePort;
  /** Default `-L sandboxd`. */
  readonly tmuxSocket?: TmuxSocket;
  /** On the agent: screen sockets and native pid files (session-backends.ts). Default `/tmp/sandboxd-<uid>`. */
  readonly runtimeDir?: string;
  /** How long hostCapabilities waits for the agent's probe (ms). Default session-host.ts's kProbeTimeoutMs. */
  readonly hostProbeTimeoutMs?: number;
  /** DELETE: seconds between the first signal and KILL. Default {@link DEFAULT_KILL_GRACE_SECONDS}. */
  readonly killGraceSeconds?: number;
  readonly logger?: SessionLogger;
}

export class SessionService {
  readonly #o: SessionServiceOptions;
  readonly #idem: Idempotency;
  readonly #hubs = new Map<string, SessionHub>();
  /** Pending hubs (agentHub): session id → agent id. */
  readonly #pendingAgents = new Map<string, string>();
  /** Sessions a DELETE is killing (their end is `killed`, not `exited`). */
  readonly #killing = new Set<string>();
  /** Each agent's session host (session-host.ts), probed once per registration. */
  readonly #host: SessionHostProbe;

  constructor(opts: SessionServiceOptions) {
    this.#o = opts;
    this.#idem = opts.idempotency ?? new Idempotency({ store: new MemoryBindingStore() });
    this.#host = new SessionHostProbe({
      port: opts.port,
      ...(opts.hostProbeTimeoutMs !== undefined && { timeoutMs: opts.hostProbeTimeoutMs }),
      onProbeFailed: (agent, why) => opts.logger?.info({ agent, why }, 'session host probe failed: only native/direct is offered for now'),
    });
    for (const r of opts.registry.list()) this.#hubFor(r);
  }

  /** The hub of a live session (pty-ws-routes.ts). */
  hub(sessionId: string): SessionHub | undefined {
    return this.#hubs.get(sessionId);
  }

  /**
   * The hub behind `/agents/{instance_id}/sessions/{session_id}/attach`: the agent's live session,
   * or, for a fresh UUID on a connected agent, a pending hub that a join with a selection starts
   * (`create`; without it undefined). Throws SvcError 404 otherwise.
   */
  agentHub(instanceId: string, sessionId: string, create: boolean): SessionHub | undefined {
    const agent = this.#o.agents.byInstance(instanceId);
    if (agent === undefined) throw new SvcError('agent.not_found', `no agent with instance id ${JSON.stringify(instanceId.slice(0, 128))}`);
    const rec = this.#o.registry.getForAgent(agent.agentId, sessionId);
    const live = this.#hubs.get(sessionId);
    if (rec !== undefined && live !== undefined && !live.closed) return live;
    if (live?.pending === true && this.#pendingAgents.get(sessionId) === agent.agentId) return live;
    if (rec !== undefined || this.#o.registry.get(sessionId) !== undefined || !UUID.test(sessionId) || !agent.connected)
      throw new SvcError('session.not_found', `no live session ${JSON.stringify(sessionId.slice(0, 128))} on agent ${agent.agentId}`);
    if (!create) return undefined;
    const hub = this.#newHub(sessionId, agent.agentId, {
      state: 'pending',
      cols: DEFAULT_PTY_SIZE.cols,
      rows: DEFAULT_PTY_SIZE.rows,
      start: (sel) => this.#startForJoin(agent.agentId, sessionId, sel),
      onIdle: () => {
        if (this.#hubs.get(sessionId) === hub && hub.pending) {
          this.#hubs.delete(sessionId);
          this.#pendingAgents.delete(sessionId);
          hub.close(null, 'abandoned');
        }
      },
    });
    this.#pendingAgents.set(sessionId, agent.agentId);
    return hub;
  }

  /**
   * What the agent's host can run, as binding_hello's session_host says it: the probed answer,
   * or (while the first probe runs) tmux/managed only, which every agent is assumed to have.
   * The WebSocket routes await {@link hostReady} first, so a client normally sees the probed one.
   */
  hostCapabilitiesNow(agentId: string): SessionHostCapabilities {
    return this.#host.cached(agentId) ?? PROBING_HOST;
  }

  /**
   * Resolves once the host behind a session URL (its agent's, or an agent-scoped URL's) has been
   * probed; never rejects (an unknown agent or session is the route's 404 to give).
   */
  async hostReady(instanceId: string | undefined, sessionId: string): Promise<void> {
    const agentId = instanceId === undefined ? this.#o.registry.get(sessionId)?.agentId : this.#o.agents.byInstance(instanceId)?.agentId;
    if (agentId !== undefined && this.#o.agents.get(agentId) !== undefined) await this.#host.capabilities(agentId).catch(() => undefined);
  }

  /**
   * POST /api/v1/agents/{id}/sessions. `urls`: the caller's (from its request); a replayed
   * response gets them too, whoever created the session.
   */
  async create(
    agentId: string,
    body: unknown,
    idempotencyKey: string | undefined,
    urls: SessionUrlBases,
  ): Promise<{ status: number; json: unknown; replayed: boolean }> {
    const req = parseCreateSessionBody(body);
    const agent = this.#agent(agentId);
    const hash = requestHash('POST', `/api/v1/agents/${agentId}/sessions`, { json: body ?? {} });
    const outcome = await this.#idem.run(`v1-sessions:${agentId}`, idempotencyKey, hash, JSON_ANSWER_CODEC, async () => {
      if (!this.#o.agents.get(agentId)?.connected) throw new SvcError('server.unavailable', `agent ${agentId} is not connected`);
      const rec = this.#o.registry.create({
        agentId,
        instanceId: agent.instanceId || agentId,
        command: req.command,
        cols: DEFAULT_PTY_SIZE.cols,
        rows: DEFAULT_PTY_SIZE.rows,
        ...(req.sessionName !== undefined && { sessionName: req.sessionName }),
      });
      const hub = this.#hubFor(rec);
      const argv = tmuxCreateArgv({
        sessionName: rec.sessionName,
        command: rec.command,
        cols: rec.cols,
        rows: rec.rows,
        ...this.#socket(),
      });
      try {
        await this.#o.port.startPty(agentId, this.#ptyRequest(rec, argv));
      } catch (err) {
        hub.close(null, 'start_failed');
        this.#hubs.delete(rec.sessionId);
        this.#o.registry.discard(rec.sessionId);
        throw err;
      }
      this.#o.registry.transition(rec.sessionId, ['starting'], 'running', SessionCause.ptyStarted);
      hub.setStatus('running', true);
      const now = this.#o.registry.get(rec.sessionId) ?? rec;
      this.#event('agent.pty.created', now, { command: now.command });
      return { status: 200, json: createResponseOf(now, urls) };
    });
    const { result, replayed } = outcome;
    return replayed && result.status === 200
      ? { status: 200, json: withCallerUrls(result.json as SessionCreateResponse, urls), replayed }
      : { ...result, replayed };
  }

  /**
   * What the agent's session host runs (binding_hello's `session_host`): probed once per
   * registration and cached until the agent disconnects or registers again (session-host.ts).
   * Rejects only for an unknown agent (agent.not_found); a probe that fails or takes longer than
   * `hostProbeTimeoutMs` answers native/direct only, with the reason on every other pair.
   */
  hostCapabilities(agentId: string): Promise<SessionHostCapabilities> {
    if (this.#o.agents.get(agentId) === undefined)
      return Promise.reject(new SvcError('agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`));
    return this.#host.capabilities(agentId);
  }

  /** The cached capabilities, for synchronous checks; undefined until a probe answered (asking starts one). */
  hostCapabilitiesCached(agentId: string): SessionHostCapabilities | undefined {
    return this.#host.cached(agentId);
  }

  /**
   * A pty.join_session with a selection starts the session `sessionId` (the client's UUID):
   * selection checked (request.invalid), agent known (agent.not_found) and connected
   * (server.unavailable), the pair available on its host (`session_backend.not_implemented` /
   * `session_class.not_implemented`, before anything runs), the record created in `starting`
   * with the pair (session.id_in_use for a live id), the backend's PTY command sent with the
   * join's cwd and env, then `running` and `agent.pty.created`. The hub is #hubFor's (a pending
   * one the join came through, or a new one). A failed send forgets the session and rejects.
   */
  async startForJoin(agentId: string, sessionId: string, sel: JoinStart): Promise<SessionRecord> {
    const join = checkJoinStart(sessionId, sel);
    const agent = this.#agent(agentId);
    if (!this.#o.agents.get(agentId)?.connected) throw new SvcError('server.unavailable', `agent ${agentId} is not connected`);
    checkSelection(await this.#host.capabilities(agentId), join.backend, join.sessionClass);
    const plan = this.#plan({ sessionBackend: join.backend, sessionClass: join.sessionClass });
    const hadHub = this.#hubs.has(sessionId);
    const rec = this.#o.registry.create({
      sessionId,
      agentId,
      instanceId: agent.instanceId || agentId,
      command: join.display,
      cols: join.cols,
      rows: join.rows,
      sessionBackend: join.backend,
      sessionClass: join.sessionClass,
    });
    const hub = this.#hubFor(rec);
    const argv = plan.startArgv({
      sessionName: rec.sessionName,
      program: join.program,
      cols: rec.cols,
      rows: rec.rows,
      ...(join.env !== undefined && { env: join.env }),
    });
    try {
      await this.#o.port.startPty(agentId, {
        ...this.#ptyRequest(rec, argv),
        ...(join.cwd !== undefined && { workingDir: join.cwd }),
        ...(join.env !== undefined && { env: join.env }),
      });
    } catch (err) {
      // A pending hub the join came through reports the failure to its clients itself.
      if (!hadHub) {
        hub.close(null, 'start_failed');
        this.#hubs.delete(rec.sessionId);
      }
      this.#o.registry.discard(rec.sessionId);
      throw err;
    }
    this.#o.registry.transition(rec.sessionId, ['starting'], 'running', SessionCause.ptyStarted);
    if (!hadHub) hub.setStatus('running', true);
    const now = this.#o.registry.get(rec.sessionId) ?? rec;
    this.#event('agent.pty.created', now, { command: now.command, session_backend: now.sessionBackend, session_class: now.sessionClass });
    return now;
  }

  /** GET /api/v1/agents/{id}/sessions, with the caller's URLs. */
  list(agentId: string, urls: SessionUrlBases): SessionList {
    const records = this.#o.registry.listByAgent(agentId);
    const agent = this.#o.agents.get(agentId);
    if (agent === undefined && records.length === 0)
      throw new SvcError('agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`);
    const connected = agent?.connected ?? false;
    const sessions = records.map((r) => {
      const hub = this.#hubs.get(r.sessionId);
      const stats = hub?.stats() ?? { hasScreen: false, newestSeq: 0, maxClientLagBytes: 0 };
      return listEntryOf(
        r,
        { membership: hub?.membership() ?? { controllers: [], observers: [], attachment_count: 0 }, agentConnected: connected, ...stats },
        urls,
      );
    });
    return { agent_id: agentId, sessions };
  }

  /** DELETE /api/v1/agents/{id}/sessions/{session}. Resolves only once the kill is verified. */
  async kill(agentId: string, sessionId: string, signal: KillSignalName): Promise<SessionKillResult> {
    const rec = this.#o.registry.getForAgent(agentId, sessionId);
    if (rec === undefined) {
      if (this.#o.agents.get(agentId) === undefined && this.#o.registry.listByAgent(agentId).length === 0)
        throw new SvcError('agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`);
      throw new SvcError(
        'session.not_found',
        `no session ${JSON.stringify(sessionId.slice(0, 128))} on agent ${JSON.stringify(agentId.slice(0, 128))}`,
      );
    }
    if (!this.#o.agents.get(agentId)?.connected)
      throw new SvcError('server.unavailable', `agent ${agentId} is not connected; the session is kept`);
    const grace = this.#o.killGraceSeconds ?? DEFAULT_KILL_GRACE_SECONDS;
    this.#killing.add(sessionId);
    try {
      const r = await this.#o.port.runCommand(agentId, {
        commandId: randomUUID(),
        argv: this.#plan(rec).killArgv({ sessionName: rec.sessionName, signal, graceSeconds: grace }),
        timeoutSeconds: grace + 15,
      });
      if (killOutcomeOf(r.exitCode) === 'failed') {
        throw new SvcError('server.internal', `the session's processes survived the kill (exit ${r.exitCode}); it is kept`);
      }
      this.#o.metrics?.sessionsKilledTotal.inc();
      this.#end(sessionId, SessionCause.killed, null);
      return { killed: true };
    } finally {
      this.#killing.delete(sessionId);
    }
  }

  /** Output of an agent command (wiring: every OutputChunk); only session commands matter. */
  commandOutput(commandId: string, commandSeq: number, data: Uint8Array): void {
    const rec = this.#o.registry.byCommandId(commandId);
    if (rec === undefined) return;
    if (rec.state !== 'running') this.#running(rec, rec.generation > 0 ? SessionCause.reattached : SessionCause.reported);
    this.#hubs.get(rec.sessionId)?.output(sessionSeq(rec.generation, commandSeq), data);
  }

  /** A CommandResult: the session's current PTY command ended, and with it the session. */
  commandFinished(commandId: string, exitCode: number): void {
    const rec = this.#o.registry.byCommandId(commandId);
    if (rec === undefined) return;
    const cause = this.#killing.has(rec.sessionId) ? SessionCause.killed : SessionCause.exited;
    // A managed session's PTY command is the multiplexer's client (tmux attach, screen -r): its
    // exit status is the client's (0 when the pane's program ended, whatever that returned), not
    // the program's, so the session's exit code is unknown. A direct session's is the program's.
    this.#end(rec.sessionId, cause, rec.sessionClass === 'direct' ? exitCode : null);
  }

  /** The agent's stream ended: its sessions are detached, not killed. */
  agentDisconnected(agentId: string): void {
    this.#host.forget(agentId);
    for (const r of this.#o.registry.listByAgent(agentId)) {
      this.#o.registry.transition(r.sessionId, ['starting', 'running'], 'detached', SessionCause.agentDisconnected);
      this.#hubs.get(r.sessionId)?.setStatus('detached', false);
    }
  }

  /** The agent registered again (the reconciler then sends SessionQuery). */
  agentConnected(agentId: string): void {
    // Probed on first need (a pty-ws.v1 client's hello or join), not here: a registration
    // alone runs nothing on the agent.
    this.#host.forget(agentId);
    for (const r of this.#o.registry.listByAgent(agentId)) this.#hubs.get(r.sessionId)?.setStatus(r.state, true);
  }

  /** A reconciliation plan (session-reconciler.ts onPlan): reported → running; others → re-attach. */
  applyPlan(agentId: string, plan: ReconcilePlan): void {
    for (const id of plan.running) {
      const rec = this.#o.registry.get(id);
      if (rec?.agentId === agentId) this.#running(rec, SessionCause.reported);
    }
    for (const id of plan.reattach) {
      this.reattach(id).catch((err: unknown) => this.#o.logger?.warn({ err, session: id }, 're-attach failed; the session stays detached'));
    }
  }

  /**
   * Re-attach after the session's PTY command was lost (an agent restart): the backend's
   * has-session check first (`tmux has-session`, screen's exact `<pid>.<name>`; non-zero: the
   * session is gone too → it closes, cause not_found), then a new PTY command attaching to it
   * (`tmux attach-session`, `screen -d -r`; new command id, generation + 1). A native session has
   * nothing to attach to: what may be left of its terminal session is killed (HUP, KILL after the
   * grace period) and it closes, cause not_found.
   */
  async reattach(sessionId: string): Promise<void> {
    const before = this.#o.registry.get(sessionId);
    // `starting`: a create in flight (racing a reconnect's report); its own PTY command comes.
    if (before === undefined || before.state === 'running' || before.state === 'starting') return;
    const plan = this.#plan(before);
    const hasArgv = plan.hasSessionArgv(before.sessionName);
    if (!plan.reattachable || hasArgv === undefined) {
      const grace = this.#o.killGraceSeconds ?? DEFAULT_KILL_GRACE_SECONDS;
      await this.#o.port
        .runCommand(before.agentId, {
          commandId: randomUUID(),
          argv: plan.killArgv({ sessionName: before.sessionName, signal: 'HUP', graceSeconds: grace }),
          timeoutSeconds: grace + 15,
        })
        .catch((err: unknown) => this.#o.logger?.warn({ err, session: sessionId }, 'could not clean up after a lost native session'));
      return this.#end(sessionId, SessionCause.notFound, null);
    }
    const check = await this.#o.port.runCommand(before.agentId, { commandId: randomUUID(), argv: hasArgv, timeoutSeconds: 15 });
    if (check.exitCode !== 0) return this.#end(sessionId, SessionCause.notFound, null);
    const now = this.#o.registry.get(sessionId);
    if (now === undefined || now.state === 'running') return;
    const rec = this.#o.registry.replaceCommand(sessionId);
    await this.#o.port.startPty(rec.agentId, this.#ptyRequest(rec, plan.reattachArgv(rec.sessionName) ?? []));
  }

  /** Writes to a session's PTY regardless of roles (HITL responses). Rejects when it cannot. */
  writeInput(sessionId: string, data: Uint8Array): Promise<void> {
    const rec = this.#o.registry.get(sessionId);
    if (rec === undefined) return Promise.reject(new SvcError('session.not_found', `no session ${sessionId}`));
    if (!this.#o.port.writeStdin(rec.agentId, rec.commandId, data))
      return Promise.reject(new SvcError('server.unavailable', `agent ${rec.agentId} is not connected`));
    return Promise.resolve();
  }

  /** For HitlService.sessionInfo. */
  hitlInfo(sessionId: string): { agentId: string; commandId: string; rows: number } | undefined {
    const rec = this.#o.registry.get(sessionId);
    if (rec === undefined) return undefined;
    return { agentId: rec.agentId, commandId: rec.commandId, rows: this.#hubs.get(sessionId)?.terminalSize.rows ?? rec.rows };
  }

  #agent(agentId: string): { instanceId: string } {
    const a = this.#o.agents.get(agentId);
    if (a === undefined) throw new SvcError('agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`);
    return a;
  }

  #socket(): { socket?: TmuxSocket } {
    return this.#o.tmuxSocket === undefined ? {} : { socket: this.#o.tmuxSocket };
  }

  /** The plan of a session's backend/class pair (the store only loads pairs that have one). */
  #plan(r: Pick<SessionRecord, 'sessionBackend' | 'sessionClass'>): SessionBackendPlan {
    const plan = sessionBackendPlan(r.sessionBackend, r.sessionClass, {
      ...(this.#o.tmuxSocket !== undefined && { tmuxSocket: this.#o.tmuxSocket }),
      ...(this.#o.runtimeDir !== undefined && { runtimeDir: this.#o.runtimeDir }),
    });
    if (plan === undefined) throw new SvcError('server.internal', `no plan for ${r.sessionBackend}/${r.sessionClass}`);
    return plan;
  }

  #ptyRequest(rec: SessionRecord, argv: string[]): Parameters<SessionAgentPort['startPty']>[1] {
    return {
      commandId: rec.commandId,
      sessionId: rec.sessionId,
      sessionName: rec.sessionName,
      argv,
      cols: rec.cols,
      rows: rec.rows,
      term: 'xterm-256color',
      timeoutSeconds: 0,
    };
  }

  #hubFor(rec: SessionRecord): SessionHub {
    const existing = this.#hubs.get(rec.sessionId);
    if (existing !== undefined && !existing.closed) {
      // A pending hub that became this session: it numbered its frames from epoch 0.
      if (this.#pendingAgents.delete(rec.sessionId) && rec.hubEpoch === 0) this.#o.registry.takeHubEpoch(rec.sessionId);
      return existing;
    }
    return this.#newHub(rec.sessionId, rec.agentId, {
      sequenceBase: this.#o.registry.takeHubEpoch(rec.sessionId) * kGenerationSeqSpan,
      state: rec.state,
      cols: rec.cols,
      rows: rec.rows,
      backend: rec.sessionBackend ?? 'tmux',
      class: rec.sessionClass ?? 'managed',
    });
  }

  #newHub(
    sid: string,
    agentId: string,
    o: {
      /** The hub's first frame is sequenceBase + 1 (SessionRecord.hubEpoch); 0 for a pending hub. */
      sequenceBase?: number;
      state: SessionHubOptions['state'];
      cols: number;
      rows: number;
      backend?: string;
      class?: string;
      start?: (sel: JoinSelection) => Promise<void>;
      onIdle?: () => void;
    },
  ): SessionHub {
    const hub = new SessionHub({
      ...this.#o.hub,
      sessionId: sid,
      agentId,
      ...(o.sequenceBase !== undefined && { sequenceBase: o.sequenceBase }),
      state: o.state,
      agentConnected: this.#o.agents.get(agentId)?.connected ?? false,
      terminalSize: { cols: o.cols, rows: o.rows },
      ...(o.backend !== undefined && { sessionBackend: o.backend }),
      ...(o.class !== undefined && { sessionClass: o.class }),
      host: () => this.hostCapabilitiesNow(agentId),
      ...(this.#o.screen !== undefined && { screen: this.#o.screen }),
      ...(o.start !== undefined && { start: o.start }),
      ...(o.onIdle !== undefined && { onIdle: o.onIdle }),
      pty: {
        input: (data) => {
          const r = this.#o.registry.get(sid);
          if (r !== undefined) this.#o.port.writeStdin(r.agentId, r.commandId, data);
        },
        resize: (cols, rows) => {
          const r = this.#o.registry.get(sid);
          if (r !== undefined) this.#o.port.resizePty(r.agentId, r.commandId, cols, rows);
        },
      },
      onResize: (size) => {
        if (this.#o.registry.get(sid) !== undefined) this.#o.registry.setSize(sid, size.cols, size.rows);
      },
      ...(this.#o.hitl !== undefined && { onOutput: (data: Uint8Array) => this.#o.hitl?.output(sid, data) }),
    });
    this.#hubs.set(sid, hub);
    return hub;
  }

  /** A join on a pending hub starts the session; refusals become the binding's error codes. */
  #startForJoin(agentId: string, sessionId: string, sel: JoinSelection): Promise<void> {
    return this.startForJoin(agentId, sessionId, sel).then(
      () => undefined,
      (err: unknown) => {
        if (!(err instanceof SvcError)) throw err;
        if (err.code === 'session_backend.not_implemented' || err.code === 'session_class.not_implemented')
          throw new StartError(err.code, err.message);
        if (err.code === 'request.invalid' || err.code === 'session.id_in_use') throw new StartError('INVALID_REQUEST', err.message);
        throw new StartError('INTERNAL', err.message);
      },
    );
  }

  #running(rec: SessionRecord, cause: SessionCauseName): void {
    this.#o.registry.transition(rec.sessionId, ['starting', 'detached'], 'running', cause);
    this.#hubs.get(rec.sessionId)?.setStatus('running', this.#o.agents.get(rec.agentId)?.connected ?? false);
  }

  #end(sessionId: string, cause: SessionCauseName, exitCode: number | null): void {
    const rec = this.#o.registry.get(sessionId);
    if (rec === undefined || !this.#o.registry.transition(sessionId, ['starting', 'running', 'detached'], 'closed', cause)) return;
    this.#hubs.get(sessionId)?.close(exitCode, cause);
    this.#hubs.delete(sessionId);
    this.#o.hitl?.sessionClosed(sessionId);
    this.#event('agent.pty.closed', rec, { reason: cause, exit_code: exitCode });
  }

  #event(type: string, rec: SessionRecord, extra: Record<string, unknown>): void {
    this.#o.emit?.({
      event_type: type,
      agent_id: rec.agentId,
      details: { session_id: rec.sessionId, command_id: rec.commandId, session_name: rec.sessionName, ...extra },
    });
  }
}
