/**
 * Where an agent actor sends command output, gaps and results: the one place to redirect them
 * (issue 4 puts per-command replay-ring actors, `agent:<agent_id>/cmd/<command_id>`, behind this
 * interface). The default sink emits them to the main thread, which hands them to Exec calls.
 */
import {
  AgentFrameKind,
  encodeJson,
  encodeOutputFrame,
  type CommandGapFrame,
  type CommandResultFrame,
  type OutputFrame,
} from './frames.js';
import type { Outbox } from './outbox.js';

export interface CommandOutputSink {
  /** One accepted chunk (already de-duplicated, in seq order). `data` is valid only during the call. */
  output(commandId: string, header: Omit<OutputFrame, 'data'>, data: Uint8Array): void;
  /** Output that will never arrive. */
  gap(frame: CommandGapFrame): void;
  /** The command's end; nothing of it follows. */
  result(frame: CommandResultFrame): void;
}

/** Emits kFrameCommandOutput / kFrameCommandGap / kFrameCommandResult keyed by command id. */
export function emittingOutputSink(outbox: Outbox): CommandOutputSink {
  return {
    output(commandId, header, data) {
      outbox.emit(AgentFrameKind.kFrameCommandOutput, commandId, encodeOutputFrame(header, data), true);
    },
    gap(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandGap, frame.command_id, encodeJson(frame), true);
    },
    result(frame) {
      outbox.emit(AgentFrameKind.kFrameCommandResult, frame.command_id, encodeJson(frame), true);
    },
  };
}
