/**
 * The worker's table of session screens and the one dispatch function for the front's messages
 * (screen-protocol.ts). Kept apart from the worker entry so it runs in-process in tests.
 */
import { SvcError, toWire } from '../../src/core/errors.js';
import { errorMessage } from '../../src/util/error-message.js';
import type { FromScreenWorker, ScreenWorkerData, ToScreenWorker } from './screen-protocol.js';
import { SessionScreen } from './session-screen.js';

const utf8 = new TextEncoder();

export class ScreenBook {
  readonly #screens = new Map<string, SessionScreen>();
  readonly #opts: ScreenWorkerData;
  readonly #post: (msg: FromScreenWorker, transfer?: ArrayBuffer[]) => void;

  constructor(opts: ScreenWorkerData, post: (msg: FromScreenWorker, transfer?: ArrayBuffer[]) => void) {
    this.#opts = opts;
    this.#post = post;
  }

  get size(): number {
    return this.#screens.size;
  }

  handle(msg: ToScreenWorker): void {
    switch (msg.t) {
      case 'open':
        if (this.#screens.has(msg.id)) return;
        this.#screens.set(
          msg.id,
          new SessionScreen({
            cols: msg.cols,
            rows: msg.rows,
            scrollback: this.#opts.scrollback,
            maxBacklogBytes: this.#opts.maxBacklogBytes,
            stale: msg.stale,
            onOverrun: () => this.#post({ t: 'overrun', id: msg.id }),
          }),
        );
        return;
      case 'output':
        this.#screens.get(msg.id)?.output(msg.seq, msg.data);
        return;
      case 'resize':
        this.#screens.get(msg.id)?.resize(msg.seq, msg.cols, msg.rows);
        return;
      case 'snapshot':
        this.#snapshot(msg.id, msg.req);
        return;
      case 'close':
        this.#screens.get(msg.id)?.close();
        this.#screens.delete(msg.id);
        return;
    }
  }

  #snapshot(id: string, req: number): void {
    const screen = this.#screens.get(id);
    if (screen === undefined) {
      this.#post({ t: 'snapshot', req, ok: false, error: toWire(new SvcError('session.not_found', `no screen state for session ${id}`)) });
      return;
    }
    screen.snapshot().then(
      (s) => {
        const data = utf8.encode(s.text);
        this.#post({ t: 'snapshot', req, ok: true, data, cols: s.cols, rows: s.rows, anchorSequence: s.anchorSequence }, [data.buffer]);
      },
      (err: unknown) => {
        if (!(err instanceof SvcError))
          this.#post({ t: 'log', msg: 'screen snapshot failed', obj: { session: id, err: errorMessage(err) } });
        this.#post({ t: 'snapshot', req, ok: false, error: toWire(err) });
      },
    );
  }
}
