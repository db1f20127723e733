/**
 * Executors and mission dispatch (spec 4.16, part 5, part 6; README "Missions and dispatch").
 *
 * An executor is registered by an operator for one agent and gets a bearer token, once. A dispatch
 * presenting that token runs the mission as one command on the executor's agent, through the one
 * AgentCommandClient facade: the executor's argv (or SVC_MISSION_COMMAND) with the mission in its
 * environment, never interpolated into a command line. The dispatch waits for the command's first
 * sign of life (output or a result) at most SVC_MISSION_START_WINDOW_MS, so a command that cannot
 * start is the spec's 500 dispatcher error (with mission.failed) rather than a 202 that fails
 * later. Its progress is mission.* events in the one event store, in order: mission.assigned,
 * mission.started, then mission.completed or mission.failed.
 */
import { randomUUID } from 'node:crypto';
import type { CommandResultFrame } from '../../actors/protocol/agent-frames.js';
import type { A2aTaskWriter } from '../a2a/task-store.js';
import type { AgentCommandClient, RunningCommand } from '../agent-link/command-client.js';
import { CONNECTED_STATUSES } from '../core/agent-status.js';
import { SvcError } from '../core/errors.js';
import type { TransitionLogger } from '../core/state-machine.js';
import type { EventStore } from '../events/event-store.js';
import { errorMessage } from '../util/error-message.js';
import type { DispatchAccepted, Executor, ExecutorRegistered, Mission } from '../wire/missions.js';
import { bearerOf, hashToken, matchToken, newExecutorToken } from './executor-token.js';
import type { MissionFailureReason, MissionEventType } from './mission-state.js';
import type { ExecutorRecord, MissionRecord, MissionStore } from './mission-store.js';
import { parseDispatch, parseExecutorRegistration, parseSessionId, type DispatchInput } from './requests.js';

/** Output kept per mission for mission.completed / mission.failed details (bytes, the newest). */
export const kOutputTailBytes = 2048;
/** Missions kept (finished ones beyond it are forgotten, oldest first). */
export const kMaxMissions = 10_000;
/** Executors at most (each dispatch compares the token with every one). */
export const kMaxExecutors = 1000;

export interface MissionServiceOptions {
  readonly store: MissionStore;
  readonly events: Pick<EventStore, 'append'>;
  /** The agents registry: status of an agent, undefined when unknown. */
  readonly agent: (agentId: string) => { readonly status: string } | undefined;
  readonly commands: Pick<AgentCommandClient, 'start'>;
  readonly missionCommand: readonly string[];
  readonly timeoutSeconds: number;
  readonly startWindowMs: number;
  readonly logger?: TransitionLogger & { warn(obj: object, msg?: string): void };
  /** Counts each dispatch answer: accepted, replayed, or the error code. */
  readonly onDispatch?: (outcome: string) => void;
  /** Counts each finished mission. */
  readonly onFinished?: (status: 'completed' | 'failed', reason: string) => void;
  /**
   * The A2A executor task store (spec 4.8: "stdout/stderr chunks captured from message dispatch"):
   * each mission that starts is recorded there as a task whose id is the mission id, on its agent's
   * instance, with its output as artifacts. Absent without the a2a component.
   */
  readonly tasks?: { readonly writer: A2aTaskWriter; readonly instanceOf: (agentId: string) => string | undefined };
  readonly now?: () => number;
}

