/**
 * What an agent actor knows about each command's output sequence (proto/README.md "Output"):
 * the highest seq it holds, so resent chunks are dropped (delivered once), jumps are reported as
 * gaps (never silently lost), and RegistrationAck.cursors can tell a reconnecting agent where to
 * resume.
 *
 * Commands the server dispatched are registered by start(); output of a command the actor never
 * dispatched (the server restarted while it ran) is adopted on first sight. Finished commands
 * are remembered, up to maxFinished per agent (oldest forgotten first), because an agent resends
 * a retained result and chunks after a reconnect.
 */

/** Who started a command. */
export type CommandSource = 'exec' | 'server' | 'adopted';

export interface CommandRecord {
  readonly commandId: string;
  readonly source: CommandSource;
  /** Unix ms the server dispatched it; null for adopted commands. */
  readonly dispatchedAtMs: number | null;
  readonly pty: boolean;
  /** Highest seq held (received or recorded as a gap); 0 = none. */
  lastSeq: number;
  finished: boolean;
}

/** A range of seqs that will never arrive. */
export interface SeqRange {
  readonly first: number;
  readonly last: number;
}

export type ChunkVerdict =
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'accept'; readonly record: CommandRecord; readonly seq: number; readonly missing: SeqRange | null };
export type GapVerdict = { readonly kind: 'duplicate' } | { readonly kind: 'accept'; readonly range: SeqRange };
export type ResultVerdict =
  { readonly kind: 'duplicate' } | { readonly kind: 'accept'; readonly record: CommandRecord; readonly missing: SeqRange | null };

/** Default number of finished commands remembered per agent. */
export const kDefaultMaxFinished = 1024;

export class CommandTracker {
  readonly #maxFinished: number;
  readonly #running = new Map<string, CommandRecord>();
  /** Insertion-ordered, so the first key is the oldest. */
  readonly #finished = new Map<string, CommandRecord>();

  constructor(maxFinished = kDefaultMaxFinished) {
    this.#maxFinished = Math.max(1, maxFinished);
  }

  /** Commands not finished yet. */
  get running(): number {
    return this.#running.size;
  }

  get(commandId: string): CommandRecord | undefined {
    return this.#running.get(commandId) ?? this.#finished.get(commandId);
  }

  /** Registers a command the server dispatches. Returns null when the id is already known. */
  start(commandId: string, opts: { source: CommandSource; dispatchedAtMs: number; pty: boolean }): CommandRecord | null {
    if (this.get(commandId) !== undefined) return null;
    const rec: CommandRecord = {
      commandId,
      source: opts.source,
      dispatchedAtMs: opts.dispatchedAtMs,
      pty: opts.pty,
      lastSeq: 0,
      finished: false,
    };
    this.#running.set(commandId, rec);
    return rec;
  }

  /** Forgets a running command (dispatch failed). */
  abandon(commandId: string): void {
    this.#running.delete(commandId);
  }

  /**
   * A chunk with `seq` (0 = the sender does not number chunks: the next seq is assigned).
   * Duplicate when the seq is already held or the command has finished.
   */
  acceptChunk(commandId: string, seq: number): ChunkVerdict {
    const rec = this.#running.get(commandId) ?? this.#finished.get(commandId) ?? this.#adopt(commandId);
    if (rec.finished) return { kind: 'duplicate' };
    const effective = seq > 0 ? seq : rec.lastSeq + 1;
    if (effective <= rec.lastSeq) return { kind: 'duplicate' };
    const missing = effective > rec.lastSeq + 1 ? { first: rec.lastSeq + 1, last: effective - 1 } : null;
    rec.lastSeq = effective;
    return { kind: 'accept', record: rec, seq: effective, missing };
  }

  /** An OutputGap for seqs first..last; the part already held is trimmed off. */
  acceptGap(commandId: string, first: number, last: number): GapVerdict {
    const rec = this.#running.get(commandId) ?? this.#finished.get(commandId) ?? this.#adopt(commandId);
    if (rec.finished || last <= rec.lastSeq || last < first) return { kind: 'duplicate' };
    const range = { first: rec.lastSeq + 1, last };
    rec.lastSeq = last;
    return { kind: 'accept', range };
  }

  /**
   * A CommandResult whose output ended at `lastSeq`. Duplicate when the command already finished.
   * `missing` names output that never arrived (seqs after the last held one, up to lastSeq).
   */
  finish(commandId: string, lastSeq: number): ResultVerdict {
    const rec = this.#running.get(commandId) ?? this.#finished.get(commandId) ?? this.#adopt(commandId);
    if (rec.finished) return { kind: 'duplicate' };
    const missing = lastSeq > rec.lastSeq ? { first: rec.lastSeq + 1, last: lastSeq } : null;
    if (missing !== null) rec.lastSeq = lastSeq;
    rec.finished = true;
    this.#running.delete(commandId);
    this.#finished.set(commandId, rec);
    while (this.#finished.size > this.#maxFinished) {
      const oldest = this.#finished.keys().next().value as string;
      this.#finished.delete(oldest);
    }
    return { kind: 'accept', record: rec, missing };
  }

  /**
   * RegistrationAck.cursors: for each command the agent asks about, the highest seq held; a
   * command with nothing held is left out ("the server holds nothing of it").
   */
  cursorsFor(asked: readonly { commandId: string }[]): { commandId: string; lastSeq: number }[] {
    const out: { commandId: string; lastSeq: number }[] = [];
    for (const { commandId } of asked) {
      const rec = this.get(commandId);
      if (rec !== undefined && rec.lastSeq > 0) out.push({ commandId, lastSeq: rec.lastSeq });
    }
    return out;
  }

  /** Running commands, oldest first. */
  runningRecords(): CommandRecord[] {
    return [...this.#running.values()];
  }

  #adopt(commandId: string): CommandRecord {
    // Bounded: an agent streaming output for ever-new unknown ids must not grow the map for ever.
    if (this.#running.size >= 4 * this.#maxFinished) {
      for (const [id, r] of this.#running) {
        if (r.source === 'adopted') {
          this.#running.delete(id);
          break;
        }
      }
    }
    const rec: CommandRecord = { commandId, source: 'adopted', dispatchedAtMs: null, pty: false, lastSeq: 0, finished: false };
    this.#running.set(commandId, rec);
    return rec;
  }
}
