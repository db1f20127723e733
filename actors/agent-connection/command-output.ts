/**
 * Where an agent actor sends command output, gaps and results: the one place to redirect them.
 *
 * The default sink (emittingOutputSink) does two things with every accepted chunk, gap and
 * result, in order through the actor's Outbox:
 *
 * 1. emits it raw to the main thread (kFrameCommandOutput / kFrameCommandGap / kFrameCommandResult
 *    keyed by command id) for Exec calls and AgentService.subscribeCommands listeners;
 * 2. hands it to the command's replay state (ReplayOutputSink, replay-output-sink.ts): the
 *    per-command replay ring in this actor's shard, which encodes the chunk once into the SSE
 *    `agent_output` event and the WS `output` message and emits them in one kFrameOutputPublish
 *    frame for the main thread's fanout (actors/protocol/publish-frames.ts).
 *
 * The replay state is owned by the agent actor, one CommandReplay per command (not an actor of
 * its own): the runtime has no actor-to-actor messages inside a shard, so a separate
 * `agent:<id>/cmd/<command_id>` actor would have to receive every chunk through the main thread
 * (twice across the rings) or wait for an asynchronous spawn; inside the agent actor it is one
 * synchronous call on the same thread, ordered with everything else the agent sends. Replays are
 * control calls to the agent actor (`output.*` methods, replay-output-sink.ts).
 */
import { AgentFrameKind, encodeJson, kOutputHeaderBytes, writeOutputFrame, type OutputFrame } from '../protocol/agent-frames.js';
import type { Outbox } from '../runtime/outbox.js';
import type { CommandOutputSink } from './output-sink.js';
import { ReplayOutputSink } from './replay-output-sink.js';

export type { CommandOutputSink, OutputSinkOwner } from './output-sink.js';

/** Where this thread assembles raw output frames (emit copies them out before the next use). */
let rawScratch = new Uint8Array(64 * 1024 + kOutputHeaderBytes);

/**
 * A kFrameCommandOutput payload (layout in frames.ts, encodeOutputFrame) written into the
 * thread's scratch buffer instead of a new allocation per chunk; valid until the next call.
 */
export function outputFrameInScratch(o: Omit<OutputFrame, 'data'>, data: Uint8Array): Uint8Array {
  const bytes = kOutputHeaderBytes + data.byteLength;
  if (rawScratch.byteLength < bytes) rawScratch = new Uint8Array(bytes * 2);
  return writeOutputFrame(rawScratch.subarray(0, bytes), o, data);
}

/** Only the raw frames (step 1 above): kFrameCommandOutput / Gap / Result keyed by command id. */
export function rawOutputSink(outbox: Outbox): CommandOutputSink {
  return {
    output(commandId, header, data) {
      outbox.emit(AgentFrameKind.kFrameCommandOutput, commandId, outputFrameInScratch(header, data));
    },
    gap(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandGap, frame.command_id, encodeJson(frame), true);
    },
    result(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandResult, frame.command_id, encodeJson(frame), true);
    },
  };
}

/** The default sink of agent actors: raw frames plus the per-command replay rings and publish frames. */
export function emittingOutputSink(outbox: Outbox): CommandOutputSink {
  return new ReplayOutputSink(outbox, rawOutputSink(outbox));
}
