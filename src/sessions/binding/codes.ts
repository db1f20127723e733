/**
 * pty-ws.v1 as published by the reference binding (pty-ws/v1 1.0.0 with pty-extensions/v1 1.0.0):
 * the identifiers, the operation names, the error and close-code tables and the limits that the
 * decoder, the encoders and the schema (pty-ws-v1.schema.json) share. README.md in this folder
 * tables the frames and says where sandboxd adds to or departs from the published contract.
 */

export const BINDING_URI = 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1';
export const BINDING_VERSION = '1.0.0';
export const PTY_EXTENSIONS_URI = 'https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1';

/** The WebSocket subprotocols: JSON text frames only, or JSON plus the binary hot path (binary.ts). */
export const SUBPROTOCOL_JSON = 'pty-ws.v1';
export const SUBPROTOCOL_BINARY = 'pty-ws.v1.binary';
export type Subprotocol = typeof SUBPROTOCOL_JSON | typeof SUBPROTOCOL_BINARY;

/** The pty-extensions verbs a client sends. */
export const PTY_CLIENT_OPS = [
  'pty.join_session',
  'pty.session_input',
  'pty.session_resize',
  'pty.request_role',
  'pty.request_keyframe',
  'pty.leave_session',
] as const;
export type PtyClientOp = (typeof PTY_CLIENT_OPS)[number];

/** Binding-level keepalive, sent by either side. */
export const KEEPALIVE_OPS = ['ping', 'pong'] as const;

/**
 * The A2A core operations the binding carries. decode.ts checks their envelope and answers
 * UNSUPPORTED_OPERATION; the routes hand the ones a2a.ts serves to the A2A handler when one is
 * wired (and binding_hello lists them then), the others stay unsupported.
 */
export const A2A_CLIENT_OPS = [
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'ListTasks',
  'CancelTask',
  'SubscribeToTask',
  'Unsubscribe',
  'UpdateServiceParameters',
  'SetTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfig',
  'DeleteTaskPushNotificationConfig',
] as const;
export type A2aClientOp = (typeof A2A_CLIENT_OPS)[number];

/** Ops only a server sends; a client sending one is refused as INVALID_REQUEST. */
export const SERVER_ONLY_OPS = [
  'binding_hello',
  'binding_goodbye',
  'pty.session_frame',
  'Error',
  'TaskStatusUpdate',
  'SendMessage.Response',
  'SendStreamingMessage.Accepted',
  'GetTask.Response',
  'ListTasks.Response',
  'CancelTask.Response',
  'SubscribeToTask.Accepted',
  'Unsubscribe.Response',
  'UpdateServiceParameters.Response',
] as const;

/** What every binding_hello advertises: the PTY verbs and keepalive (plus a2a.ts's ops when the A2A handler is wired). */
export const SUPPORTED_OPERATIONS: readonly string[] = [...PTY_CLIENT_OPS, ...KEEPALIVE_OPS];

/** Binding-level error codes (op "Error"), with the A2A core error each maps to (null: binding-specific). */
export const ERROR_CODES = {
  TASK_NOT_FOUND: { a2a: 'TaskNotFound', retryable: false },
  TASK_NOT_CANCELABLE: { a2a: 'TaskNotCancelable', retryable: false },
  INVALID_REQUEST: { a2a: 'InvalidRequest', retryable: false },
  UNSUPPORTED_OPERATION: { a2a: 'UnsupportedOperation', retryable: false },
  UNAUTHENTICATED: { a2a: 'Unauthenticated', retryable: false },
  PERMISSION_DENIED: { a2a: 'PermissionDenied', retryable: false },
  RATE_LIMITED: { a2a: 'RateLimited', retryable: true },
  INTERNAL: { a2a: 'Internal', retryable: true },
  REPLAY_OUT_OF_RANGE: { a2a: null, retryable: false },
  // sandboxd additions (README.md "Deviations"): the join's backend/class selection failing
  // closed, named as issue 15 and the REST route name them; and the slow-consumer cut-off.
  'session_backend.not_implemented': { a2a: 'UnsupportedOperation', retryable: false },
  'session_class.not_implemented': { a2a: 'UnsupportedOperation', retryable: false },
  SLOW_CONSUMER: { a2a: null, retryable: true },
} as const satisfies Record<string, { a2a: string | null; retryable: boolean }>;
export type ErrorCode = keyof typeof ERROR_CODES;

