/**
 * The messages between the screen-states front (screen-states.ts, main thread) and its worker
 * (screen-states.worker.ts). One port, so the worker sees every call in the order it was made.
 */
import type { WireError } from '../../src/core/errors.js';

/** What the worker is started with (workerData). */
export interface ScreenWorkerData {
  scrollback: number;
  maxBacklogBytes: number;
}

/** Main → worker. `data` of `output` is a copy whose buffer was transferred. */
export type ToScreenWorker =
  | { readonly t: 'open'; readonly id: string; readonly cols: number; readonly rows: number; readonly stale: boolean }
  | { readonly t: 'output'; readonly id: string; readonly seq: number; readonly data: Uint8Array }
  | { readonly t: 'resize'; readonly id: string; readonly seq: number; readonly cols: number; readonly rows: number }
  | { readonly t: 'snapshot'; readonly id: string; readonly req: number }
  | { readonly t: 'close'; readonly id: string };

/** Worker → main. A snapshot's `data` (UTF-8) has its buffer transferred. */
export type FromScreenWorker =
  | {
      readonly t: 'snapshot';
      readonly req: number;
      readonly ok: true;
      readonly data: Uint8Array;
      readonly cols: number;
      readonly rows: number;
      readonly anchorSequence: number;
    }
  | { readonly t: 'snapshot'; readonly req: number; readonly ok: false; readonly error: WireError }
  /** A session's output started being dropped (see session-screen.ts); sent once per overrun. */
  | { readonly t: 'overrun'; readonly id: string }
  /** Something the worker cannot answer to a caller (a message for no session is not one). */
  | { readonly t: 'log'; readonly msg: string; readonly obj: Record<string, unknown> };
