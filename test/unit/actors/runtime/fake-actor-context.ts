/**
 * An ActorContext for driving an actor directly in a test: emitted frames are collected (copied),
 * emit can be made to report a full ring, and log lines are kept.
 */
import type { ActorContext } from '../../../../actors/runtime/actor.js';

export interface EmittedFrame {
  kind: number;
  key: string;
  payload: Uint8Array;
}

export class FakeActorContext implements ActorContext {
  readonly id: string;
  readonly type = 'agent-connection';
  readonly shardIndex = 0;
  readonly frames: EmittedFrame[] = [];
  readonly logs: { level: string; obj: object; msg: string | undefined }[] = [];
  /** While true, emit reports a full ring. */
  full = false;
  #writable: (() => void)[] = [];
  stoppedSelf = false;

  readonly logger = {
    info: (obj: object, msg?: string) => this.logs.push({ level: 'info', obj, msg }),
    warn: (obj: object, msg?: string) => this.logs.push({ level: 'warn', obj, msg }),
    error: (obj: object, msg?: string) => this.logs.push({ level: 'error', obj, msg }),
  };

  constructor(id: string) {
    this.id = id;
  }

  emit(kind: number, key: string, payload: Uint8Array): boolean {
    if (this.full) return false;
    this.frames.push({ kind, key, payload: payload.slice() });
    return true;
  }

  whenWritable(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => this.#writable.push(resolve));
  }

  /** Ends the "full ring" and wakes waiters. */
  drain(): void {
    this.full = false;
    for (const w of this.#writable.splice(0)) w();
  }

  spawn(): void {
    throw new Error('not used');
  }

  stopSelf(): void {
    this.stoppedSelf = true;
  }

  /** Frames of `kind`, and forget all collected frames when `clear`. */
  ofKind(kind: number): EmittedFrame[] {
    return this.frames.filter((f) => f.kind === kind);
  }
}
