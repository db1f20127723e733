/**
 * Backpressure on the agent: decides, per command, whether its pipes or PTY are read.
 *
 * The OutputBuffer is drained only as fast as the Connect stream takes messages (gRPC/HTTP2 flow
 * control, which the server holds back when it is behind). While the agent is registered, a
 * command whose unsent output reaches HIGH_WATER_BYTES stops being read (stream pause() /
 * node-pty pause(): the child then blocks on write, as on a slow terminal) and is read again
 * once its unsent output is down to LOW_WATER_BYTES. The same happens to every command that
 * writes while the total of unsent output is above TOTAL_HIGH_WATER_BYTES (many commands each
 * under their own mark), and to a command the server paused with an OutputFlow message (its
 * Exec reader is behind; proto/README.md, "Backpressure"). So while connected, output is never
 * evicted from the buffer for lack of room: nothing is lost under load.
 *
 * Disconnected (no stream, or not yet registered): commands keep running and are read at full
 * speed; their output waits in the OutputBuffer, which past its bound drops the oldest unsent
 * output and reports it as an OutputGap (README, "Backpressure"). Work inside the VM does not
 * stall while sandboxd is away; what a long outage costs is the oldest output of chatty
 * commands, announced as a gap. Server pauses end with their stream.
 */

/**
 * Unsent output of one command above which its pipes/PTY are no longer read, in bytes. 2 MiB is
 * 32 full chunks: enough to keep the stream busy between two reads of a fast producer, small
 * enough that hundreds of paused commands stay far below the buffer's bound.
 */
export const HIGH_WATER_BYTES = 2 * 1024 * 1024;
/** A paused command is read again once its unsent output is at most this many bytes. */
export const LOW_WATER_BYTES = 512 * 1024;
/**
 * Unsent output of all commands above which every command that writes is paused, as a share of
 * the buffer's bound: unsent output then never fills the buffer while connected (sent, retained
 * chunks are evicted first and cost no loss). Resume below TOTAL_LOW_WATER_SHARE.
 */
export const TOTAL_HIGH_WATER_SHARE = 0.25;
export const TOTAL_LOW_WATER_SHARE = 0.125;

export interface OutputFlowOptions {
  /** Bound of the OutputBuffer, in bytes. */
  readonly capacityBytes: number;
  /** Unsent data bytes of one command, and of all. */
  readonly unsentOf: (commandId: string) => number;
  readonly unsentTotal: () => number;
  /** Stops (false) or restarts (true) reading the command's output. */
  readonly setReading: (commandId: string, reading: boolean) => void;
}

export class OutputFlow {
  readonly #opts: OutputFlowOptions;
  readonly #totalHigh: number;
  readonly #totalLow: number;
  /** Commands whose output is not being read. */
  readonly #paused = new Set<string>();
  /** Commands the server asked to pause (this stream only). */
  readonly #serverPaused = new Set<string>();
  #connected = false;
  #pausesSoFar = 0;

  constructor(opts: OutputFlowOptions) {
    this.#opts = opts;
    this.#totalHigh = Math.max(HIGH_WATER_BYTES, Math.floor(opts.capacityBytes * TOTAL_HIGH_WATER_SHARE));
    this.#totalLow = Math.max(LOW_WATER_BYTES, Math.floor(opts.capacityBytes * TOTAL_LOW_WATER_SHARE));
  }

  /** Commands not being read right now. */
  get pausedCount(): number {
    return this.#paused.size;
  }

  /** How many times a command was paused since start (metrics, tests). */
  get pausesSoFar(): number {
    return this.#pausesSoFar;
  }

  /** Registered on a stream (true), or the stream ended (false: every command is read again, server pauses are void). */
  setConnected(connected: boolean): void {
    this.#connected = connected;
    if (connected) return;
    this.#serverPaused.clear();
    for (const id of [...this.#paused]) this.#set(id, true);
  }

  /** OutputFlow from the server. */
  serverFlow(commandId: string, paused: boolean): void {
    // Recorded even before the RegistrationAck: it belongs to this stream and counts once registered.
    if (commandId === '') return;
    if (paused) this.#serverPaused.add(commandId);
    else this.#serverPaused.delete(commandId);
    this.check(commandId);
  }

  /** After a chunk of the command was queued: pause it when over a mark. */
  check(commandId: string): void {
    const paused = this.#paused.has(commandId);
    const want = paused ? !this.#mayResume(commandId) : this.#mustPause(commandId);
    if (want !== paused) this.#set(commandId, !want);
  }

  /** After output was handed to the transport: resume the commands now under their marks. */
  afterSend(): void {
    if (this.#paused.size === 0) return;
    for (const id of [...this.#paused]) if (this.#mayResume(id)) this.#set(id, true);
  }

  /** The command ended: forget it. */
  forget(commandId: string): void {
    this.#paused.delete(commandId);
    this.#serverPaused.delete(commandId);
  }

  #mustPause(id: string): boolean {
    if (!this.#connected) return false;
    if (this.#serverPaused.has(id)) return true;
    const mine = this.#opts.unsentOf(id);
    return mine >= HIGH_WATER_BYTES || (mine > 0 && this.#opts.unsentTotal() >= this.#totalHigh);
  }

  #mayResume(id: string): boolean {
    if (!this.#connected) return true;
    return !this.#serverPaused.has(id) && this.#opts.unsentOf(id) <= LOW_WATER_BYTES && this.#opts.unsentTotal() <= this.#totalLow;
  }

  #set(id: string, reading: boolean): void {
    if (reading) this.#paused.delete(id);
    else {
      this.#paused.add(id);
      this.#pausesSoFar += 1;
    }
    this.#opts.setReading(id, reading);
  }
}