/** PTY-level error codes: a pty.session_frame of kind "Error", which never ends the connection. */
export const SESSION_ERROR_CODES = ['PTY_WRITE_FAILED', 'PTY_RESIZE_FAILED', 'PTY_OUTPUT_LAGGED', 'KEYFRAME_UNAVAILABLE'] as const;
export type SessionErrorCode = (typeof SESSION_ERROR_CODES)[number];

/** WebSocket close codes: the published table, then sandboxd's additions. */
export const CLOSE_CODES = {
  /** Client left (pty.leave_session) or orderly server close after binding_goodbye. */
  normal: 1000,
  /** sandboxd addition: the server is stopping (RFC 6455 "going away"). */
  goingAway: 1001,
  /** Server fault; also a WebSocket Pong that does not come back in time. */
  serverError: 1011,
  /** Protocol violation: bad envelope, unknown subprotocol. */
  protocolError: 4400,
  /** Authentication failure. */
  unauthenticated: 4401,
  /** Authorization failure. */
  forbidden: 4403,
  /** Session or task not found. */
  notFound: 4404,
  /** sandboxd addition: the client's queue passed its bound (README "Slow consumers"); rejoin with replay_from. */
  slowConsumer: 4413,
  /** Rate limited. */
  rateLimited: 4429,
} as const;
export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];

export const ROLES = ['controller', 'observer'] as const;
export type Role = (typeof ROLES)[number];

export const OUTPUT_STREAMS = ['stdout', 'stderr', 'log'] as const;
export type OutputStream = (typeof OUTPUT_STREAMS)[number];

export const CLOSED_REASONS = ['normal', 'killed', 'timeout', 'instance_terminated', 'error'] as const;
export type ClosedReason = (typeof CLOSED_REASONS)[number];

export const GOODBYE_REASONS = ['server_shutdown', 'session_closed', 'principal_revoked', 'rate_limited', 'other'] as const;
export type GoodbyeReason = (typeof GOODBYE_REASONS)[number];

/** Session backends and classes a join may select (issue 15 item 4, spec 4.2). */
export const SESSION_BACKENDS = ['native', 'tmux', 'screen', 'zellij'] as const;
export type SessionBackend = (typeof SESSION_BACKENDS)[number];
export const SESSION_CLASSES = ['direct', 'managed'] as const;
export type SessionClass = (typeof SESSION_CLASSES)[number];

/** The snapshot format the published extension defines; sandboxd may add its own (documented). */
export const KEYFRAME_FORMAT_VT100 = 'vt100-screen-state-v1';

/** Limits the decoder enforces (the schema states the same numbers). */
export const LIMITS = {
  /** Largest client text frame, in bytes of UTF-8 (64 KiB of input is ~87 KiB of base64 JSON). */
  maxClientFrameBytes: 128 * 1024,
  /** Largest decoded input of one pty.session_input or PW1I frame. */
  maxInputBytes: 64 * 1024,
  /** Terminal columns and rows: 1..1024 each, as published. */
  maxTerminalDim: 1024,
  /** client_label, client_id: at most 128 characters, as published. */
  maxLabelChars: 128,
  /** Request ids: 1..128 printable ASCII characters (the published examples are not UUIDs). */
  maxIdChars: 128,
  /** argv: 1..256 arguments of at most 8 KiB characters each, no NUL. */
  maxArgs: 256,
  maxArgChars: 8192,
  /** command (run through /bin/sh -lc): at most 64 KiB characters, no NUL. */
  maxCommandChars: 65536,
  /** cwd: 1..4096 characters, no NUL. */
  maxCwdChars: 4096,
  /** env: at most 256 variables; names are shell identifiers of at most 256 characters; values at most 8 KiB. */
  maxEnvVars: 256,
  maxEnvNameChars: 256,
  maxEnvValueChars: 8192,
  /** extensions: at most 16 URIs of at most 512 characters. */
  maxExtensions: 16,
  maxExtensionChars: 512,
  /** service_parameters: at most 32 keys. */
  maxServiceParameters: 32,
  /** message (Error payload, session Error, Closed detail): at most 1024 characters. */
  maxMessageChars: 1024,
} as const;
