/**
 * Server-side screen state for pty-ws.v1 Keyframes: a headless terminal per session in one worker
 * thread, fed each session's PTY output and resizes, that answers snapshots of the screen.
 *
 * This is the main thread's side: every call goes as a postMessage on one port, so the worker
 * applies a session's calls in call order and a snapshot describes exactly the calls made before
 * it. Consecutive output chunks of a session in one synchronous run are copied into one buffer
 * and posted as one message (with the last chunk's sequence) at the end of the run or before any
 * other call; the screen after the joined chunks is the screen after each in turn. No per-byte
 * work here beyond that one copy (posting a view of the caller's chunk would clone its whole
 * underlying buffer, a pooled Buffer's 8 KiB or a slab's megabytes).
 *
 * The worker does not keep the process alive (it is ref'd only while a snapshot is pending). If
 * it dies, pending snapshots reject with server.unavailable, a new one starts (backoff 100 ms
 * doubling to 30 s while it keeps dying) and every open session is reopened at its last size in
 * the "not known" state of session-screen.ts: its snapshots reject until the program redraws.
 * See README.md here for the format and the costs.
 */
import { Buffer } from 'node:buffer';
import { Worker } from 'node:worker_threads';
import { SvcError, fromWire } from '../../src/core/errors.js';
import { errorMessage } from '../../src/util/error-message.js';
import type { FromScreenWorker, ScreenWorkerData, ToScreenWorker } from './screen-protocol.js';

export const SNAPSHOT_FORMAT = 'vt100-screen-state-v1';

export interface ScreenSnapshot {
  /** UTF-8 VT sequences that redraw the screen on a reset terminal of cols × rows. */
  readonly data: Uint8Array;
  readonly format: typeof SNAPSHOT_FORMAT;
  readonly cols: number;
  readonly rows: number;
  /** The last sequence passed to output()/resize() before snapshot() was called (0 if none). */
  readonly anchorSequence: number;
}

/** What the session hub uses. */
export interface ScreenStatePort {
  /** Starts a session's screen, blank, cols × rows (integers 1..1024, else RangeError). Idempotent. */
  open(sessionId: string, cols: number, rows: number): void;
  /** Feeds PTY output (ignored for a session not open). Fire-and-forget; `data` is copied, the caller may reuse it at once. */
  output(sessionId: string, sequence: number, data: Uint8Array): void;
  /** Resizes the screen at this point of the output (integers 1..1024, else RangeError). */
  resize(sessionId: string, sequence: number, cols: number, rows: number): void;
  /**
   * The screen after every output()/resize() called before this call. Rejects session.not_found
   * (unknown or closed session), server.unavailable (the screen is not known after an overrun or
   * a worker restart, or the worker died meanwhile), server.not_ready (stopped).
   */
  snapshot(sessionId: string): Promise<ScreenSnapshot>;
  /** Frees the session's screen; its pending snapshots reject. */
  close(sessionId: string): void;
}

export interface ScreenStates extends ScreenStatePort {
  /** Ends the worker; pending snapshots reject with server.not_ready, later calls are ignored (snapshot rejects). Idempotent. */
  stop(): Promise<void>;
  /** Counters for metrics. */
  stats(): ScreenStatesStats;
}

export interface ScreenStatesStats {
  /** Sessions open. */
  sessions: number;
  pendingSnapshots: number;
  /** Times the worker died and was replaced. */
  restarts: number;
  /** Times a session's output outran the emulator and was dropped (see session-screen.ts). */
  overruns: number;
}

