/**
 * The agent-connection actor: one per agent (`agent:<agent_id>`), living in the shard its id
 * hashes to. It decodes what the agent sends (the main thread forwards raw bytes), keeps the
 * agent's state, runs the status machine (src/core/agent-status.ts) and produces everything the
 * main thread serves: snapshots for GET /api/v1/agents, v1 events, metric updates, messages to
 * write to the agent, and per-command output for Exec (through a CommandOutputSink).
 *
 * Input rules (proto/README.md "Connection sequence"): registration first and once; anything
 * before it, a second registration, an unknown oneof member, an oversized or undecodable message
 * is ignored with a log line and a counter (svc_agent_messages_rejected_total), and the stream
 * stays up. A registration naming another agent or instance ends the stream with
 * PERMISSION_DENIED.
 */
import { MAX_MESSAGE_BYTES, v1 } from '../../proto/index.js';
import {
  agentStatusMachine,
  AgentStatusCause,
  CONNECTED_STATUSES,
  reportedStatusFromProto,
  type AgentStatus,
  type ReportedStatus,
} from '../../src/core/agent-status.js';
import { GrpcStatus } from '../../src/core/errors.js';
import type { StateMachine } from '../../src/core/state-machine.js';
import type { Actor, ActorContext } from '../runtime/actor.js';
import { AgentCommands } from './agent-commands.js';
import { AgentFacts } from './agent-facts.js';
import { OutputChunkReader } from './output-chunk-wire.js';
import { clip } from './agent-view.js';
import { emittingOutputSink, type CommandOutputSink } from './command-output.js';
import { CommandTracker } from './command-tracker.js';
import {
  AgentFrameKind,
  decodeJson,
  encodeAgentClose,
  encodeJson,
  encodeToAgent,
  OutputStream,
  type AgentActorInit,
  type AgentMetricFrame,
  type AttachInfo,
  type DetachInfo,
  type RejectReason,
} from '../protocol/agent-frames.js';
import { Outbox } from '../runtime/outbox.js';
import { sessionQueryOf, sessionReconcileAckFrame, sessionReconcileOf, sessionReportFrame } from './session-frames.js';
import { shardTicker, type Tickable, type Ticker } from '../runtime/ticker.js';
import { errorMessage } from '../../src/util/error-message.js';

/** A stream that attached but sent no registration within this long is closed (ms). */
export const kRegistrationTimeoutMs = 30_000;

/** Test seams; the runtime uses the defaults. */
export interface AgentActorDeps {
  readonly now?: () => number;
  readonly ticker?: Ticker;
  readonly sink?: (outbox: Outbox) => CommandOutputSink;
}

interface Stream {
  readonly connId: number;
  readonly instanceId: string;
  readonly traceId: string | null;
  readonly peer: string;
  readonly connectedAtMs: number;
  registered: boolean;
  /** A close was requested; its frames are ignored until the Detach arrives. */
  closing: boolean;
}

/** The AgentMessage member an OutputStream code came in. */
function streamPayload(stream: number): 'stdout' | 'stderr' | 'log' {
  return stream === OutputStream.stderr ? 'stderr' : stream === OutputStream.log ? 'log' : 'stdout';
}

export class AgentConnectionActor implements Actor, Tickable {
  readonly #ctx: ActorContext;
  readonly #init: AgentActorInit;
  readonly #now: () => number;
  readonly #ticker: Ticker;
  readonly #outbox: Outbox;
  readonly #tracker: CommandTracker;
  readonly #commands: AgentCommands;
  readonly #machine: StateMachine<AgentStatus>;
  readonly #rejected = new Map<RejectReason, number>();
  readonly #facts: AgentFacts;
  readonly #chunks = new OutputChunkReader();
  #stream: Stream | null = null;
  #lastReported: ReportedStatus | null = null;
  #removalRequested = false;
  #snapshotQueued = false;

