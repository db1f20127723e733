/**
 * Which agent runs a command, as the main thread learns it from the agent actors' frames
 * (kFrameOutputKnown when a command is dispatched, every output frame). Lets a stream filtered by
 * command_id alone, and the chat route (command_id only), find the actor that holds the output.
 * Bounded: past `maxEntries` the oldest learned entries are forgotten; a command whose replay
 * state was released is forgotten at once (kFrameOutputForget).
 */

/** Default entries kept. */
export const DEFAULT_COMMAND_INDEX_ENTRIES = 65_536;

export class CommandIndex {
  readonly #maxEntries: number;
  /** Insertion-ordered: the first key is the oldest. */
  readonly #agents = new Map<string, string>();

  constructor(maxEntries = DEFAULT_COMMAND_INDEX_ENTRIES) {
    this.#maxEntries = Math.max(1, maxEntries);
  }

  get size(): number {
    return this.#agents.size;
  }

  /** Records that `commandId` runs on `agentId` (cheap when already known). */
  learn(agentId: string, commandId: string): void {
    const known = this.#agents.get(commandId);
    if (known === agentId) return;
    if (known !== undefined) this.#agents.delete(commandId);
    this.#agents.set(commandId, agentId);
    if (this.#agents.size > this.#maxEntries) this.#agents.delete(this.#agents.keys().next().value as string);
  }

  /** Forgets `commandId` when it is still recorded for `agentId`. */
  forget(agentId: string, commandId: string): void {
    if (this.#agents.get(commandId) === agentId) this.#agents.delete(commandId);
  }

  agentOf(commandId: string): string | undefined {
    return this.#agents.get(commandId);
  }
}
