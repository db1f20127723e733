/**
 * Encoders of pty-ws.v1 frames. Server frames get an `id` (fresh UUIDv7 unless the frame answers a
 * request, whose id it echoes), a `ts` (now, or the original time of a replayed frame) and the
 * session `sequence` the caller passes: the hub owns the counter, these functions only stamp it.
 * Client-frame encoders are here too, for sandboxd's own clients and the tests.
 */
import {
  BINDING_URI,
  BINDING_VERSION,
  ERROR_CODES,
  KEYFRAME_FORMAT_VT100,
  type ClosedReason,
  type ErrorCode,
  type GoodbyeReason,
  type OutputStream,
  type Role,
  type SessionErrorCode,
} from './codes.js';
import type {
  BindingGoodbyeFrame,
  BindingHelloFrame,
  BindingHelloPayload,
  ClientFrame,
  ClientRef,
  ErrorFrame,
  ServerPingFrame,
  ServerPongFrame,
  SessionFrame,
  SessionFramePayload,
} from './frames.js';
import { encodeBase64, newFrameId, nowTs } from './values.js';

/** Overrides for one encoded frame: a replay keeps its original id and time. */
export interface StampOptions {
  id?: string;
  ts?: string;
}

function stamp(opts: StampOptions | undefined): { id: string; ts: string } {
  return { id: opts?.id ?? newFrameId(), ts: opts?.ts ?? nowTs() };
}

/** The first frame of every connection. Its sequence is 0: the session's position is payload.session.current_sequence. */
export function helloFrame(payload: Omit<BindingHelloPayload, 'binding_uri' | 'binding_version'>, opts?: StampOptions): BindingHelloFrame {
  return {
    op: 'binding_hello',
    ...stamp(opts),
    sequence: 0,
    payload: { binding_uri: BINDING_URI, binding_version: BINDING_VERSION, ...payload },
  };
}

export function sessionFrame(sequence: number, payload: SessionFramePayload, opts?: StampOptions): SessionFrame {
  return { op: 'pty.session_frame', ...stamp(opts), sequence, payload };
}

export function outputFrame(sequence: number, bytes: Uint8Array, stream: OutputStream = 'stdout', opts?: StampOptions): SessionFrame {
  return sessionFrame(sequence, { kind: 'Output', stream, data: encodeBase64(bytes) }, opts);
}

export function resizeFrame(sequence: number, cols: number, rows: number, opts?: StampOptions): SessionFrame {
  return sessionFrame(sequence, { kind: 'Resize', cols, rows }, opts);
}

export function roleAssignedFrame(
  sequence: number,
  a: { role: Role; clientId: string; downgraded?: boolean; reason?: string },
  opts?: StampOptions,
): SessionFrame {
  const payload: SessionFramePayload = { kind: 'RoleAssigned', role: a.role, client_id: a.clientId };
  if (a.downgraded !== undefined) payload.downgraded = a.downgraded;
  if (a.reason !== undefined) payload.reason = a.reason;
  return sessionFrame(sequence, payload, opts);
}

export function membershipChangedFrame(
  sequence: number,
  controllers: ClientRef[],
  observers: ClientRef[],
  opts?: StampOptions,
): SessionFrame {
  return sessionFrame(sequence, { kind: 'MembershipChanged', controllers, observers }, opts);
}

export function keyframeFrame(
  sequence: number,
  k: { snapshot: Uint8Array; cols: number; rows: number; anchorSequence: number; format?: string },
  opts?: StampOptions,
): SessionFrame {
  return sessionFrame(
    sequence,
    {
      kind: 'Keyframe',
      snapshot: encodeBase64(k.snapshot),
      snapshot_format: k.format ?? KEYFRAME_FORMAT_VT100,
      snapshot_cols: k.cols,
      snapshot_rows: k.rows,
      anchor_sequence: k.anchorSequence,
    },
    opts,
  );
}

export function closedFrame(
  sequence: number,
  exitCode: number | null,
  reason: ClosedReason,
  detail?: string,
  opts?: StampOptions,
): SessionFrame {
  const payload: SessionFramePayload = { kind: 'Closed', exit_code: exitCode, reason };
  if (detail !== undefined) payload.detail = detail;
  return sessionFrame(sequence, payload, opts);
}

export function sessionErrorFrame(sequence: number, code: SessionErrorCode, message: string, opts?: StampOptions): SessionFrame {
  return sessionFrame(sequence, { kind: 'Error', code, message }, opts);
}

/**
 * The binding-level Error frame. `requestId` is the failed request's id (echoed); without one the
 * frame gets a fresh id. No sequence unless the caller puts the error into the session's stream.
 */
export function errorFrame(
  e: { code: ErrorCode; message: string; requestId?: string | undefined; sequence?: number },
  opts?: Pick<StampOptions, 'ts'>,
): ErrorFrame {
  const row = ERROR_CODES[e.code];
  const frame: ErrorFrame = {
    op: 'Error',
    ...stamp({ ...opts, ...(e.requestId === undefined ? {} : { id: e.requestId }) }),
    payload: { code: e.code, message: e.message, a2a_error: row.a2a === null ? null : { type: row.a2a }, retryable: row.retryable },
  };
  if (e.sequence !== undefined) frame.sequence = e.sequence;
  return frame;
}

/** Sent right before an orderly close (1000). */
export function goodbyeFrame(reason: GoodbyeReason, detail?: string, opts?: StampOptions): BindingGoodbyeFrame {
  return { op: 'binding_goodbye', ...stamp(opts), payload: detail === undefined ? { reason } : { reason, detail } };
}

/** A server-initiated application ping: `client_ts` is the pinging side's time, as the binding names it. */
export function pingFrame(opts?: StampOptions): ServerPingFrame {
  const s = stamp(opts);
  return { op: 'ping', ...s, payload: { client_ts: s.ts } };
}

/** The answer to a client's ping: its id and client_ts echoed, server_ts now. */
export function pongFrame(requestId: string, clientTs: string, opts?: Pick<StampOptions, 'ts'>): ServerPongFrame {
  const s = stamp({ ...opts, id: requestId });
  return { op: 'pong', ...s, payload: { client_ts: clientTs, server_ts: s.ts } };
}

/** Serializes any frame to the text of one WebSocket message. */
export function toText(
  frame: ClientFrame | BindingHelloFrame | SessionFrame | ErrorFrame | BindingGoodbyeFrame | ServerPingFrame | ServerPongFrame,
): string {
  return JSON.stringify(frame);
}

/** Builds a client frame with a fresh id and the current time (what sandboxd's own clients send). */
export function clientFrame<F extends ClientFrame>(
  op: F['op'],
  payload: F['payload'],
  extra?: Pick<ClientFrame, 'replay_from' | 'service_parameters' | 'extensions'> & StampOptions,
): F {
  const { id, ts, ...rest } = extra ?? {};
  return { op, ...stamp({ ...(id === undefined ? {} : { id }), ...(ts === undefined ? {} : { ts }) }), ...rest, payload } as F;
}
