/**
 * One session's headless terminal (worker side): output and resizes applied in call order,
 * snapshots taken at their place in that order, and a bound on the bytes waiting to be parsed.
 *
 * xterm.js parses written data later, in time slices (`write(data, cb)` calls back once `data`
 * is parsed). So a resize or a snapshot is itself queued behind the pending writes, as the
 * callback of an empty write: it runs exactly between the chunk before it and the chunk after (or
 * at once, when nothing is queued).
 *
 * Overrun: when more than `maxBacklogBytes` wait to be parsed (output arriving faster than the
 * emulator parses, for longer than a moment), further output is dropped until the backlog is
 * parsed; then the terminal is reset and takes output again. The screen is now known to differ
 * from the real one, so snapshots are refused until the program has redrawn it: a full erase
 * (CSI 2 J or 3 J), a full reset (ESC c), entering the alternate screen (for that screen), or, for
 * a scrolling program, twice the screen's height of line feeds since the reset. A session opened
 * `stale` (the worker was replaced after a crash) starts in that waiting state.
 */
import xtermHeadless from '@xterm/headless';
import { SerializeAddon } from '@xterm/addon-serialize/lib/addon-serialize.mjs';
import { SvcError } from '../../src/core/errors.js';
import { installRegionScroll } from './region-scroll.js';
import { serializeScreen } from './screen-snapshot.js';

// A CommonJS bundle whose exports Node cannot list for a named import.
const { Terminal } = xtermHeadless;

export interface SessionScreenOptions {
  cols: number;
  rows: number;
  /** Rows kept above the screen; snapshots never include them. */
  scrollback: number;
  /** Bytes written but not yet parsed above which output is dropped (see the file comment). */
  maxBacklogBytes: number;
  /** The screen is not known (the worker restarted): refuse snapshots until it is redrawn. */
  stale: boolean;
  /** Called once when an overrun starts dropping output. */
  onOverrun: () => void;
}

/** What a snapshot resolves with (the text is encoded to UTF-8 by the caller). */
export interface ScreenText {
  text: string;
  cols: number;
  rows: number;
  anchorSequence: number;
}

export class SessionScreen {
  readonly #term: InstanceType<typeof Terminal>;
  readonly #addon: InstanceType<typeof SerializeAddon>;
  readonly #maxBacklogBytes: number;
  readonly #onOverrun: () => void;
  /** The last sequence passed to output() or resize(), applied or dropped. */
  #anchor = 0;
  #backlogBytes = 0;
  /** Writes handed to xterm whose callback has not run yet: zero means everything is parsed. */
  #queuedWrites = 0;
  #dropping = false;
  #droppedBytes = 0;
  /** Per buffer: is the screen known to match the program's? False after an overrun or restart. */
  #known = { normal: true, alternate: true };
  #lineFeeds = 0;
  #closed = false;
  /** Snapshots queued behind pending writes: their rejecters, for close(). */
  readonly #waiting = new Set<(err: Error) => void>();

