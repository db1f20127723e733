/**
 * AgentService.Exec: an operator's one-shot command on a named agent (spec 4.17).
 *
 * - Operator certificate required (identity.operator_required, PERMISSION_DENIED; no verified
 *   identity: agent.unauthenticated). An agent certificate is refused.
 * - Unknown agent: NOT_FOUND (agent.not_found). A listed but disconnected agent: UNAVAILABLE.
 * - timeout_seconds 0 means SVC_EXEC_DEFAULT_TIMEOUT_SECONDS. The agent enforces it (SIGTERM to
 *   the process group, SIGKILL after its grace) and reports the result; if no result arrives
 *   within timeout + graceMs (agent silent or gone for good) the call ends DEADLINE_EXCEEDED and
 *   the command is expired in the actor (a late result is then a duplicate).
 * - The stream: ExecOutput {stream 1 stdout / 2 stderr, data} per chunk, in order, each chunk
 *   once (resends after an agent reconnect are dropped by seq); an item with only `error` set
 *   when output was lost; a final {complete: true, exit_code, error}. The agent's `log` stream is
 *   not part of Exec.
 * - The client cancelling the call kills the command (SIGKILL to its process group).
 * - Backpressure: bytes handed to call.write and not yet taken by the HTTP/2 stream (the write
 *   callback) are counted per call. Above kExecHighWaterBytes the agent is told to pause this
 *   command (ManagementMessage.output_flow, paused = true): it stops reading the command's
 *   output, so a slow Exec reader slows its own command and nothing else. Below
 *   kExecLowWaterBytes it is told to resume. What was already on its way when the pause left
 *   (the agent's unsent output of the command, at most its high-water mark, plus what the agent
 *   stream and the actor ring hold) still arrives and is buffered here: bounded. A pause is
 *   re-sent when the agent reconnected (pauses end with their stream), and the end of the call
 *   lifts it. An agent that predates OutputFlow ignores it, and the call buffers as before.
 */
import { randomUUID } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { v1 } from '../../proto/index.js';
import {
  agentActorId,
  decodeJson,
  OutputStream,
  type CommandGapFrame,
  type CommandResultFrame,
  type OutputFrame,
} from '../../actors/protocol/agent-frames.js';
import { ERROR_TABLE, GrpcStatus, SvcError, toWire } from '../core/errors.js';
import { checkOperatorIdentity, identityFromPeerCertificate } from '../identity/spiffe.js';
import type { ActorPort } from '../../actors/runtime/actor-lane.js';
import type { AgentMetrics } from './agent-metrics.js';
import type { AgentRegistry } from './agent-registry.js';
import { endWithStatus, type LoggerLike } from './grpc-util.js';

/** Extra time after timeout_seconds before the server gives up on a result (ms). Default 15 s. */
export const kDefaultExecGraceMs = 15_000;

/**
 * Bytes written to an Exec call and not yet taken by its HTTP/2 stream above which the agent is
 * asked to pause the command: 4 MiB is 64 full chunks, so a reader keeping up never pauses its
 * command for a momentary hiccup, and a slow reader costs the server a few MiB, not the output.
 */
export const kExecHighWaterBytes = 4 * 1024 * 1024;
/** The paused command is resumed once the call's backlog is down to this. */
export const kExecLowWaterBytes = 1024 * 1024;

export type ExecCall = grpc.ServerWritableStream<v1.ExecRequest, v1.IExecOutput>;

interface ExecState {
  readonly agentId: string;
  readonly commandId: string;
  readonly call: ExecCall;
  readonly timer: NodeJS.Timeout;
  done: boolean;
  /** Bytes written to the call whose write callback has not run yet. */
  backlogBytes: number;
  /** connId of the agent stream a pause was sent on; undefined when not paused. */
  pausedOn: number | undefined;
}

/** Per-command output flow to the agent (AgentStreams.sendOutputFlow / liveConnId). */
export interface ExecFlowPort {
  /** Sends OutputFlow; the connId it went out on, undefined when the agent has no stream. */
  send(agentId: string, commandId: string, paused: boolean): number | undefined;
  liveConnId(agentId: string): number | undefined;
}

