/**
 * The interface between an agent actor's command half (AgentCommands) and where command output
 * goes (command-output.ts has the default implementation and the why).
 */
import type { CommandGapFrame, CommandResultFrame, OutputFrame } from '../protocol/agent-frames.js';

/** What AgentCommands knows of an accepted chunk besides its bytes (the sink adds clock and carry). */
export type ChunkHeader = Omit<OutputFrame, 'data' | 'clock' | 'carry'>;

/** What a sink learns about the actor that feeds it (AgentCommands binds it at construction). */
export interface OutputSinkOwner {
  readonly agentId: string;
  /** The actor's clock, Unix ms. */
  now(): number;
  /** What the actor's CommandTracker knows of a command. */
  commandState(commandId: string): 'running' | 'finished' | 'unknown';
}

export interface CommandOutputSink {
  /** Called once by AgentCommands before anything else. */
  bind?(owner: OutputSinkOwner): void;
  /** The actor dispatched a command (before any of its output). */
  started?(commandId: string): void;
  /** One accepted chunk (already de-duplicated, in seq order). `data` is valid only during the call. */
  output(commandId: string, header: ChunkHeader, data: Uint8Array): void;
  /** Output that will never arrive. */
  gap(frame: CommandGapFrame): void;
  /** The command's end; nothing of it follows. */
  result(frame: CommandResultFrame): void;
  /** Control calls whose method starts with `output.` (AgentCommands forwards them). */
  call?(method: string, args: unknown): unknown;
  /** The actor stops: release everything held. */
  stop?(): void;
}