  constructor(ctx: ActorContext, init: AgentActorInit, deps: AgentActorDeps = {}) {
    this.#ctx = ctx;
    this.#init = init;
    this.#now = deps.now ?? Date.now;
    this.#ticker = deps.ticker ?? shardTicker;
    this.#outbox = new Outbox(ctx);
    this.#tracker = new CommandTracker(init.maxFinishedCommands);
    this.#facts = new AgentFacts(init.agentId);
    this.#machine = agentStatusMachine({
      logger: ctx.logger,
      logFields: { agent: init.agentId },
      now: this.#now,
      onTransition: (t) => {
        this.event('agent.status_changed', { from: t.from, to: t.to, cause: t.cause });
        this.#queueSnapshot();
      },
    });
    this.#commands = new AgentCommands({
      agentId: init.agentId,
      now: this.#now,
      tracker: this.#tracker,
      sink: (deps.sink ?? emittingOutputSink)(this.#outbox),
      host: this,
    });
    this.#ticker.add(this);
  }

  get status(): AgentStatus {
    return this.#machine.state;
  }

  /** The current stream's connId when it is registered and open, else null. */
  get liveConnId(): number | null {
    const s = this.#stream;
    return s !== null && s.registered && !s.closing ? s.connId : null;
  }

  receive(kind: number, payload: Uint8Array): void {
    switch (kind) {
      case AgentFrameKind.kFrameAgentIn:
        this.#onMessage(payload);
        return;
      case AgentFrameKind.kFrameAgentAttach:
        this.#onAttach(decodeJson<AttachInfo>(payload));
        return;
      case AgentFrameKind.kFrameAgentDetach:
        this.#onDetach(decodeJson<DetachInfo>(payload));
        return;
      default:
        this.reject('unknown_frame', { kind });
    }
  }

  call(method: string, args: unknown): unknown {
    switch (method) {
      case 'snapshot':
        return this.#facts.registered ? this.#facts.snapshot(this.#machine.state) : null;
      case 'stats':
        return {
          status: this.#machine.state,
          connId: this.#stream?.connId ?? null,
          runningCommands: this.#tracker.running,
          rejected: Object.fromEntries(this.#rejected),
          transitions: Object.fromEntries(this.#machine.counts().moves),
          outboxQueuedBytes: this.#outbox.queuedBytes,
        };
      case 'sendSessionQuery':
        return this.sendToAgent({ sessionQuery: sessionQueryOf(args) });
      case 'sendSessionReconcile':
        return this.sendToAgent({ sessionReconcile: sessionReconcileOf(args) });
      default:
        return this.#commands.call(method, args);
    }
  }

  stop(): void {
    // Release the replay rings of unfinished commands: they count against the shard's budget.
    this.#commands.stop();
    this.#ticker.delete(this);
    this.#outbox.close();
  }

  tick(nowMs: number): void {
    try {
      this.#checkTimers(nowMs);
    } catch (err) {
      this.#ctx.logger.error({ agent: this.#init.agentId, err: errorMessage(err) }, 'agent timer check failed');
    }
  }

  #checkTimers(nowMs: number): void {
    const s = this.#stream;
    if (s !== null && !s.closing) {
      if (s.registered && this.#machine.state !== 'Stale' && nowMs - this.#facts.lastHeartbeatMs > this.#init.staleAfterMs) {
        this.#machine.transition(CONNECTED_STATUSES, 'Stale', AgentStatusCause.heartbeatMissed);
      } else if (!s.registered && nowMs - s.connectedAtMs > kRegistrationTimeoutMs) {
        this.close(GrpcStatus.DEADLINE_EXCEEDED, `no registration within ${kRegistrationTimeoutMs} ms`);
      }
    }
    const since = this.#facts.disconnectedAtMs;
    if (s === null && since !== null && !this.#removalRequested && nowMs - since >= this.#init.retentionMs) {
      this.#removalRequested = true;
      this.#outbox.emit(AgentFrameKind.kFrameAgentRemoved, this.#init.agentId, encodeJson({}), true);
    }
  }

  // ---- used by AgentCommands

  /** Encodes and sends a ManagementMessage on the live stream; false when there is none. */
  sendToAgent(message: v1.IManagementMessage): boolean {
    const connId = this.liveConnId;
    if (connId === null) return false;
    this.#outbox.emit(
      AgentFrameKind.kFrameSendToAgent,
      this.#init.agentId,
      encodeToAgent(connId, v1.ManagementMessage.encode(message).finish()),
      true,
    );
    return true;
  }

  /** Emits one v1 event record about this agent. */
  event(eventType: string, details: Record<string, unknown>): void {
    const frame = {
      event_type: eventType,
      agent_id: this.#init.agentId,
      vm_name: '',
      timestamp: new Date(this.#now()).toISOString(),
      details,
      trace_id: this.#stream?.traceId ?? null,
    };
    this.#outbox.emit(AgentFrameKind.kFrameAgentEvent, this.#init.agentId, encodeJson(frame), true);
  }

  metric(frame: AgentMetricFrame): void {
    this.#outbox.emit(AgentFrameKind.kFrameAgentMetric, this.#init.agentId, encodeJson(frame), true);
  }

  /** Counts and logs an ignored input (logged at 1, 2, 4, 8, … per reason: visible without flooding). */
  reject(reason: RejectReason, fields: object = {}): void {
    const n = (this.#rejected.get(reason) ?? 0) + 1;
    this.#rejected.set(reason, n);
    if ((n & (n - 1)) === 0) this.#ctx.logger.warn({ agent: this.#init.agentId, reason, count: n, ...fields }, 'agent message ignored');
    this.metric({ type: 'message_rejected', reason });
  }

  /** Asks the main thread to end the live stream with `grpcStatus`. */
  close(grpcStatus: number, reason: string): void {
    const s = this.#stream;
    if (s === null || s.closing) return;
    s.closing = true;
    this.#ctx.logger.warn({ agent: this.#init.agentId, connId: s.connId, grpcStatus, reason }, 'closing agent stream');
    this.#outbox.emit(AgentFrameKind.kFrameAgentClose, this.#init.agentId, encodeAgentClose(s.connId, grpcStatus, reason), true);
  }

  // ---- stream lifecycle

  #onAttach(info: AttachInfo): void {
    if (this.#stream !== null) this.#onDetach({ connId: this.#stream.connId, reason: 'superseded by a new stream' });
    this.#stream = { ...info, registered: false, closing: false };
    this.#facts.connectedAtMs = info.connectedAtMs;
    this.#facts.disconnectedAtMs = null;
    this.#removalRequested = false;
    this.event('agent.connected', { instance_id: info.instanceId, peer: info.peer, connection: info.connId });
  }

  #onDetach(info: DetachInfo): void {
    const s = this.#stream;
    if (s === null || s.connId !== info.connId) return;
    this.#stream = null;
    this.#facts.disconnectedAtMs = this.#now();
    this.#removalRequested = false;
    this.#machine.transition(CONNECTED_STATUSES, 'Disconnected', AgentStatusCause.streamEnded);
    this.event('agent.disconnected', {
      reason: info.reason,
      connection: info.connId,
      registered: s.registered,
      running_commands: this.#tracker.running,
    });
    this.#queueSnapshot();
  }

  // ---- agent messages

  #onMessage(bytes: Uint8Array): void {
    const s = this.#stream;
    if (s === null) return this.reject('not_attached');
    if (s.closing) return;
    if (bytes.byteLength > MAX_MESSAGE_BYTES) return this.reject('oversized', { bytes: bytes.byteLength });
    // Output chunks, most of what an agent sends, without protobufjs (output-chunk-wire.ts).
    const chunk = this.#chunks.read(bytes);
    if (chunk !== null) {
      if (!s.registered) return this.reject('before_registration', { payload: streamPayload(chunk.stream) });
      return this.#commands.onChunk(chunk.stream, chunk);
    }
    let msg: v1.AgentMessage;
    try {
      msg = v1.AgentMessage.decode(bytes);
    } catch (err) {
      return this.reject('undecodable', { bytes: bytes.byteLength, err: errorMessage(err) });
    }
    if (msg.payload === undefined) return this.reject('unknown_payload', { bytes: bytes.byteLength });
    if (msg.payload === 'registration') return this.#onRegistration(s, msg.registration!);
    if (!s.registered) return this.reject('before_registration', { payload: msg.payload });
    switch (msg.payload) {
      case 'heartbeat':
        return this.#onHeartbeat(msg.heartbeat!);
      case 'metrics':
        this.#facts.metrics(msg.metrics!);
        return this.#queueSnapshot();
      case 'stdout':
        this.#chunks.learn(bytes, msg.stdout!.streamId);
        return this.#commands.onChunk(OutputStream.stdout, msg.stdout!);
      case 'stderr':
        this.#chunks.learn(bytes, msg.stderr!.streamId);
        return this.#commands.onChunk(OutputStream.stderr, msg.stderr!);
      case 'log':
        this.#chunks.learn(bytes, msg.log!.streamId);
        return this.#commands.onChunk(OutputStream.log, msg.log!);
      case 'outputGap':
        return this.#commands.onGap(msg.outputGap!);
      case 'commandResult':
        return this.#commands.onResult(msg.commandResult!);
      // The main thread's session reconciler decides and emits session.report_received & co.
      case 'sessionReport':
        return this.#outbox.emit(
          AgentFrameKind.kFrameSessionReport,
          this.#init.agentId,
          encodeJson(sessionReportFrame(this.#init.agentId, msg.sessionReport!)),
          true,
        );
      case 'sessionReconcileAck':
        return this.#outbox.emit(
          AgentFrameKind.kFrameSessionReconcileAck,
          this.#init.agentId,
          encodeJson(sessionReconcileAckFrame(this.#init.agentId, msg.sessionReconcileAck!)),
          true,
        );
      case 'pong':
        return;
    }
  }

  #onRegistration(s: Stream, reg: v1.IAgentRegistration): void {
    if (s.registered) return this.reject('registration_twice');
    const agentId = reg.agentId ?? '';
    const instanceId = reg.instanceId ?? '';
    if (agentId !== this.#init.agentId) {
      this.reject('identity_mismatch', { registrationAgentId: clip(agentId, 128) });
      return this.close(
        GrpcStatus.PERMISSION_DENIED,
        `registration agent_id ${JSON.stringify(clip(agentId, 128))} differs from x-agent-id ${JSON.stringify(this.#init.agentId)}`,
      );
    }
    // An empty instance_id is allowed: the certificate already proved which instance this is.
    if (instanceId !== '' && instanceId !== s.instanceId) {
      this.reject('identity_mismatch', { registrationInstanceId: clip(instanceId, 128) });
      return this.close(
        GrpcStatus.PERMISSION_DENIED,
        `registration instance_id ${JSON.stringify(clip(instanceId, 128))} differs from the certificate's instance id`,
      );
    }
    const now = this.#now();
    s.registered = true;
    const facts = this.#facts.register(reg, s.instanceId, now);
    this.#lastReported = null;
    const asked = (reg.cursors ?? []).map((c) => ({ commandId: c.commandId ?? '' }));
    this.sendToAgent({
      registrationAck: {
        accepted: true,
        heartbeatIntervalSeconds: this.#init.heartbeatIntervalSeconds,
        serverTimeMs: now,
        cursors: this.#tracker.cursorsFor(asked),
      },
    });
    this.sendToAgent({ sessionQuery: { reportAll: true } });
    this.#machine.transition(['Disconnected'], 'Starting', AgentStatusCause.registered);
    // The snapshot first: the main thread's registry must know the agent before anyone hears
    // agent.registered (a client that reacts to the event at once, e.g. by opening a session,
    // otherwise raced a snapshot still queued behind it while this thread waited for a core).
    this.#emitSnapshot();
    this.event('agent.registered', { ...facts, resume_cursors: asked.length });
    this.event('session.query_sent', { report_all: true });
  }

  #onHeartbeat(hb: v1.IHeartbeat): void {
    const details = this.#facts.heartbeat(hb, this.#now());
    const reported = reportedStatusFromProto(hb.status);
    if (reported !== null) this.#lastReported = reported;
    this.#machine.transition(CONNECTED_STATUSES, this.#lastReported ?? 'Ready', AgentStatusCause.heartbeat);
    this.event('agent.heartbeat', { status: this.#machine.state, ...details });
    this.#queueSnapshot();
  }

  // ---- snapshots

  /** One snapshot per burst of changes: emitted after the current batch of frames. */
  #queueSnapshot(): void {
    if (this.#snapshotQueued || !this.#facts.registered) return;
    this.#snapshotQueued = true;
    queueMicrotask(() => {
      this.#snapshotQueued = false;
      this.#emitSnapshot();
    });
  }

  #emitSnapshot(): void {
    this.#outbox.emit(AgentFrameKind.kFrameAgentSnapshot, this.#init.agentId, encodeJson(this.#facts.snapshot(this.#machine.state)), true);
  }
}
