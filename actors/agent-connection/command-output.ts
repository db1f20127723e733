/**
 * Where an agent actor sends command output, gaps and results: the one place to redirect them.
 *
 * The default sink (emittingOutputSink, replay-output-sink.ts) stores every accepted chunk in the
 * command's replay state (the per-command replay ring in this actor's shard: raw bytes and text
 * carry) and emits it ONCE to the main thread as kFrameCommandOutput (key `<agent_id>\0<command_id>`):
 * the one representation Exec calls, AgentService.subscribeCommands listeners and the output
 * fanout all read; the fanout encodes SSE/WS events from it only for topics with subscribers
 * (actors/protocol/chunk-events.ts). Gaps and results go raw (kFrameCommandGap /
 * kFrameCommandResult keyed by command id) and, encoded, as kFrameOutputPublish.
 *
 * The replay state is owned by the agent actor, one CommandReplay per command (not an actor of
 * its own): the runtime has no actor-to-actor messages inside a shard, so a separate
 * `agent:<id>/cmd/<command_id>` actor would have to receive every chunk through the main thread
 * (twice across the rings) or wait for an asynchronous spawn; inside the agent actor it is one
 * synchronous call on the same thread, ordered with everything else the agent sends. Replays are
 * control calls to the agent actor (`output.*` methods, replay-output-sink.ts).
 */
import { AgentFrameKind, encodeJson } from '../protocol/agent-frames.js';
import { commandKey } from '../protocol/publish-frames.js';
import type { Outbox } from '../runtime/outbox.js';
import { outputFrameInScratch } from './output-frame.js';
import type { CommandOutputSink, OutputSinkOwner } from './output-sink.js';
import { ReplayOutputSink } from './replay-output-sink.js';

export type { CommandOutputSink, OutputSinkOwner } from './output-sink.js';
export { outputFrameInScratch } from './output-frame.js';

/** Only the raw frames: kFrameCommandOutput (no clock: not stored, not published) / Gap / Result. */
export function rawOutputSink(outbox: Outbox): CommandOutputSink {
  let owner: OutputSinkOwner | undefined;
  return {
    bind(o) {
      owner = o;
    },
    output(commandId, header, data) {
      outbox.emit(AgentFrameKind.kFrameCommandOutput, commandKey(owner?.agentId ?? '', commandId), outputFrameInScratch(header, data));
    },
    gap(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandGap, frame.command_id, encodeJson(frame), true);
    },
    result(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandResult, frame.command_id, encodeJson(frame), true);
    },
  };
}

/** The default sink of agent actors: the per-command replay state, one output frame per chunk, gaps and results. */
export function emittingOutputSink(outbox: Outbox): CommandOutputSink {
  return new ReplayOutputSink(outbox, rawOutputSink(outbox));
}
