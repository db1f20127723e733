/**
 * Interactive sessions (spec part 2, "Interactive session"): the record the registry keeps, the
 * create response and list entry built from it, and the URLs clients use to attach.
 *
 * URL decisions (documented in the README). Every URL is the caller's: the bases come from the
 * request (src/http/public-url.ts: Host, or the forwarded headers of a trusted proxy), never from
 * the listen address, and a replayed create response gets the replaying caller's URLs.
 * - pty-ws.v1: `ws(s)://<caller's origin>/api/v1/sessions/{session_id}/pty`, subprotocol
 *   `pty-ws.v1` (required). Frames: binding/README.md. Absolute: a relative reference cannot
 *   change the scheme from http to ws for a client that is not a browser.
 * - orchestrate: `ws(s)://<caller's origin>/ws/sessions/{session_id}/orchestrate?role=observer|controller`,
 *   the same frames with an implicit join at open (role from the query, default observer).
 * - ws_endpoint: the root of the WebSocket listener (spec 4.18, SVC_WS_ADDR), `ws://<caller's host
 *   name>:<its port>/`, where `join_message` is sent.
 * - chat_stream_url: relative, `/api/v1/agent-output/chat?command_id=…&session_id=…` (same origin
 *   and scheme as the request, so any client resolves it against the URL it called) when the
 *   session's command emits stream-json (chat_source `stream-json`), else null (`none`).
 */
import type {
  SessionAccessFields,
  SessionCreated as SessionCreateResponse,
  SessionEntry as SessionListEntry,
  SessionLiveness,
  SessionMembership,
  SessionRole,
  SessionState,
} from '../wire/sessions.js';
import { REATTACHABLE_BACKENDS } from './session-backends.js';

/**
 * The wire shapes (src/wire/sessions.ts): the role, the lifecycle states, the create response
 * (SessionCreated, named SessionCreateResponse here), the list entry (SessionEntry, named
 * SessionListEntry here) and their parts.
 */
export { SESSION_STATES } from '../wire/sessions.js';
export type { SessionAccessFields, SessionCreateResponse, SessionListEntry, SessionLiveness, SessionMembership, SessionRole, SessionState };

/** The backends spec 4.2 names; which pairs run where: session-backends.ts and session-host.ts. */
export const SESSION_BACKENDS = ['tmux', 'screen', 'zellij', 'native'] as const;
export type SessionBackendName = (typeof SESSION_BACKENDS)[number];
/** What POST …/sessions accepts (a pty-ws.v1 join may select more: session-host.ts). */
export const SUPPORTED_SESSION_BACKENDS = ['tmux'] as const;

export const SESSION_CLASSES = ['managed', 'direct'] as const;
export type SessionClassName = (typeof SESSION_CLASSES)[number];
export const SUPPORTED_SESSION_CLASSES = ['managed'] as const;

export const PTY_WS_SUBPROTOCOL = 'pty-ws.v1';
export const DEFAULT_ROLE: SessionRole = 'observer';
export const DEFAULT_SESSION_COMMAND = 'bash';
export const SESSION_NAME_PREFIX = 'terminal-';

/** Text of `controller_policy` (spec part 2). */
export const CONTROLLER_POLICY =
  'single-controller lease: one controller at most; a controller request while a live controller holds the lease is granted as observer ' +
  "(role_assigned says so); only the controller's input and resize reach the PTY; the lease frees when the controller leaves, disconnects, " +
  'misses pongs or is dropped for not reading; join as observer first, then request the controller role';

/** Router patterns of the WebSocket routes (uWS `:param` syntax). */
export const PTY_WS_PATH = '/api/v1/sessions/:session_id/pty';
export const ORCHESTRATE_WS_PATH = '/ws/sessions/:session_id/orchestrate';
/** pty-ws.v1's own URL pattern (the reference binding's 2.1), scoped by the agent's instance id. */
export const AGENT_ATTACH_WS_PATH = '/agents/:instance_id/sessions/:session_id/attach';

/** What the registry keeps per session (persisted; see session-store.ts). */
export interface SessionRecord {
  readonly sessionId: string;
  readonly agentId: string;
  /** The agent's instance id (its SPIFFE id's last segment) when known, else the agent id. */
  readonly instanceId: string;
  /** The agent command currently running the session's PTY (changes on re-attach). */
  readonly commandId: string;
  /**
   * Bumped on each new PTY command for the session (re-attach). Session seqs are
   * `generation * 2^32 + command seq`, so seqs stay monotonic across re-attaches and are stable
   * across restarts of sandboxd (the agent resends buffered output with the same command seqs).
   */
  readonly generation: number;
  /** Also the tmux or screen session name and the native pid file's (unique per agent among live sessions). */
  readonly sessionName: string;
  /**
   * What runs in the session: POST's shell command (sh -c), a join's `command` (sh -lc), a join's
   * argv shell-quoted, or empty for a join's default (the agent user's login shell).
   */
  readonly command: string;
  readonly sessionType: 'interactive';
  /** tmux/managed (POST and joins), screen/managed or native/direct (joins). */
  readonly sessionBackend: SessionBackendName;
  readonly sessionClass: SessionClassName;
  readonly createdAtMs: number;
  readonly state: SessionState;
  /** Last known terminal size of the PTY. */
  readonly cols: number;
  readonly rows: number;
  /**
   * How many session hubs this session has had (one per server generation that served it, and one
   * more each time a closed hub was replaced). Hub n numbers its pty-ws frames from
   * `n * 2^32 + 1`, so a frame sequence is never reused: a client rejoining with a `replay_from`
   * from an earlier hub (before a restart of sandboxd) is out of range and gets a keyframe, instead
   * of a replay of unrelated frames that happen to carry the same numbers.
   */
  readonly hubEpoch: number;
}

