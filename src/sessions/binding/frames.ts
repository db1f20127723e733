/**
 * The types of every pty-ws.v1 frame sandboxd speaks (binding + pty-extensions). The JSON Schema
 * of the same frames is pty-ws-v1.schema.json; README.md tables them.
 */
import type {
  A2aClientOp,
  ClosedReason,
  ErrorCode,
  GoodbyeReason,
  OutputStream,
  Role,
  SessionBackend,
  SessionClass,
  SessionErrorCode,
  Subprotocol,
} from './codes.js';

export interface TerminalSize {
  cols: number;
  rows: number;
}

/** The envelope fields a client may send besides op and payload (never `sequence`). */
export interface ClientEnvelope<Op extends string, P> {
  op: Op;
  /** Request id, echoed by the answer (Error frames included). */
  id: string;
  /** RFC 3339 time at the sender: accepted, never used for ordering. */
  ts: string;
  /** Replay frames with sequence > replay_from; only on pty.join_session (and SubscribeToTask). */
  replay_from?: number | null;
  /** A2A service parameters (trace context, …), cached from the first frame. */
  service_parameters?: Record<string, unknown>;
  /** Extension URIs the client activates. */
  extensions?: string[];
  payload: P;
}

export interface JoinSessionPayload {
  role: Role;
  /** Initial size hint, used only when this join starts the PTY. */
  cols?: number;
  rows?: number;
  client_label?: string;
  // sandboxd/spec 4.2 additions: what to start when this join starts the PTY.
  session_backend?: SessionBackend;
  session_class?: SessionClass;
  argv?: string[];
  /** Run through /bin/sh -lc; exclusive with argv. */
  command?: string;
  cwd?: string;
  env?: Record<string, string>;
  terminal_size?: TerminalSize;
}

export type JoinSessionFrame = ClientEnvelope<'pty.join_session', JoinSessionPayload>;
export type SessionInputFrame = ClientEnvelope<'pty.session_input', { data: string }>;
export type SessionResizeFrame = ClientEnvelope<'pty.session_resize', TerminalSize>;
export type RequestRoleFrame = ClientEnvelope<'pty.request_role', { role: Role }>;
export type RequestKeyframeFrame = ClientEnvelope<'pty.request_keyframe', Record<string, never>>;
export type LeaveSessionFrame = ClientEnvelope<'pty.leave_session', Record<string, never>>;
export type ClientPingFrame = ClientEnvelope<'ping', { client_ts: string }>;
export type ClientPongFrame = ClientEnvelope<'pong', { client_ts: string; server_ts: string }>;

/** Every client frame sandboxd acts on. A2A core ops decode to UNSUPPORTED_OPERATION instead. */
export type ClientFrame =
  | JoinSessionFrame
  | SessionInputFrame
  | SessionResizeFrame
  | RequestRoleFrame
  | RequestKeyframeFrame
  | LeaveSessionFrame
  | ClientPingFrame
  | ClientPongFrame;
export type ClientOp = ClientFrame['op'];

/** An A2A core request frame (its payload is not examined: sandboxd refuses the op). */
export type A2aRequestFrame = ClientEnvelope<A2aClientOp, Record<string, unknown>>;

// ---------------------------------------------------------------------------------------------
// Server → client

export interface ServerEnvelope<Op extends string, P> {
  op: Op;
  /** Fresh for server-initiated frames; the request's id for an answer. */
  id: string;
  ts: string;
  /** The session's frame counter (binding_hello: always 0; absent on connection-local frames). */
  sequence?: number;
  payload: P;
}

/** One backend/class pair the session host can run, with whether it is available here. */
export interface SessionHostPair {
  session_backend: SessionBackend;
  session_class: SessionClass;
  available: boolean;
  /** Why an advertised pair is unavailable (e.g. "zellij is not installed in the guest"). */
  reason?: string;
}