interface Live {
  readonly agentId: string;
  readonly running: RunningCommand;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export class MissionService {
  readonly #o: MissionServiceOptions;
  readonly #now: () => number;
  readonly #live = new Map<string, Live>();
  #stopped = false;

  constructor(opts: MissionServiceOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    for (const m of opts.store.restartedFailures()) this.#emit('mission.failed', m, { reason: 'server_restarted', error: m.error });
  }

  // ---- executors

  register(body: unknown, createdBy: string): ExecutorRegistered {
    const input = parseExecutorRegistration(body);
    if (this.#o.store.executors().length >= kMaxExecutors) {
      throw new SvcError('request.invalid', `at most ${kMaxExecutors} executors can be registered; delete one first`);
    }
    const token = newExecutorToken();
    const rec: ExecutorRecord = {
      id: `exe-${randomUUID()}`,
      agentId: input.agentId,
      name: input.name,
      capabilities: input.capabilities,
      command: input.command,
      tokenHash: hashToken(token),
      createdAtMs: this.#now(),
      createdBy,
      lastDispatchAtMs: null,
    };
    this.#o.store.putExecutor(rec);
    this.#o.logger?.info({ executor: rec.id, agent: rec.agentId, by: createdBy }, 'executor registered');
    return { executor: executorJson(rec), token };
  }

  executors(agentId?: string): Executor[] {
    return this.#o.store
      .executors()
      .filter((e) => agentId === undefined || e.agentId === agentId)
      .map(executorJson);
  }

  executor(id: string): Executor {
    const e = this.#o.store.executor(id);
    if (e === undefined) throw new SvcError('executor.not_found', `no executor ${id}`);
    return executorJson(e);
  }

  /** Deletes the executor: its token stops working at once; its running missions go on. */
  deleteExecutor(id: string): void {
    if (!this.#o.store.deleteExecutor(id)) throw new SvcError('executor.not_found', `no executor ${id}`);
    this.#o.logger?.info({ executor: id }, 'executor deleted');
  }

  // ---- missions

  missions(q: { agentId?: string; status?: string; limit: number }): Mission[] {
    const all = this.#o.store
      .missions()
      .filter((m) => (q.agentId === undefined || m.agentId === q.agentId) && (q.status === undefined || m.status === q.status));
    return all.slice(Math.max(0, all.length - q.limit)).map(missionJson);
  }

  mission(id: string): Mission {
    const m = this.#o.store.mission(id.toLowerCase());
    if (m === undefined) throw new SvcError('mission.not_found', `no mission ${id}`);
    return missionJson(m);
  }

  /**
   * POST /api/v1/sessions/{id}/dispatch. Resolves with the 202 body and whether it replays an
   * earlier identical dispatch; rejects with an SvcError (the route renders it).
   */
  async dispatch(
    sessionId: string,
    authorization: string | undefined,
    body: unknown,
  ): Promise<{ accepted: DispatchAccepted; replayed: boolean }> {
    try {
      const r = await this.#dispatch(sessionId, authorization, body);
      this.#o.onDispatch?.(r.replayed ? 'replayed' : 'accepted');
      return r;
    } catch (err) {
      this.#o.onDispatch?.(err instanceof SvcError ? err.code : 'server.internal');
      throw err;
    }
  }

  /** Stops following running missions (their commands go on; a restart marks them failed). */
  stop(): void {
    this.#stopped = true;
    for (const l of this.#live.values()) l.running.detach();
    this.#live.clear();
  }

  /** The agents registry removed `agentId`: its running missions will never report. */
  agentRemoved(agentId: string): void {
    for (const [id, l] of [...this.#live]) {
      if (l.agentId !== agentId) continue;
      l.running.detach();
      this.#live.delete(id);
      this.#fail(id, ['assigned', 'running'], 'agent_lost', `agent ${agentId} was removed before the mission reported a result`);
    }
  }

  async #dispatch(
    rawSessionId: string,
    authorization: string | undefined,
    body: unknown,
  ): Promise<{ accepted: DispatchAccepted; replayed: boolean }> {
    // The token is checked first: an unauthenticated caller learns nothing about the body or the path.
    const executorId = matchToken(bearerOf(authorization), this.#o.store.executors());
    if (executorId === undefined) throw new SvcError('dispatch.unauthorized', 'missing or invalid dispatch bearer token');
    const exec = this.#o.store.executor(executorId) as ExecutorRecord;
    const sessionId = parseSessionId(rawSessionId);
    const input = parseDispatch(body);

    const prior = this.#o.store.mission(input.missionId);
    if (prior !== undefined && !(prior.status === 'failed' && (prior.reason === 'start_failed' || prior.reason === 'dispatch_error'))) {
      if (!sameDispatch(prior, sessionId, exec.id, input)) {
        throw new SvcError(
          'mission.conflict',
          `mission ${input.missionId} was dispatched before with a different body, session or executor`,
        );
      }
      return { accepted: accepted(prior), replayed: true };
    }

    const agentId = this.#target(exec, input);
    if (this.#stopped) throw new SvcError('server.unavailable', 'the server is stopping');

    const nowMs = this.#now();
    const rec: MissionRecord = {
      id: input.missionId,
      sessionId,
      executorId: exec.id,
      agentId,
      objective: input.objective,
      completion: input.completion,
      longRunning: input.longRunning,
      metadata: input.metadata,
      status: 'assigned',
      commandId: `mission-${randomUUID()}`,
      createdAtMs: nowMs,
      startedAtMs: null,
      finishedAtMs: null,
      exitCode: null,
      reason: null,
      error: null,
    };
    this.#o.store.putMission(rec);
    this.#o.store.putExecutor({ ...exec, lastDispatchAtMs: nowMs });
    this.#o.store.prune(kMaxMissions);
    this.#emit('mission.assigned', rec, { objective_bytes: Buffer.byteLength(rec.objective), long_running: rec.longRunning });
    this.#o.logger?.info({ mission: rec.id, executor: exec.id, agent: agentId, command: rec.commandId }, 'mission dispatched');

    return { accepted: await this.#run(rec, exec), replayed: false };
  }

  /**
   * The agent the mission runs on: the filter's agent_id, else the executor's. 404 when unknown,
   * 503 when the token's executor is not what the filter asks for or the agent is not connected.
   */
  #target(exec: ExecutorRecord, input: DispatchInput): string {
    const agentId = input.filter.agentId ?? exec.agentId;
    const agent = this.#o.agent(agentId);
    if (agent === undefined) throw new SvcError('dispatch.agent_not_found', `agent ${agentId} is not known to this server`);
    if (agentId !== exec.agentId) {
      throw new SvcError(
        'dispatch.executor_not_registered',
        `the token's executor ${exec.id} is registered for agent ${exec.agentId}, not ${agentId}`,
      );
    }
    if (input.filter.executorId !== undefined && input.filter.executorId !== exec.id) {
      throw new SvcError('dispatch.executor_not_registered', `executor ${input.filter.executorId} is not the token's executor`);
    }
    const missing = input.filter.capabilities.filter((c) => !exec.capabilities.includes(c));
    if (missing.length > 0) {
      throw new SvcError('dispatch.executor_not_registered', `executor ${exec.id} does not have the capabilities ${missing.join(', ')}`);
    }
    if (!(CONNECTED_STATUSES as readonly string[]).includes(agent.status)) {
      throw new SvcError('dispatch.no_agents', `agent ${agentId} is not connected (status ${agent.status})`);
    }
    return agentId;
  }

  /**
   * Starts the mission's command on its agent and waits for its first sign of life (output, a
   * result) or the start window; resolves with the 202 body. Rejects 500 dispatch.failed (or 503
   * when the agent went away) after mission.failed when the command cannot be handed over or
   * cannot start. The result is followed in the background (mission.completed / mission.failed).
   */
  async #run(rec: MissionRecord, exec: ExecutorRecord): Promise<DispatchAccepted> {
    const { agentId } = rec;
    const argv = exec.command ?? this.#o.missionCommand;
    const [command, ...args] = argv as [string, ...string[]];
    let signal!: () => void;
    const sign = new Promise<'sign'>((resolve) => (signal = () => resolve('sign')));
    let running: RunningCommand;
    const live: { tail: Buffer } = { tail: Buffer.alloc(0) };
    const task = this.#recordTask(rec);
    try {
      running = await this.#o.commands.start(
        agentId,
        {
          commandId: rec.commandId,
          command,
          args,
          env: {
            SVC_MISSION_ID: rec.id,
            SVC_MISSION_OBJECTIVE: rec.objective,
            SVC_MISSION_COMPLETION: rec.completion,
            SVC_MISSION_SESSION_ID: rec.sessionId,
            SVC_MISSION_METADATA: JSON.stringify(rec.metadata),
            SVC_EXECUTOR_ID: exec.id,
          },
          timeoutSeconds: rec.longRunning ? 0 : this.#o.timeoutSeconds,
        },
        {
          output: (stream, data) => {
            if (stream !== 'log') {
              live.tail = keepTail(live.tail, data);
              task?.output(stream, data);
            }
            signal();
          },
        },
      );
    } catch (err) {
      const gone = err instanceof SvcError && (err.code === 'agent.not_found' || err.code === 'server.unavailable');
      const msg = `the mission could not be handed to agent ${agentId}: ${errorMessage(err)}`;
      task?.end('failed', 'dispatch_error', null, msg);
      this.#fail(rec.id, ['assigned'], 'dispatch_error', msg);
      throw new SvcError(gone ? 'dispatch.no_agents' : 'dispatch.failed', msg, { reason: 'dispatch_error' });
    }
    this.#live.set(rec.id, { agentId, running });

    let timer: NodeJS.Timeout | undefined;
    const window = new Promise<'window'>((resolve) => {
      timer = setTimeout(() => resolve('window'), this.#o.startWindowMs);
      timer.unref();
    });
    const first = await Promise.race([running.result.then((r) => ({ r })), sign, window]);
    clearTimeout(timer);
    if (typeof first === 'object' && first.r.exit_code === -1 && first.r.timed_out_by === '' && first.r.error !== '') {
      this.#live.delete(rec.id);
      const msg = `the mission's command could not start on agent ${agentId}: ${first.r.error}`;
      task?.end('failed', 'start_failed', first.r.exit_code, msg);
      this.#fail(rec.id, ['assigned'], 'start_failed', msg, first.r.exit_code);
      throw new SvcError('dispatch.failed', msg, { reason: 'start_failed' });
    }
    const started = this.#o.store.moveMission(rec.id, ['assigned'], 'running', 'started', { startedAtMs: this.#now() });
    task?.working();
    if (started !== undefined) {
      this.#emit('mission.started', started, { started_by: first === 'window' ? 'start_window' : first === 'sign' ? 'output' : 'result' });
    }
    void running.result.then((r) => {
      const l = this.#live.get(rec.id);
      if (l === undefined) return;
      this.#live.delete(rec.id);
      const ok = r.exit_code === 0 && r.timed_out_by === '';
      task?.end(ok ? 'completed' : 'failed', 'exited', r.exit_code, ok ? '' : r.error !== '' ? r.error : `exit code ${r.exit_code}`);
      this.#finish(rec.id, r, live.tail);
    });
    return accepted(started ?? rec);
  }

  /**
   * Records the mission as an A2A task (see MissionServiceOptions.tasks); null without the store,
   * or when the store refuses it (full: the mission runs all the same, with a warning).
   */
  #recordTask(rec: MissionRecord): {
    output(stream: 'stdout' | 'stderr', data: Uint8Array): void;
    working(): void;
    end(state: 'completed' | 'failed', cause: string, exitCode: number | null, reason: string): void;
  } | null {
    const t = this.#o.tasks;
    const instanceId = t?.instanceOf(rec.agentId);
    if (t === undefined || instanceId === undefined) return null;
    try {
      t.writer.create({ instanceId, text: rec.objective, messageId: rec.id, taskId: rec.id, commandId: rec.commandId });
    } catch (err) {
      this.#o.logger?.warn({ mission: rec.id, err: errorMessage(err) }, 'mission not recorded as an A2A task');
      return null;
    }
    const { writer } = t;
    return {
      output: (stream, data) => writer.appendOutput(rec.id, stream, data),
      working: () => writer.transition(rec.id, 'working', 'mission_started'),
      end: (state, cause, exitCode, reason) => {
        writer.finishOutput(rec.id);
        writer.transition(rec.id, state, cause, { ...(exitCode !== null && { exitCode }), ...(reason !== '' && { reason }) });
      },
    };
  }

  #finish(id: string, r: CommandResultFrame, tail: Buffer): void {
    const output_tail = tail.toString('utf8');
    if (r.exit_code === 0 && r.timed_out_by === '') {
      const m = this.#o.store.moveMission(id, ['running'], 'completed', 'exited', { finishedAtMs: this.#now(), exitCode: 0 });
      if (m === undefined) return;
      this.#emit('mission.completed', m, { exit_code: 0, duration_ms: r.duration_ms, output_tail });
      this.#o.onFinished?.('completed', '');
      return;
    }
    // exit -1 without a timer: it could not start, seen only after the start window passed.
    const reason: MissionFailureReason =
      r.timed_out_by !== '' ? 'timeout' : r.result === 'killed' ? 'killed' : r.exit_code === -1 ? 'start_failed' : 'exit_nonzero';
    const error = r.error !== '' ? r.error : `the command exited with code ${r.exit_code}`;
    this.#fail(id, ['running'], reason, error, r.exit_code, { duration_ms: r.duration_ms, output_tail });
  }

  #fail(
    id: string,
    from: readonly ('assigned' | 'running')[],
    reason: MissionFailureReason,
    error: string,
    exitCode: number | null = null,
    extra: Record<string, unknown> = {},
  ): void {
    const m = this.#o.store.moveMission(id, from, 'failed', reason, { finishedAtMs: this.#now(), exitCode, reason, error });
    if (m === undefined) return;
    this.#emit('mission.failed', m, { reason, error, exit_code: exitCode, ...extra });
    this.#o.onFinished?.('failed', reason);
  }

  #emit(type: MissionEventType, m: MissionRecord, details: Record<string, unknown>): void {
    this.#o.events.append({
      event_type: type,
      agent_id: m.agentId,
      details: { mission_id: m.id, executor_id: m.executorId, session_id: m.sessionId, command_id: m.commandId, ...details },
    });
  }
}

