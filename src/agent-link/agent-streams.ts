/**
 * The main thread's side of AgentService.Connect: verify the caller, then shuttle raw bytes.
 *
 * - Identity: the verified client certificate's SPIFFE id must be an agent whose instance id
 *   equals metadata x-agent-instance-id; x-agent-secret (retired) is refused; x-agent-id names
 *   the agent and its actor (`agent:<agent_id>`). Refusals end the call with the error table's
 *   gRPC status and a log line.
 * - Data: every inbound message, still encoded, goes to the agent's actor (kFrameAgentIn) through
 *   an ActorLane; when the shard's ring is full the call is paused and resumed once the lane
 *   drains: nothing is dropped. The pause holds the agent: grpc-js reads the HTTP/2 stream only
 *   when its Readable asks for more (_read → startRead), so a paused call buffers at most its
 *   Readable's 16 messages plus one HTTP/2 window, the window is not reopened, and the agent's
 *   write() returns false; the agent then stops reading its commands' output (output-flow.ts).
 * - OutputFlow (sendOutputFlow): per-command pause/resume written straight to the live call, for
 *   a consumer of one command that is behind (an Exec call); it does not go through the actor. Frames the actor emits for
 *   the agent are written to the call of the stream they were meant for.
 * - Streams: Attach and Detach frames bracket each stream; a new stream of the same agent
 *   supersedes (ends) the old one. Per agent, spawn / attach / removal run one at a time.
 */
import type * as grpc from '@grpc/grpc-js';
import { AgentMetadata, v1 } from '../../proto/index.js';
import {
  AGENT_ACTOR_TYPE,
  AgentFrameKind,
  agentActorId,
  decodeConnPrefixed,
  decodeText,
  encodeJson,
  type AgentActorInit,
  type AttachInfo,
  type DetachInfo,
} from '../../actors/protocol/agent-frames.js';
import { ERROR_TABLE, GrpcStatus, SvcError, type ErrorCode } from '../core/errors.js';
import { checkAgentMetadata, identityFromPeerCertificate } from '../identity/spiffe.js';
import { ActorLane, type ActorPort } from '../../actors/runtime/actor-lane.js';
import type { AgentMetrics } from './agent-metrics.js';
import { endWithStatus, firstMetadata, type LoggerLike } from './grpc-util.js';
import { errorMessage } from '../util/error-message.js';

/** x-agent-id: what an agent may call itself (also the agent's actor id and API id). */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

interface LiveStream {
  readonly connId: number;
  readonly call: grpc.ServerDuplexStream<Buffer, Buffer>;
  ended: boolean;
  attached: boolean;
}

interface AgentSlot {
  readonly agentId: string;
  readonly actorId: string;
  lane: ActorLane | undefined;
  live: LiveStream | undefined;
  spawned: boolean;
  ops: Promise<void>;
  pendingOps: number;
}

export interface AgentStreamsOptions {
  readonly trustDomain: string;
  readonly logger: LoggerLike;
  readonly metrics: AgentMetrics;
  /** The spawn argument of an agent's actor. */
  readonly actorInit: (agentId: string) => AgentActorInit;
  /** The actor asked to be removed and no stream came back: forget the agent. */
  readonly onRemoved: (agentId: string) => void;
}

export class AgentStreams {
  readonly #opts: AgentStreamsOptions;
  readonly #slots = new Map<string, AgentSlot>();
  #actors: ActorPort | undefined;
  #nextConnId = 1;
  #stopping = false;
  #staleWrites = 0;

  constructor(opts: AgentStreamsOptions) {
    this.#opts = opts;
  }

  bind(actors: ActorPort): void {
    this.#actors = actors;
  }

