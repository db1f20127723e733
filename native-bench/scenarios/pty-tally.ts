/**
 * What the `pty` scenario's nothing-lost check counts for each client (pty-clients.ts): the Output
 * it drew, by sequence, from a base POSITION IN THE STREAM, not from a moment in time.
 *
 * The clients read their sockets at their own pace: when the base is taken (after the controller
 * sees READY), an observer whose join keyframe is still being made has not yet received READY;
 * it receives it after its keyframe, which is right (the snapshot predates READY), and a count
 * "bytes since the base was taken" then charged that observer READY's 15 bytes
 * (`\x1b[2J\x1b[HREADY\r\r\n`) that the controller had drawn before it. Counting only sequences
 * above one stream position makes every client count the same events whenever it reads them.
 */

/** One client's Output and drawn keyframes, by sequence. */
export class StreamTally {
  /** Output with a sequence above this counts (-1: all). */
  #base = -1;
  readonly #outputs = new Map<number, number>();
  /** Anchors of the keyframes drawn above the base: each stands for the Output it covers. */
  readonly #keyframes: number[] = [];

  /** Sequence → bytes of each Output drawn above the base. */
  get outputs(): ReadonlyMap<number, number> {
    return this.#outputs;
  }

  /** Keyframes drawn whose anchor is above the base. */
  get keyframes(): number {
    return this.#keyframes.length;
  }

  get bytes(): number {
    let n = 0;
    for (const b of this.#outputs.values()) n += b;
    return n;
  }

  output(sequence: number, bytes: number): void {
    if (sequence > this.#base) this.#outputs.set(sequence, (this.#outputs.get(sequence) ?? 0) + bytes);
  }

  /** A keyframe the client drew (its anchor: the newest Output it covers). */
  keyframe(anchorSequence: number): void {
    if (anchorSequence > this.#base) this.#keyframes.push(anchorSequence);
  }

  /** Counts from `sequence` on: what is at or below it is forgotten, and arrives uncounted. */
  rebase(sequence: number): void {
    this.#base = sequence;
    this.#outputs.clear();
    this.#keyframes.length = 0;
  }
}

/** Where observers' tallies differ from the controller's: the first few sequences, both ways. */
export function tallyDifferences(controller: StreamTally, observers: readonly StreamTally[], max = 5): string[] {
  const differences: string[] = [];
  const seqs = (l: [number, number][]): string => l.map(([q, n]) => `${q} (${n} B)`).join(', ');
  observers.forEach((o, i) => {
    if (differences.length >= max) return;
    const extra = [...o.outputs].filter(([q]) => !controller.outputs.has(q)).slice(0, 3);
    const missing = [...controller.outputs].filter(([q]) => !o.outputs.has(q)).slice(0, 3);
    const unlike = [...o.outputs].filter(([q, n]) => controller.outputs.has(q) && controller.outputs.get(q) !== n).slice(0, 3);
    if (extra.length > 0) differences.push(`observer ${i} got ${seqs(extra)} which the controller did not`);
    if (missing.length > 0) differences.push(`observer ${i} lacks ${seqs(missing)}`);
    if (unlike.length > 0) differences.push(`observer ${i} got other bytes at ${seqs(unlike)}`);
  });
  return differences;
}