export interface ExecCallsOptions {
  readonly trustDomain: string;
  readonly logger: LoggerLike;
  readonly metrics: AgentMetrics;
  readonly registry: AgentRegistry;
  readonly actors: () => ActorPort | undefined;
  readonly defaultTimeoutSeconds: number;
  readonly graceMs?: number;
  /** Where pauses and resumes of a command's output go; without it the calls buffer without bound. */
  readonly flow?: ExecFlowPort;
  /** Backpressure marks, in bytes (tests). Defaults kExecHighWaterBytes / kExecLowWaterBytes. */
  readonly highWaterBytes?: number;
  readonly lowWaterBytes?: number;
}

export class ExecCalls {
  readonly #opts: ExecCallsOptions;
  readonly #execs = new Map<string, ExecState>();
  readonly #highWater: number;
  readonly #lowWater: number;
  #pauses = 0;

  constructor(opts: ExecCallsOptions) {
    this.#opts = opts;
    this.#highWater = opts.highWaterBytes ?? kExecHighWaterBytes;
    this.#lowWater = Math.min(opts.lowWaterBytes ?? kExecLowWaterBytes, this.#highWater);
  }

  /** Exec calls in flight. */
  get size(): number {
    return this.#execs.size;
  }

  /** The grpc-js handler of Exec. */
  handleExec(call: ExecCall): void {
    call.on('error', () => undefined);
    const identity = identityFromPeerCertificate(call.getAuthContext()?.sslPeerCertificate, this.#opts.trustDomain);
    const who = checkOperatorIdentity(identity);
    if (!who.ok) {
      const code = who.code === 'agent.identity_mismatch' ? 'identity.operator_required' : who.code;
      return this.#refuse(call, code, who.code === 'agent.identity_mismatch' ? `Exec is an operator call: ${who.message}` : who.message);
    }
    const req = call.request;
    const agentId = req.agentId ?? '';
    const agent = this.#opts.registry.get(agentId);
    if (agent === undefined) return this.#refuse(call, 'agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`);
    if (agent.status === 'Disconnected') return this.#refuse(call, 'server.unavailable', `agent ${agentId} is disconnected`);
    if ((req.command ?? '') === '') return this.#refuse(call, 'request.invalid', 'command is required');
    const actors = this.#opts.actors();
    if (actors === undefined) return this.#refuse(call, 'server.not_ready', 'the server is starting or stopping');
    const timeoutSeconds = (req.timeoutSeconds ?? 0) > 0 ? req.timeoutSeconds : this.#opts.defaultTimeoutSeconds;
    const commandId = `exec-${randomUUID()}`;
    const deadlineMs = timeoutSeconds * 1000 + (this.#opts.graceMs ?? kDefaultExecGraceMs);
    const timer = setTimeout(() => this.#expire(commandId, timeoutSeconds), deadlineMs);
    timer.unref();
    const state: ExecState = {
      agentId,
      commandId,
      call,
      timer,
      done: false,
      backlogBytes: 0,
      pausedOn: undefined,
    };
    // Registered before dispatch: output can arrive before the dispatch call returns.
    this.#execs.set(commandId, state);
    call.on('cancelled', () => {
      if (!this.#finish(commandId)) return;
      this.#opts.logger.info({ agent: agentId, commandId, operator: who.name }, 'exec cancelled by the client; killing the command');
      actors.call(agentActorId(agentId), 'signalCommand', { commandId, signal: 9 }).catch(() => undefined);
    });
    this.#opts.logger.info({ agent: agentId, commandId, operator: who.name, timeoutSeconds }, 'exec');
    actors
      .call(agentActorId(agentId), 'runCommand', {
        commandId,
        command: req.command,
        args: req.args ?? [],
        workingDir: req.workingDir ?? '',
        env: { ...(req.env ?? {}) },
        timeoutSeconds,
        source: 'exec',
      })
      .catch((err: unknown) => {
        if (!this.#finish(commandId)) return;
        const wire = toWire(err);
        const code = wire.code === 'actor.not_found' ? 'server.unavailable' : wire.code;
        endWithStatus(call, ERROR_TABLE[code].grpc, wire.message);
      });
  }

  /** A chunk of `commandId` (the decoded kFrameCommandOutput; its data is a view into the ring). */
  onOutput(commandId: string, frame: OutputFrame): void {
    const state = this.#execs.get(commandId);
    if (state === undefined) return;
    if (frame.stream === OutputStream.log) return;
    if (frame.data.byteLength === 0) return;
    const stream = frame.stream === OutputStream.stderr ? v1.ExecOutput.Stream.STREAM_STDERR : v1.ExecOutput.Stream.STREAM_STDOUT;
    // The data points into the ring; grpc-js serializes later, so copy.
    const n = frame.data.byteLength;
    state.backlogBytes += n;
    state.call.write({ stream, data: Buffer.from(frame.data) }, () => {
      state.backlogBytes -= n;
      if (state.pausedOn !== undefined && state.backlogBytes <= this.#lowWater) this.#resume(state);
    });
    if (state.backlogBytes >= this.#highWater) this.#pause(state);
  }

  /** Asks the agent to stop reading the command's output (again, when it reconnected since). */
  #pause(state: ExecState): void {
    const flow = this.#opts.flow;
    if (flow === undefined || state.done) return;
    if (state.pausedOn !== undefined && state.pausedOn === flow.liveConnId(state.agentId)) return;
    state.pausedOn = flow.send(state.agentId, state.commandId, true);
    if (state.pausedOn !== undefined) this.#pauses++;
  }

  #resume(state: ExecState): void {
    const on = state.pausedOn;
    state.pausedOn = undefined;
    // A pause sent on an earlier stream ended with it.
    if (on !== undefined && on === this.#opts.flow?.liveConnId(state.agentId)) this.#opts.flow.send(state.agentId, state.commandId, false);
  }

  /** Bytes written to Exec calls and not yet taken by their HTTP/2 streams: all calls, and the largest one. */
  backlog(): { bytes: number; maxBytes: number } {
    let bytes = 0;
    let maxBytes = 0;
    for (const st of this.#execs.values()) {
      bytes += st.backlogBytes;
      maxBytes = Math.max(maxBytes, st.backlogBytes);
    }
    return { bytes, maxBytes };
  }

  /** Pauses sent to agents so far (stats, tests). */
  get pausesSent(): number {
    return this.#pauses;
  }

  onGap(commandId: string, payload: Uint8Array): void {
    const state = this.#execs.get(commandId);
    if (state === undefined) return;
    const gap = decodeJson<CommandGapFrame>(payload);
    state.call.write({
      error: `output lost: chunks ${gap.first_seq}-${gap.last_seq}${gap.lost_bytes > 0 ? `, ${gap.lost_bytes} bytes` : ''} (${gap.reason})`,
    });
  }

  onResult(commandId: string, payload: Uint8Array): void {
    const state = this.#execs.get(commandId);
    if (state === undefined || !this.#finish(commandId)) return;
    const r = decodeJson<CommandResultFrame>(payload);
    const error = r.error !== '' ? r.error : r.timed_out_by !== '' ? `timed out (${r.timed_out_by})` : '';
    state.call.write({ exitCode: r.exit_code, complete: true, error });
    state.call.end();
  }

  /** The agents' actors are gone (shard restart): their Exec calls end UNAVAILABLE. */
  failAgents(agentIds: ReadonlySet<string>, reason: string): void {
    for (const [commandId, state] of this.#execs) {
      if (!agentIds.has(state.agentId) || !this.#finish(commandId)) continue;
      endWithStatus(state.call, GrpcStatus.UNAVAILABLE, reason);
    }
  }

  /** Ends every call (server stopping). */
  closeAll(reason: string): void {
    for (const [commandId, state] of this.#execs) {
      if (this.#finish(commandId)) endWithStatus(state.call, GrpcStatus.UNAVAILABLE, reason);
    }
  }

  #expire(commandId: string, timeoutSeconds: number): void {
    const state = this.#execs.get(commandId);
    if (state === undefined || !this.#finish(commandId)) return;
    const reason = `no result from agent ${state.agentId} within ${timeoutSeconds} s + grace`;
    this.#opts.logger.warn({ agent: state.agentId, commandId }, reason);
    this.#opts
      .actors()
      ?.call(agentActorId(state.agentId), 'expireCommand', { commandId, reason })
      .catch(() => undefined);
    endWithStatus(state.call, GrpcStatus.DEADLINE_EXCEEDED, reason);
  }

  /** Marks the exec done once; false when it already was. */
  #finish(commandId: string): boolean {
    const state = this.#execs.get(commandId);
    if (state === undefined || state.done) return false;
    state.done = true;
    clearTimeout(state.timer);
    if (state.pausedOn !== undefined) this.#resume(state);
    this.#execs.delete(commandId);
    return true;
  }

  #refuse(call: ExecCall, code: keyof typeof ERROR_TABLE, message: string): void {
    this.#opts.logger.warn({ code, reason: message, peer: call.getPeer() }, 'exec refused');
    this.#opts.metrics.refused(code);
    endWithStatus(call, new SvcError(code, message).grpcStatus, message);
  }
}