  /** Open, attached streams. */
  get liveCount(): number {
    let n = 0;
    for (const s of this.#slots.values()) if (s.live !== undefined) n++;
    return n;
  }

  /** Frames the actors emitted for a stream that had already been replaced or closed. */
  /**
   * Live streams not being read because their actor's ring is full, and the frames their lanes
   * hold: a stream that stays paused while its ring drains is a stall (stats, diagnosis).
   */
  ringWaits(): { pausedStreams: number; queuedFrames: number } {
    let pausedStreams = 0;
    let queuedFrames = 0;
    for (const s of this.#slots.values()) {
      if (s.live !== undefined && s.live.call.isPaused()) pausedStreams++;
      queuedFrames += s.lane?.queued ?? 0;
    }
    return { pausedStreams, queuedFrames };
  }

  get staleWrites(): number {
    return this.#staleWrites;
  }

  /** The grpc-js handler of Connect. */
  handleConnect(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const log = this.#opts.logger;
    const peer = call.getPeer();
    const agentId = firstMetadata(call.metadata, AgentMetadata.agentId);
    const instanceId = firstMetadata(call.metadata, AgentMetadata.instanceId);
    const secret = firstMetadata(call.metadata, AgentMetadata.retiredSecret);
    // Keep an 'error' listener from the start: a call that fails before we attach must not throw.
    call.on('error', () => undefined);
    if (this.#stopping || this.#actors === undefined)
      return this.#refuse(call, 'server.not_ready', 'the server is starting or stopping; retry', { peer });
    const identity = identityFromPeerCertificate(call.getAuthContext()?.sslPeerCertificate, this.#opts.trustDomain);
    const check = checkAgentMetadata(identity, { instanceId, secret });
    if (!check.ok) return this.#refuse(call, check.code, check.message, { peer, agentId, instanceId });
    if (agentId === undefined || !AGENT_ID_PATTERN.test(agentId)) {
      return this.#refuse(call, 'request.invalid', 'metadata x-agent-id is required: 1-128 of [A-Za-z0-9._:-]', { peer, instanceId });
    }
    const stream: LiveStream = { connId: this.#nextConnId++, call, ended: false, attached: false };
    const slot = this.#slot(agentId);
    const traceId = firstMetadata(call.metadata, 'x-trace-id') ?? null;
    call.on('error', (err: Error) => this.#ended(slot, stream, `stream error: ${err.message}`));
    call.on('cancelled', () => this.#ended(slot, stream, 'cancelled (agent gone or network lost)'));
    call.on('end', () => {
      // The agent half-closed: finish our side too (status OK).
      if (!call.writableEnded) call.end();
      this.#ended(slot, stream, 'agent ended the stream');
    });
    call.on('close', () => this.#ended(slot, stream, 'stream closed'));
    log.info({ agent: agentId, instanceId, peer, connId: stream.connId }, 'agent stream opened');
    this.#serial(slot, async () => {
      await this.#ensureActor(slot);
      if (stream.ended) return;
      if (slot.live !== undefined) this.#supersede(slot, slot.live);
      slot.live = stream;
      stream.attached = true;
      const info: AttachInfo = { connId: stream.connId, instanceId: instanceId!, traceId, peer, connectedAtMs: Date.now() };
      slot.lane!.push(AgentFrameKind.kFrameAgentAttach, encodeJson(info));
      call.on('data', (message: Buffer) => this.#onData(slot, stream, message));
    }).catch((err: unknown) => {
      log.error({ agent: agentId, err: errorMessage(err) }, 'could not attach an agent stream');
      this.#opts.metrics.refused('server.not_ready');
      endWithStatus(call, GrpcStatus.UNAVAILABLE, 'the server could not set up this agent; retry');
    });
  }

  /** kFrameSendToAgent: write to the stream it was meant for (dropped when that stream is gone). */
  deliver(agentId: string, payload: Uint8Array): void {
    const d = decodeConnPrefixed(payload);
    const live = this.#slots.get(agentId)?.live;
    if (d === null || live === undefined || live.connId !== d.connId || live.ended) {
      this.#staleWrites++;
      return;
    }
    // The payload points into the ring: copy it, grpc-js keeps it until the socket takes it.
    live.call.write(Buffer.from(d.rest));
  }

  /**
   * Writes ManagementMessage.output_flow {commandId, paused} to the agent's live stream.
   * Returns the stream's connId, or undefined when the agent has no attached stream (a pause
   * then has nothing to hold: the agent reads freely until it reconnects, see output-flow.ts).
   */
  sendOutputFlow(agentId: string, commandId: string, paused: boolean): number | undefined {
    const live = this.#slots.get(agentId)?.live;
    if (live === undefined || live.ended || !live.attached) return undefined;
    const bytes = v1.ManagementMessage.encode({ outputFlow: { commandId, paused } }).finish();
    live.call.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    return live.connId;
  }

  /** The connId of the agent's attached stream, if any. */
  liveConnId(agentId: string): number | undefined {
    const live = this.#slots.get(agentId)?.live;
    return live === undefined || live.ended ? undefined : live.connId;
  }

  /** kFrameAgentClose: the actor refuses the stream (identity mismatch, no registration). */
  closeFromActor(agentId: string, payload: Uint8Array): void {
    const d = decodeConnPrefixed(payload);
    const live = this.#slots.get(agentId)?.live;
    if (d === null || d.rest.byteLength < 1 || live === undefined || live.connId !== d.connId) return;
    const status = d.rest[0]!;
    const reason = decodeText(d.rest.subarray(1));
    this.#opts.logger.warn({ agent: agentId, connId: d.connId, status, reason }, 'agent stream refused');
    endWithStatus(live.call, status, reason);
  }

  /** kFrameAgentRemoved: stop the actor and forget the agent, unless a stream came back. */
  removeRequested(agentId: string): void {
    const slot = this.#slots.get(agentId);
    if (slot === undefined) return;
    this.#serial(slot, async () => {
      if (slot.live !== undefined || !slot.spawned) return;
      slot.lane?.close();
      slot.lane = undefined;
      slot.spawned = false;
      await this.#actors?.stopActor(slot.actorId).catch((err: unknown) => {
        if (!(err instanceof SvcError && err.code === 'actor.not_found')) throw err;
      });
      this.#opts.onRemoved(agentId);
    }).catch((err: unknown) => this.#opts.logger.error({ agent: agentId, err: errorMessage(err) }, 'removing an agent actor failed'));
  }

  /**
   * The shard hosting these agents' actors crashed: their state is gone. End their streams with
   * UNAVAILABLE so the agents reconnect (and re-register with a new actor).
   */
  actorsLost(agentIds: readonly string[]): void {
    for (const agentId of agentIds) {
      const slot = this.#slots.get(agentId);
      if (slot === undefined) continue;
      slot.spawned = false;
      slot.lane?.close();
      slot.lane = undefined;
      const live = slot.live;
      slot.live = undefined;
      if (live !== undefined) {
        live.ended = true;
        endWithStatus(live.call, GrpcStatus.UNAVAILABLE, "the server lost this agent's state (actor shard restarted); reconnect");
      }
    }
  }

  /** Ends every stream (server stopping); later Connects are refused. */
  closeAll(): void {
    this.#stopping = true;
    for (const slot of this.#slots.values()) {
      const live = slot.live;
      if (live === undefined) continue;
      this.#ended(slot, live, 'server stopping');
      endWithStatus(live.call, GrpcStatus.UNAVAILABLE, 'the server is stopping; reconnect later');
    }
  }

  #slot(agentId: string): AgentSlot {
    let slot = this.#slots.get(agentId);
    if (slot === undefined) {
      slot = {
        agentId,
        actorId: agentActorId(agentId),
        lane: undefined,
        live: undefined,
        spawned: false,
        ops: Promise.resolve(),
        pendingOps: 0,
      };
      this.#slots.set(agentId, slot);
    }
    return slot;
  }

  /** Runs `op` after the slot's earlier ops; the slot is forgotten once idle with no stream and no actor. */
  #serial(slot: AgentSlot, op: () => Promise<void>): Promise<void> {
    slot.pendingOps++;
    const run = slot.ops.then(op);
    slot.ops = run
      .catch(() => undefined)
      .finally(() => {
        slot.pendingOps--;
        if (slot.pendingOps === 0 && slot.live === undefined && !slot.spawned && this.#slots.get(slot.agentId) === slot)
          this.#slots.delete(slot.agentId);
      });
    return run;
  }

  async #ensureActor(slot: AgentSlot): Promise<void> {
    const actors = this.#actors;
    if (actors === undefined) throw new SvcError('server.not_ready', 'actors are not running');
    if (slot.spawned && slot.lane !== undefined) return;
    try {
      await actors.spawn(AGENT_ACTOR_TYPE, slot.actorId, this.#opts.actorInit(slot.agentId));
    } catch (err) {
      // Left over from before (removal raced with this stream): reuse it.
      if (!(err instanceof SvcError && err.code === 'actor.already_exists')) throw err;
    }
    slot.spawned = true;
    slot.lane = new ActorLane(actors, slot.actorId, (err) => {
      this.#opts.logger.warn({ agent: slot.agentId, err: errorMessage(err) }, 'frame for an agent actor dropped');
    });
  }

  #onData(slot: AgentSlot, stream: LiveStream, message: Buffer): void {
    if (stream.ended || slot.live !== stream || slot.lane === undefined) return;
    if (slot.lane.push(AgentFrameKind.kFrameAgentIn, message)) return;
    stream.call.pause();
    void slot.lane.drained().then(() => {
      if (!stream.ended) stream.call.resume();
    });
  }

  #supersede(slot: AgentSlot, old: LiveStream): void {
    this.#ended(slot, old, 'superseded by a new stream of the same agent');
    endWithStatus(old.call, GrpcStatus.ABORTED, 'superseded by a new stream of the same agent');
  }

  /** Once per stream: tell the actor (when this stream is the attached one). */
  #ended(slot: AgentSlot, stream: LiveStream, reason: string): void {
    if (stream.ended) return;
    stream.ended = true;
    if (!stream.attached || slot.live !== stream) return;
    slot.live = undefined;
    const info: DetachInfo = { connId: stream.connId, reason };
    slot.lane?.push(AgentFrameKind.kFrameAgentDetach, encodeJson(info));
    this.#opts.logger.info({ agent: slot.agentId, connId: stream.connId, reason }, 'agent stream ended');
  }

  #refuse(call: grpc.ServerDuplexStream<Buffer, Buffer>, code: ErrorCode, message: string, fields: object): void {
    this.#opts.logger.warn({ ...fields, code, reason: message }, 'agent stream refused');
    this.#opts.metrics.refused(code);
    endWithStatus(call, ERROR_TABLE[code].grpc, message);
  }
}
