/**
 * What a session hub (session-hub.ts) says to a client, independent of the wire: the hub keeps
 * one stream of session events per session and each attached client has a dialect that turns
 * events into its own messages. Dialects: pty-ws.v1 JSON and pty-ws.v1.binary
 * (binding-dialect.ts), and the dashboard WebSocket's session messages (the reference
 * dashboard's hub messages, src/streaming/).
 *
 * A broadcast event is encoded once per dialect `key`, and the same bytes go to every client of
 * that dialect. Connection-local events (RoleAssigned, a join's Keyframe, errors) are encoded per
 * client. `position` is the sequence of the last session event the client was sent (the binding
 * stamps connection-local frames with it).
 */
import type { ClosedReason, ErrorCode, GoodbyeReason, OutputStream, Role, SessionErrorCode } from './binding/codes.js';
import type { ClientRef, SessionHostCapabilities, TerminalSize } from './binding/frames.js';

/** One event of the session stream (kept in the replay buffer; `sequence` from the hub's counter). */
export type SessionEvent = { readonly sequence: number; readonly id: string; readonly ts: string } & (
  | { readonly kind: 'Output'; readonly stream: OutputStream; readonly data: Uint8Array }
  | { readonly kind: 'Resize'; readonly cols: number; readonly rows: number }
  | { readonly kind: 'MembershipChanged'; readonly controllers: readonly ClientRef[]; readonly observers: readonly ClientRef[] }
  | {
      readonly kind: 'Keyframe';
      readonly snapshot: Uint8Array;
      readonly format: string;
      readonly cols: number;
      readonly rows: number;
      readonly anchorSequence: number;
    }
  | { readonly kind: 'Closed'; readonly exitCode: number | null; readonly reason: ClosedReason; readonly detail?: string }
  | { readonly kind: 'Error'; readonly code: SessionErrorCode; readonly message: string }
);
export type SessionEventKind = SessionEvent['kind'];

/** What the hub knows when a client connects. */
export interface HelloInfo {
  readonly sessionId: string;
  readonly agentId: string | undefined;
  readonly currentSequence: number;
  /** Undefined for a session a join has yet to start. */
  readonly sessionBackend: string | undefined;
  readonly sessionClass: string | undefined;
  readonly terminalSize: TerminalSize;
  readonly host: SessionHostCapabilities;
  readonly limits: { readonly maxQueuedBytes: number; readonly replayFrames: number; readonly replayBytes: number };
}

/** A role decision for one client. */
export interface RoleInfo {
  readonly role: Role;
  readonly clientId: string;
  readonly requested: Role;
  /** True when a controller request was answered with observer. */
  readonly downgraded: boolean;
  /** Why: `lease_held`, `first_joiner`, `released`. */
  readonly reason: string | undefined;
}

/** Session lifecycle news that is not part of the binding's stream (state, agent away/back). */
export interface StatusInfo {
  readonly state: string;
  readonly agentConnected: boolean;
}

export interface SessionDialect {
  /** Broadcast events are encoded once per key. */
  readonly key: string;
  /** The first message of a connection (binding_hello), if the dialect has one. */
  hello(info: HelloInfo): string | undefined;
  /** A session event, broadcast or (RoleAssigned aside) connection-local; undefined: not shown in this dialect. */
  event(e: SessionEvent): string | Uint8Array | undefined;
  /** The answer to a join or role request, to that client only. */
  role(r: RoleInfo, position: number, requestId: string | undefined): string | undefined;
  /** A connection-local keyframe (join, request): the event with the client's position as its sequence. */
  keyframe(e: Extract<SessionEvent, { kind: 'Keyframe' }>, position: number, requestId: string | undefined): string | undefined;
  /** A refused request or a fatal problem. */
  error(code: ErrorCode, message: string, position: number, requestId: string | undefined): string;
  /** Lifecycle news (detached, agent away); undefined: not shown in this dialect. */
  status(s: StatusInfo): string | undefined;
  /** Sent right before an orderly close (1000). */
  goodbye(reason: GoodbyeReason, detail: string | undefined): string | undefined;
}
