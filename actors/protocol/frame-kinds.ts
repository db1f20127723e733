/**
 * Every frame kind that crosses a shard ring (the record format is in frames.ts), in one table:
 * its number, which way it travels, the component that owns it, what its key is and what its
 * payload holds. A kind is a byte; 0 is never valid. Each owner numbers its kinds inside its own
 * ranges (FRAME_KIND_RANGES), and test/unit/actors/protocol/frame-kinds.test.ts checks that no
 * two kinds share a number and that every kind sits in its owner's range.
 *
 * The payload layouts and shapes live beside their owner's helpers: agent-frames.ts (agent
 * connections and their commands), publish-frames.ts (output publishing) and vm-frames.ts (VM
 * operation queues). Control calls (spawn, call, stop) do not travel as frames: they go over
 * comlink (actors/runtime/shard-protocol.ts).
 */

/** Which way a frame travels: main → worker (ActorSystem.send) or worker → main (ActorContext.emit). */
export type FrameDirection = 'to-actor' | 'from-actor';

/**
 * The component that owns a kind: `runtime` (generic frames of the actor runtime), `agent`
 * (agent-connection actors and their commands, src/agent-link on the main thread), `output` (the
 * replay state in agent actors and the output fanout, src/streaming) and `vm` (VM operation-queue
 * actors, src/vms).
 */
export type FrameOwner = 'runtime' | 'agent' | 'output' | 'vm';

export interface FrameKindSpec {
  readonly kind: number;
  readonly direction: FrameDirection;
  readonly owner: FrameOwner;
  /** What the frame key is. */
  readonly key: string;
  /** What the payload holds. */
  readonly payload: string;
}

/** The ranges each owner numbers its kinds in (inclusive). */
export const FRAME_KIND_RANGES: Readonly<Record<FrameOwner, readonly (readonly [number, number])[]>> = {
  runtime: [[1, 15]],
  agent: [
    [16, 31],
    [48, 63],
  ],
  output: [[32, 47]],
  vm: [[64, 79]],
};