  constructor(opts: SessionScreenOptions) {
    this.#maxBacklogBytes = opts.maxBacklogBytes;
    this.#onOverrun = opts.onOverrun;
    // allowProposedApi: the headless build puts `buffer` and `parser` behind it.
    this.#term = new Terminal({ cols: opts.cols, rows: opts.rows, scrollback: opts.scrollback, allowProposedApi: true });
    installRegionScroll(this.#term);
    this.#addon = new SerializeAddon();
    this.#term.loadAddon(this.#addon);
    const term = this.#term;
    const redrawn = (): boolean => {
      this.#known[term.buffer.active.type] = true;
      return false; // false: xterm's own handler still runs
    };
    term.parser.registerCsiHandler({ final: 'J' }, (params) => (params[0] === 2 || params[0] === 3 ? redrawn() : false));
    term.parser.registerEscHandler({ final: 'c' }, () => {
      this.#known = { normal: true, alternate: true };
      return false;
    });
    term.buffer.onBufferChange((buffer) => {
      if (buffer.type === 'alternate') this.#known.alternate = true;
    });
    term.onLineFeed(() => {
      if (!this.#known.normal && term.buffer.active.type === 'normal' && ++this.#lineFeeds >= 2 * term.rows) this.#known.normal = true;
    });
    if (opts.stale) this.#known = { normal: false, alternate: false };
  }

  get cols(): number {
    return this.#term.cols;
  }

  get rows(): number {
    return this.#term.rows;
  }

  /** Bytes dropped by overruns so far. */
  get droppedBytes(): number {
    return this.#droppedBytes;
  }

  output(sequence: number, data: Uint8Array): void {
    if (this.#closed) return;
    this.#anchor = sequence;
    if (this.#dropping) {
      this.#droppedBytes += data.byteLength;
      return;
    }
    if (this.#backlogBytes > 0 && this.#backlogBytes + data.byteLength > this.#maxBacklogBytes) {
      this.#startDropping(data.byteLength);
      return;
    }
    const n = data.byteLength;
    this.#backlogBytes += n;
    this.#queuedWrites++;
    this.#term.write(data, () => {
      this.#backlogBytes -= n;
      this.#queuedWrites--;
    });
  }

  resize(sequence: number, cols: number, rows: number): void {
    if (this.#closed) return;
    this.#anchor = sequence;
    this.#afterPending(() => this.#term.resize(cols, rows));
  }

  /** The screen after everything passed before this call; rejects when it is not known or on close. */
  snapshot(): Promise<ScreenText> {
    if (this.#closed) return Promise.reject(closedError());
    const anchorSequence = this.#anchor;
    return new Promise<ScreenText>((resolve, reject) => {
      this.#waiting.add(reject);
      this.#afterPending(() => {
        if (!this.#waiting.delete(reject)) return;
        const kind = this.#term.buffer.active.type;
        if (!this.#known[kind]) {
          reject(
            new SvcError(
              'server.unavailable',
              'the screen is not known: output was dropped or the worker restarted, and it has not been redrawn since',
              {
                reason: 'screen_not_known',
              },
            ),
          );
          return;
        }
        try {
          resolve({ text: serializeScreen(this.#term, this.#addon), cols: this.#term.cols, rows: this.#term.rows, anchorSequence });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
  }

  /** Frees the terminal now; queued snapshots reject. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const err = closedError();
    for (const reject of this.#waiting) reject(err);
    this.#waiting.clear();
    this.#term.dispose();
  }

  #startDropping(firstBytes: number): void {
    this.#dropping = true;
    this.#droppedBytes += firstBytes;
    this.#known = { normal: false, alternate: false };
    this.#onOverrun();
    // Runs once everything accepted so far is parsed, the backlog is empty.
    this.#afterPending(() => {
      this.#term.reset();
      // what the accepted bytes redrew while they were parsed does not count: it is gone now
      this.#known = { normal: false, alternate: false };
      this.#lineFeeds = 0;
      this.#dropping = false;
    });
  }

  /**
   * Runs `fn` once every write made before this call is parsed, before any later one: now when
   * nothing is queued (an empty write would wait for xterm's next timer turn, a millisecond or
   * more), else as the callback of an empty write. An exception in a write callback would escape
   * from xterm's timer and end the worker: it stays here.
   */
  #afterPending(fn: () => void): void {
    const run = (): void => {
      if (this.#closed) return;
      try {
        fn();
      } catch {
        // Only resize() and reset() get here, on values the main thread validated.
      }
    };
    if (this.#queuedWrites === 0) {
      run();
      return;
    }
    this.#queuedWrites++;
    this.#term.write('', () => {
      this.#queuedWrites--;
      run();
    });
  }
}

function closedError(): SvcError {
  return new SvcError('session.not_found', 'the session was closed before its snapshot was taken');
}