/** 2^32: the seq span of one generation. */
export const kGenerationSeqSpan = 0x1_0000_0000;

/** Session seq of a command seq in a generation (see SessionRecord.generation). */
export function sessionSeq(generation: number, commandSeq: number): number {
  return generation * kGenerationSeqSpan + commandSeq;
}

/** Where the caller reaches the listeners, e.g. `http://box.example:8122` and `ws://box.example:8121/`. */
export interface SessionUrlBases {
  /** The HTTP listener's origin as the caller reached it. */
  readonly httpBaseUrl: string;
  /** The WebSocket listener's root (spec 4.18) as the caller reaches it. */
  readonly wsBaseUrl: string;
}

/** True when the command asks Claude Code for stream-json output (a chat projection exists). */
export function chatSourceOf(command: string): 'stream-json' | 'none' {
  return /--output-format(?:=|\s+)["']?stream-json\b/.test(command) ? 'stream-json' : 'none';
}

function trimSlash(s: string): string {
  return s.endsWith('/') ? s.slice(0, -1) : s;
}

/** The http(s) base as ws(s). */
export function wsSchemeOf(httpBaseUrl: string): string {
  return trimSlash(httpBaseUrl).replace(/^http(s?):/i, 'ws$1:');
}

export function ptyWsUrl(bases: SessionUrlBases, sessionId: string): string {
  return `${wsSchemeOf(bases.httpBaseUrl)}/api/v1/sessions/${encodeURIComponent(sessionId)}/pty`;
}

export function orchestrateUrl(bases: SessionUrlBases, sessionId: string, role: SessionRole): string {
  return `${wsSchemeOf(bases.httpBaseUrl)}/ws/sessions/${encodeURIComponent(sessionId)}/orchestrate?role=${role}`;
}

type UrlFields = Pick<
  SessionAccessFields,
  'ws_endpoint' | 'pty_ws_url' | 'orchestrator_observer_url' | 'orchestrator_controller_url' | 'chat_stream_url'
>;

/** The URL fields of a session for one caller. */
function urlFields(sessionId: string, commandId: string, chat: 'stream-json' | 'none', bases: SessionUrlBases): UrlFields {
  const q = `command_id=${encodeURIComponent(commandId)}&session_id=${encodeURIComponent(sessionId)}`;
  return {
    ws_endpoint: `${trimSlash(bases.wsBaseUrl)}/`,
    pty_ws_url: ptyWsUrl(bases, sessionId),
    orchestrator_observer_url: orchestrateUrl(bases, sessionId, 'observer'),
    orchestrator_controller_url: orchestrateUrl(bases, sessionId, 'controller'),
    chat_stream_url: chat === 'none' ? null : `/api/v1/agent-output/chat?${q}`,
  };
}

/** A stored create response (an idempotent replay) with the URLs of the caller replaying it. */
export function withCallerUrls(stored: SessionCreateResponse, bases: SessionUrlBases): SessionCreateResponse {
  return { ...stored, ...urlFields(stored.session_id, stored.command_id, stored.chat_source, bases) };
}

function accessFields(r: SessionRecord, bases: SessionUrlBases): SessionAccessFields {
  const chat = chatSourceOf(r.command);
  const urls = urlFields(r.sessionId, r.commandId, chat, bases);
  return {
    ws_endpoint: urls.ws_endpoint,
    join_message: { type: 'join_session', session_id: r.sessionId, role: 'controller' },
    pty_ws_url: urls.pty_ws_url,
    pty_ws_subprotocol: PTY_WS_SUBPROTOCOL,
    orchestrator_observer_url: urls.orchestrator_observer_url,
    orchestrator_controller_url: urls.orchestrator_controller_url,
    default_role: DEFAULT_ROLE,
    controller_policy: CONTROLLER_POLICY,
    session_backend: r.sessionBackend,
    session_class: r.sessionClass,
    chat_source: chat,
    chat_stream_url: urls.chat_stream_url,
  };
}

/** The create response of spec part 2. */
export function createResponseOf(r: SessionRecord, bases: SessionUrlBases): SessionCreateResponse {
  return {
    session_id: r.sessionId,
    instance_id: r.instanceId,
    command_id: r.commandId,
    session_name: r.sessionName,
    ...accessFields(r, bases),
    supported_session_backends: [...SUPPORTED_SESSION_BACKENDS],
    supported_session_classes: [...SUPPORTED_SESSION_CLASSES],
    observe_supported: true,
    drive_supported: true,
    reattach_supported: REATTACHABLE_BACKENDS.has(r.sessionBackend),
  };
}

/** Live numbers of a session (from its hub and the agent registry). */
export interface SessionLiveState {
  readonly membership: SessionMembership;
  readonly agentConnected: boolean;
  readonly hasScreen: boolean;
  readonly newestSeq: number;
  readonly maxClientLagBytes: number;
}

/** A list entry of spec part 2. */
export function listEntryOf(r: SessionRecord, live: SessionLiveState, bases: SessionUrlBases): SessionListEntry {
  return {
    session_id: r.sessionId,
    instance_id: r.instanceId,
    command_id: r.commandId,
    session_name: r.sessionName,
    session_type: r.sessionType,
    command: r.command,
    created_at_secs: Math.floor(r.createdAtMs / 1000),
    has_screen: live.hasScreen,
    state: r.state,
    ...accessFields(r, bases),
    membership: live.membership,
    liveness: {
      agent_connected: live.agentConnected,
      has_screen: live.hasScreen,
      replay_newest_seq: live.newestSeq,
      max_client_lag: live.maxClientLagBytes,
    },
  };
}
