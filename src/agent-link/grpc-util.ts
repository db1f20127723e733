/**
 * Small grpc-js helpers of the agents layer: ending a server call with a status, and reading
 * metadata safely.
 */
import type * as grpc from '@grpc/grpc-js';

/** pino's `(obj, msg)` subset. */
export interface LoggerLike {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A server call we can end with a status (Duplex and Writable server streams). */
type EndableCall = Pick<grpc.ServerWritableStream<unknown, unknown>, 'emit' | 'cancelled' | 'writableEnded'>;

/**
 * Ends a server-streaming call with `code` and `details` after what is already queued. grpc-js
 * turns an 'error' emitted on a server stream into the call's status and ends it; a call that is
 * already finished or cancelled is left alone.
 */
export function endWithStatus(call: EndableCall, code: number, details: string): void {
  if (call.cancelled || call.writableEnded) return;
  call.emit('error', Object.assign(new Error(details), { code, details }));
}

/** The first value of a text metadata key, or undefined (binary values are ignored). */
export function firstMetadata(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}