/** The table. */
export const FRAME_KINDS = {
  kFrameData: {
    kind: 1,
    direction: 'to-actor',
    owner: 'runtime',
    key: 'actor id',
    payload: "opaque bytes for the actor (the runtime tests' actors use it)",
  },
  kFrameEmit: {
    kind: 2,
    direction: 'from-actor',
    owner: 'runtime',
    key: 'topic',
    payload: "opaque bytes from the actor (the runtime tests' actors use it)",
  },
  kFrameAgentIn: {
    kind: 16,
    direction: 'to-actor',
    owner: 'agent',
    key: '`agent:<agent_id>`',
    payload: 'one AgentMessage exactly as received (raw protobuf; the actor decodes it)',
  },
  kFrameSendToAgent: {
    kind: 17,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: '[u32 connId][ManagementMessage bytes]',
  },
  kFrameAgentClose: {
    kind: 18,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: '[u32 connId][u8 gRPC status][UTF-8 reason]: end that stream',
  },
  kFrameAgentAttach: {
    kind: 19,
    direction: 'to-actor',
    owner: 'agent',
    key: '`agent:<agent_id>`',
    payload: 'JSON AttachInfo: a verified stream opened; the AgentIn frames that follow belong to it',
  },
  kFrameAgentDetach: {
    kind: 20,
    direction: 'to-actor',
    owner: 'agent',
    key: '`agent:<agent_id>`',
    payload: 'JSON DetachInfo: that stream ended; nothing of it follows',
  },
  kFrameAgentSnapshot: {
    kind: 21,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON AgentSnapshot (after every change)',
  },
  kFrameAgentEvent: {
    kind: 22,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON AgentEventFrame (a v1 event record)',
  },
  kFrameAgentRemoved: {
    kind: 23,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON {}: retention ran out, the actor may be stopped',
  },
  kFrameAgentMetric: {
    kind: 24,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON AgentMetricFrame',
  },
  kFrameSessionReport: {
    kind: 25,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON SessionReportFrame (for the sessions reconciler)',
  },
  kFrameSessionReconcileAck: {
    kind: 26,
    direction: 'from-actor',
    owner: 'agent',
    key: 'agent_id',
    payload: 'JSON SessionReconcileAckFrame',
  },
  kFrameOutputPublish: {
    kind: 34,
    direction: 'from-actor',
    owner: 'output',
    key: '`<agent_id>\\0<command_id>` (commandKey)',
    payload: 'one encoded SSE event: an output gap or the stream end (publish-frames.ts; chunks travel as kFrameCommandOutput)',
  },
  kFrameChatPublish: {
    kind: 35,
    direction: 'from-actor',
    owner: 'output',
    key: 'chat topic (chatTopic)',
    payload: 'one encoded chat SSE event (publish-frames.ts)',
  },
  kFrameOutputForget: {
    kind: 36,
    direction: 'from-actor',
    owner: 'output',
    key: '`<agent_id>\\0<command_id>`',
    payload: "none: the command's replay state was released, its output is no longer buffered",
  },
  kFrameOutputKnown: {
    kind: 37,
    direction: 'from-actor',
    owner: 'output',
    key: '`<agent_id>\\0<command_id>`',
    payload: 'none: a command was dispatched (the main thread learns its agent before output arrives)',
  },
  kFrameCommandOutput: {
    kind: 48,
    direction: 'from-actor',
    owner: 'agent',
    key: '`<agent_id>\\0<command_id>` (commandKey)',
    payload:
      '[OutputHeader 40 bytes: stream, eof, text carry, seq, offset, timestamp, clock][data] (agent-frames.ts): each accepted chunk, once, for Exec, the command listeners and the output fanout',
  },
  kFrameCommandResult: {
    kind: 49,
    direction: 'from-actor',
    owner: 'agent',
    key: 'command_id',
    payload: 'JSON CommandResultFrame',
  },
  kFrameCommandGap: {
    kind: 50,
    direction: 'from-actor',
    owner: 'agent',
    key: 'command_id',
    payload: 'JSON CommandGapFrame',
  },
  kFrameVmStep: {
    kind: 64,
    direction: 'from-actor',
    owner: 'vm',
    key: "the queue actor's id",
    payload: 'JSON StepRequest: run this step and answer with a kFrameVmStepDone frame',
  },
  kFrameVmJob: {
    kind: 65,
    direction: 'from-actor',
    owner: 'vm',
    key: "the queue actor's id",
    payload: "JSON JobFrame: a job's snapshot after every change (seq grows; stale copies lose)",
  },
  kFrameVmStepDone: {
    kind: 66,
    direction: 'to-actor',
    owner: 'vm',
    key: "the queue actor's id",
    payload: 'JSON StepAnswer: the answer to the kFrameVmStep with its callId',
  },
} as const satisfies Record<string, FrameKindSpec>;

type Table = typeof FRAME_KINDS;
export type FrameKindName = keyof Table;
type NamesOf<O extends FrameOwner> = { [K in FrameKindName]: Table[K]['owner'] extends O ? K : never }[FrameKindName];
type KindsOf<O extends FrameOwner> = { readonly [K in NamesOf<O>]: Table[K]['kind'] };

function kindsOf<O extends FrameOwner>(owner: O): KindsOf<O> {
  const out: Record<string, number> = {};
  for (const [name, spec] of Object.entries(FRAME_KINDS) as [string, FrameKindSpec][]) if (spec.owner === owner) out[name] = spec.kind;
  return Object.freeze(out) as KindsOf<O>;
}

/** Every kind by name: `FrameKind.kFrameAgentIn === 16`. */
export const FrameKind = Object.freeze(Object.fromEntries(Object.entries(FRAME_KINDS).map(([name, spec]) => [name, spec.kind]))) as {
  readonly [K in FrameKindName]: Table[K]['kind'];
};

/** The kinds of agent-connection actors and their commands (agent-frames.ts). */
export const AgentFrameKind = kindsOf('agent');
/** The kinds of output publishing (publish-frames.ts). */
export const PublishFrameKind = kindsOf('output');
/** The kinds of VM operation-queue actors (vm-frames.ts). */
export const VmFrameKind = kindsOf('vm');

/** The kinds an owner's actors emit to the main thread (what that owner's component handles there). */
export function emittedKindsOf(owner: FrameOwner): number[] {
  return (Object.values(FRAME_KINDS) as FrameKindSpec[])
    .filter((s) => s.owner === owner && s.direction === 'from-actor')
    .map((s) => s.kind);
}
