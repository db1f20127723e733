/**
 * The control calls the main thread makes about output (ActorSystem.call; args and results are
 * structured-cloned): to an agent actor (`agent:<agent_id>`) about its commands' output, served
 * by the actor's ReplayOutputSink (actors/agent-connection/replay-output-sink.ts), and to the `output-shard`
 * actor of each shard, whose spawn argument sets the shard's replay settings and whose `stats`
 * call reports its replay numbers (actors/replay/output-shard.actor.ts).
 *
 * Every answer carries `clock`: the agent's cursor clock when the call was handled. Every event
 * the actor emitted before it has a clock ≤ `clock` and is covered by the answer (or precedes the
 * requested position); every later one has a larger clock. A subscriber that held live frames
 * while it waited keeps exactly those with a clock above it (src/http/live-subscriber.ts, "join").
 */

export const OutputCall = {
  /** One command: its state, and its buffered output as `agent_output.replay` events. */
  kReplay: 'output.replay',
  /** All of one agent's commands after an agent-scoped cursor, merged by clock. */
  kReplayAgent: 'output.replayAgent',
  /** Joins the chat projection of (command, session), creating it when needed. */
  kChat: 'output.chat',
  /** Numbers of this agent's replay state (tests, debugging). */
  kStats: 'output.stats',
} as const;

/**
 * running: the command is running (it may have no output yet); finished: it ended and its output
 * is still buffered; expired: it ended and its buffered output was released; unknown: the actor
 * has never seen it (or forgot it).
 */
export type CommandOutputState = 'running' | 'finished' | 'expired' | 'unknown';

export interface ReplayArgs {
  commandId: string;
  /** none: state only; tail: the newest `limit` chunks; after: everything retained after `afterSeq`, `limit` chunks per call. */
  mode: 'none' | 'tail' | 'after';
  afterSeq?: number;
  /** 1–1000. */
  limit: number;
  stream?: 'stdout' | 'stderr' | 'log';
}

export interface ReplayAgentArgs {
  after: { clock: number; seq: number };
  limit: number;
  stream?: 'stdout' | 'stderr' | 'log';
}

export interface ReplayAnswer {
  state: CommandOutputState;
  /** Events, concatenated (`agent_output.replay` and output_gap `agent_output.error`). */
  bytes: Uint8Array;
  /**
   * `bytes` is a buffer the shard lent: give it back with releaseReplayBytes (replay-lease.ts) once
   * written. Absent when `bytes` is the shard's cached events themselves (never written again:
   * keep or write them as they are) or a fresh buffer.
   */
  lease?: number;
  events: number;
  chunks: number;
  /** Id of the last event in `bytes`; null when there is none. */
  last: string | null;
  /** More buffered output follows `last`. */
  more: boolean;
  /** See the module comment. */
  clock: number;
  /** For a finished command: its stream_end event (`agent_output.error`, code stream_end). */
  end?: Uint8Array;
}

export interface ChatArgs {
  commandId: string;
  sessionId: string;
  /** Events after this seq are returned; null: none (live only). */
  afterSeq: number | null;
}

export interface ChatAnswer {
  state: CommandOutputState;
  bytes: Uint8Array;
  events: number;
  /** Seq of the projection's last event at the call: live events above it are new. */
  lastSeq: number;
  /** The projection has ended: the stream closes after `bytes`. */
  terminated: boolean;
}

export interface OutputStats {
  commands: number;
  ringBytes: number;
  chatProjections: number;
}

/** Actor type of the per-shard output service; one is spawned in every shard. */
export const OUTPUT_SHARD_ACTOR_TYPE = 'output-shard';

/**
 * The replay settings of one shard. An output-shard actor's spawn argument holds any subset; the
 * rest keep their defaults (DEFAULT_REPLAY_SETTINGS, actors/replay/shard-replay.ts).
 */
export interface ReplaySettings {
  /** Per-command replay limit (encoded frames + per-entry overhead), bytes. Default 8 MiB. */
  readonly ringBytes: number;
  /** All replay rings of one shard together, bytes. Default 256 MiB. */
  readonly budgetBytes: number;
  /** A finished command's output stays replayable this long, ms. Default 5 min. */
  readonly retentionMs: number;
  /** Encoded chat events kept per (command, session) projection, bytes. Default 1 MiB. */
  readonly chatBytes: number;
}

/** Numbers for the fanout metrics (ActorSystem.call to an output-shard actor, `stats`). */
export interface ShardReplayStats {
  /** Bytes held by the replay rings of this shard. */
  ringBytes: number;
  /** Budget limit, bytes. */
  budgetBytes: number;
  /** Live per-command replay states (rings). */
  rings: number;
  /** Times the budget trimmed rings. */
  budgetTrims: number;
  /** Output gaps the actors of this shard recorded (from the agent or missing seqs). */
  gaps: number;
  /** Finished commands released after their retention. */
  released: number;
  /** Chat projections alive. */
  chatProjections: number;
}