export interface SessionHostCapabilities {
  default_backend: SessionBackend;
  default_class: SessionClass;
  /** Backends and classes of the available pairs. */
  supported_backends: SessionBackend[];
  supported_classes: SessionClass[];
  /** Every pair sandboxd knows, available or not, so a client can show why one is off. */
  pairs: SessionHostPair[];
  observe_supported: boolean;
  drive_supported: boolean;
  reattach_supported: boolean;
}

/** pty-extensions/v1 params as this server applies them (max_controllers is 1 in sandboxd). */
export interface PtyExtensionParams {
  max_controllers: number;
  max_observers: number;
  keyframe_interval_seconds: number;
  keyframe_interval_frames: number;
  replay_buffer_frames: number;
  replay_buffer_retention_seconds: number;
  default_cols: number;
  default_rows: number;
}

export interface PayloadModes {
  /** The subprotocol this connection negotiated. */
  subprotocol: Subprotocol;
  /** True when PTY output travels as PW1O binary frames and PW1I input is accepted. */
  binary: boolean;
  json_subprotocol: 'pty-ws.v1';
  binary_subprotocol: 'pty-ws.v1.binary';
  max_input_bytes: number;
  max_frame_bytes: number;
}

export interface BindingHelloPayload {
  binding_uri: string;
  binding_version: string;
  supported_operations: string[];
  activated_extensions: string[];
  session: {
    session_id: string;
    current_sequence: number;
    agent_id?: string;
    session_backend?: SessionBackend;
    session_class?: SessionClass;
    terminal_size?: TerminalSize;
  };
  session_host: SessionHostCapabilities;
  payload_modes: PayloadModes;
  /** Parameters of each activated extension, keyed by its URI. */
  extension_params: Record<string, PtyExtensionParams>;
  server_info: { name: string; version: string };
}

export interface ClientRef {
  client_id: string;
  label?: string;
}

export interface OutputKind {
  kind: 'Output';
  stream: OutputStream;
  data: string;
}
export interface ResizeKind {
  kind: 'Resize';
  cols: number;
  rows: number;
}
export interface RoleAssignedKind {
  kind: 'RoleAssigned';
  role: Role;
  client_id: string;
  downgraded?: boolean;
  reason?: string;
}
export interface MembershipChangedKind {
  kind: 'MembershipChanged';
  controllers: ClientRef[];
  observers: ClientRef[];
}
export interface KeyframeKind {
  kind: 'Keyframe';
  snapshot: string;
  snapshot_format: string;
  snapshot_cols: number;
  snapshot_rows: number;
  anchor_sequence: number;
}
export interface ClosedKind {
  kind: 'Closed';
  exit_code: number | null;
  reason: ClosedReason;
  detail?: string;
}
export interface SessionErrorKind {
  kind: 'Error';
  code: SessionErrorCode;
  message: string;
}
export type SessionFramePayload =
  OutputKind | ResizeKind | RoleAssignedKind | MembershipChangedKind | KeyframeKind | ClosedKind | SessionErrorKind;

export interface ErrorPayload {
  code: ErrorCode;
  message: string;
  /** The A2A core error ({type}) the code maps to; null for binding-specific codes. */
  a2a_error: { type: string } | null;
  retryable: boolean;
}

export type BindingHelloFrame = ServerEnvelope<'binding_hello', BindingHelloPayload>;
export type SessionFrame = ServerEnvelope<'pty.session_frame', SessionFramePayload>;
export type ErrorFrame = ServerEnvelope<'Error', ErrorPayload>;
export type BindingGoodbyeFrame = ServerEnvelope<'binding_goodbye', { reason: GoodbyeReason; detail?: string }>;
export type ServerPingFrame = ServerEnvelope<'ping', { client_ts: string }>;
export type ServerPongFrame = ServerEnvelope<'pong', { client_ts: string; server_ts: string }>;

export type ServerFrame = BindingHelloFrame | SessionFrame | ErrorFrame | BindingGoodbyeFrame | ServerPingFrame | ServerPongFrame;