export interface ScreenStatesOptions {
  /** Rows kept above each screen (default 0: snapshots hold the visible screen only). */
  scrollback?: number;
  /** Per session, bytes written but not yet parsed above which output is dropped (default 8 MiB). */
  maxBacklogBytes?: number;
  /** Where worker deaths (error) and overruns (warn) are reported. Default: nowhere. */
  logger?: { warn(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
  /** The worker entry; tests replace it. */
  workerUrl?: URL;
}

const kWorkerUrl = new URL('./screen-states.worker.js', import.meta.url);
const kDefaultMaxBacklogBytes = 8 * 1024 * 1024;
/** Largest cols or rows (pty-ws.v1's limit). */
const kMaxCells = 1024;
const kRestartBackoffBaseMs = 100;
const kRestartBackoffMaxMs = 30_000;
/**
 * Output chunks of a session that arrive in one synchronous run are posted together, up to this
 * many bytes per message: a PTY flood's 4 KiB chunks cost one postMessage per run, not one each.
 */
const kOutputBatchBytes = 32 * 1024;
/** A worker that lived this long before dying restarts without delay. */
const kHealthyRunMs = 10_000;

/** Starts the worker (it loads in the background; calls made meanwhile wait in its queue). */
export function startScreenStates(opts: ScreenStatesOptions = {}): ScreenStates {
  return new ScreenStateWorker(opts);
}

interface Pending {
  resolve: (s: ScreenSnapshot) => void;
  reject: (err: Error) => void;
}

class ScreenStateWorker implements ScreenStates {
  readonly #data: ScreenWorkerData;
  readonly #url: URL;
  readonly #logger: ScreenStatesOptions['logger'];
  readonly #pending = new Map<number, Pending>();
  /** Open sessions and their current size: what a replacement worker reopens. */
  readonly #sizes = new Map<string, { cols: number; rows: number }>();
  #worker: Worker | undefined;
  #nextReq = 1;
  #restarts = 0;
  #quickDeaths = 0;
  #launchedAt = 0;
  #overruns = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #stopping: Promise<void> | undefined;
  /** Output not posted yet: consecutive chunks of one session, up to the end of the synchronous run. */
  #batch: { id: string; seq: number; bytes: Uint8Array<ArrayBuffer>; used: number } | undefined;

  constructor(opts: ScreenStatesOptions) {
    this.#data = { scrollback: opts.scrollback ?? 0, maxBacklogBytes: opts.maxBacklogBytes ?? kDefaultMaxBacklogBytes };
    this.#url = opts.workerUrl ?? kWorkerUrl;
    this.#logger = opts.logger;
    this.#launch();
  }

  open(sessionId: string, cols: number, rows: number): void {
    checkSize(cols, rows);
    if (this.#stopping !== undefined || this.#sizes.has(sessionId)) return;
    this.#sizes.set(sessionId, { cols, rows });
    this.#post({ t: 'open', id: sessionId, cols, rows, stale: false });
  }

  output(sessionId: string, sequence: number, data: Uint8Array): void {
    if (this.#worker === undefined || !this.#sizes.has(sessionId)) return;
    let batch = this.#batch;
    if (batch !== undefined && (batch.id !== sessionId || batch.used + data.byteLength > batch.bytes.byteLength)) {
      this.#flushOutput();
      batch = undefined;
    }
    if (batch === undefined) {
      // allocUnsafeSlow: an ArrayBuffer of its own (transferable), not zero-filled.
      const bytes = new Uint8Array(Buffer.allocUnsafeSlow(Math.max(kOutputBatchBytes, data.byteLength)).buffer);
      batch = this.#batch = { id: sessionId, seq: sequence, bytes, used: 0 };
      queueMicrotask(this.#flushQueued);
    }
    batch.bytes.set(data, batch.used);
    batch.used += data.byteLength;
    batch.seq = sequence;
  }

  readonly #flushQueued = (): void => this.#flushOutput();

  /** Posts the output batched since the last post: one session's consecutive chunks as one. */
  #flushOutput(): void {
    const batch = this.#batch;
    if (batch === undefined) return;
    this.#batch = undefined;
    const data = batch.bytes.subarray(0, batch.used);
    const msg: ToScreenWorker = { t: 'output', id: batch.id, seq: batch.seq, data };
    this.#worker?.postMessage(msg, [data.buffer]);
  }

  resize(sessionId: string, sequence: number, cols: number, rows: number): void {
    checkSize(cols, rows);
    const size = this.#sizes.get(sessionId);
    if (size === undefined) return;
    size.cols = cols;
    size.rows = rows;
    this.#post({ t: 'resize', id: sessionId, seq: sequence, cols, rows });
  }

  snapshot(sessionId: string): Promise<ScreenSnapshot> {
    if (this.#stopping !== undefined) return Promise.reject(new SvcError('server.not_ready', 'the screen states are stopped'));
    const worker = this.#worker;
    if (worker === undefined) return Promise.reject(new SvcError('server.unavailable', 'the screen-states worker is restarting'));
    const req = this.#nextReq++;
    return new Promise<ScreenSnapshot>((resolve, reject) => {
      this.#pending.set(req, { resolve, reject });
      // A pending answer keeps the process alive, so `await snapshot()` cannot be cut short.
      if (this.#pending.size === 1) worker.ref();
      this.#post({ t: 'snapshot', id: sessionId, req });
    });
  }

  close(sessionId: string): void {
    if (!this.#sizes.delete(sessionId)) return;
    this.#post({ t: 'close', id: sessionId });
  }

  stats(): ScreenStatesStats {
    return { sessions: this.#sizes.size, pendingSnapshots: this.#pending.size, restarts: this.#restarts, overruns: this.#overruns };
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      clearTimeout(this.#restartTimer);
      this.#failPending(new SvcError('server.not_ready', 'the screen states are stopped'));
      this.#sizes.clear();
      const worker = this.#worker;
      this.#worker = undefined;
      if (worker !== undefined) await worker.terminate();
    })();
    return this.#stopping;
  }

  #post(msg: ToScreenWorker): void {
    this.#flushOutput();
    this.#worker?.postMessage(msg);
  }

  #launch(): void {
    this.#restartTimer = undefined;
    if (this.#stopping !== undefined) return;
    const worker = new Worker(this.#url, { workerData: this.#data, name: 'screen-states' });
    worker.unref();
    this.#worker = worker;
    this.#launchedAt = Date.now();
    let lastError: unknown;
    worker.on('message', (msg: FromScreenWorker) => this.#onMessage(msg));
    worker.on('error', (err) => {
      lastError = err;
    });
    worker.on('exit', (code) => this.#onExit(worker, code, lastError));
    for (const [id, { cols, rows }] of this.#sizes) this.#post({ t: 'open', id, cols, rows, stale: true });
  }

  #onMessage(msg: FromScreenWorker): void {
    switch (msg.t) {
      case 'snapshot': {
        const pending = this.#pending.get(msg.req);
        if (pending === undefined) return;
        this.#settled(msg.req);
        if (msg.ok) {
          const { data, cols, rows, anchorSequence } = msg;
          pending.resolve({ data, format: SNAPSHOT_FORMAT, cols, rows, anchorSequence });
        } else pending.reject(fromWire(msg.error));
        return;
      }
      case 'overrun':
        this.#overruns++;
        this.#logger?.warn(
          { session: msg.id },
          'terminal output outran the screen-state emulator; dropping it until the screen is redrawn',
        );
        return;
      case 'log':
        this.#logger?.error(msg.obj, msg.msg);
        return;
    }
  }

  #settled(req: number): void {
    this.#pending.delete(req);
    if (this.#pending.size === 0) this.#worker?.unref();
  }

  #failPending(err: Error): void {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    this.#worker?.unref();
    for (const p of all) p.reject(err);
  }

  #onExit(worker: Worker, exitCode: number, lastError: unknown): void {
    if (this.#stopping !== undefined || this.#worker !== worker) return;
    this.#worker = undefined;
    this.#failPending(new SvcError('server.unavailable', 'the screen-states worker died'));
    this.#restarts++;
    this.#quickDeaths = Date.now() - this.#launchedAt >= kHealthyRunMs ? 0 : this.#quickDeaths + 1;
    const delayMs = this.#quickDeaths === 0 ? 0 : Math.min(kRestartBackoffMaxMs, kRestartBackoffBaseMs * 2 ** (this.#quickDeaths - 1));
    this.#logger?.error(
      { exitCode, err: lastError === undefined ? undefined : errorMessage(lastError), sessions: this.#sizes.size, restartDelayMs: delayMs },
      'the screen-states worker died; starting another (open sessions have no screen until redrawn)',
    );
    this.#restartTimer = setTimeout(() => this.#launch(), delayMs);
    this.#restartTimer.unref();
  }
}

function checkSize(cols: number, rows: number): void {
  if (!Number.isInteger(cols) || !Number.isInteger(rows) || cols < 1 || rows < 1 || cols > kMaxCells || rows > kMaxCells) {
    throw new RangeError(`a screen is 1..${kMaxCells} columns by 1..${kMaxCells} rows, got ${cols} x ${rows}`);
  }
}