/** The newest kOutputTailBytes of the output (a mission's output is not a hot path). */
function keepTail(tail: Buffer, data: Buffer): Buffer {
  const all = Buffer.concat([tail, data]);
  return all.byteLength <= kOutputTailBytes ? all : Buffer.from(all.subarray(all.byteLength - kOutputTailBytes));
}

function sameDispatch(prior: MissionRecord, sessionId: string, executorId: string, input: DispatchInput): boolean {
  return (
    prior.sessionId === sessionId &&
    prior.executorId === executorId &&
    prior.objective === input.objective &&
    prior.completion === input.completion &&
    prior.longRunning === input.longRunning &&
    (input.filter.agentId === undefined || input.filter.agentId === prior.agentId) &&
    JSON.stringify(prior.metadata) === JSON.stringify(input.metadata)
  );
}

function accepted(m: MissionRecord): DispatchAccepted {
  return {
    mission_id: m.id,
    executor_id: m.executorId,
    status: 'assigned',
    estimated_start: new Date(m.startedAtMs ?? m.createdAtMs).toISOString(),
  };
}

export function executorJson(e: ExecutorRecord): Executor {
  return {
    schema_version: 'sandboxd.executor/v1',
    executor_id: e.id,
    agent_id: e.agentId,
    name: e.name,
    capabilities: [...e.capabilities],
    command: e.command === null ? null : [...e.command],
    created_at: new Date(e.createdAtMs).toISOString(),
    created_by: e.createdBy,
    last_dispatch_at: iso(e.lastDispatchAtMs),
  };
}

export function missionJson(m: MissionRecord): Mission {
  return {
    schema_version: 'sandboxd.mission/v1',
    mission_id: m.id,
    session_id: m.sessionId,
    executor_id: m.executorId,
    agent_id: m.agentId,
    objective: m.objective,
    completion: m.completion,
    long_running: m.longRunning,
    metadata: m.metadata,
    status: m.status,
    command_id: m.commandId,
    created_at: new Date(m.createdAtMs).toISOString(),
    started_at: iso(m.startedAtMs),
    finished_at: iso(m.finishedAtMs),
    exit_code: m.exitCode,
    reason: m.reason,
    error: m.error,
  };
}
