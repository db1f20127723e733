/**
 * The HTTP API's wire shapes, declared once: interactive sessions (spec 4.2, part 2) and
 * human-in-the-loop requests (4.16; our shape, the spec shows none). `created_at_secs` is Unix
 * seconds. A leaf: imports nothing outside src/wire.
 */

// ---------------------------------------------------------------- sessions (4.2, part 2)

export type SessionRole = 'controller' | 'observer';

/** Ours: a session's lifecycle state (closed sessions leave the list; moves: src/sessions/session-state.ts). */
export const SESSION_STATES = ['starting', 'running', 'detached', 'closed'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

/** POST /api/v1/agents/{id}/sessions body (all optional). */
export interface SessionCreateRequest {
  /** Default bash. */
  command?: string;
  /** Default terminal-<hex>. */
  session_name?: string;
  /** tmux only. */
  session_backend?: string;
  /** managed only. */
  session_class?: string;
}

/** The URL and role fields shared by the create response and the list entry. */
export interface SessionAccessFields {
  ws_endpoint: string;
  /** The spec's join message: it always asks for the controller role. */
  join_message: { type: 'join_session'; session_id: string; role: 'controller' };
  pty_ws_url: string;
  pty_ws_subprotocol: string;
  orchestrator_observer_url: string;
  orchestrator_controller_url: string;
  default_role: SessionRole;
  controller_policy: string;
  session_backend: string;
  session_class: string;
  chat_source: 'stream-json' | 'none';
  chat_stream_url: string | null;
}

/** The create response of spec part 2. */
export interface SessionCreated extends SessionAccessFields {
  session_id: string;
  instance_id: string;
  command_id: string;
  session_name: string;
  supported_session_backends: string[];
  supported_session_classes: string[];
  observe_supported: boolean;
  drive_supported: boolean;
  reattach_supported: boolean;
}

export interface SessionMembership {
  /** Client ids; empty when the lease is free, never more than one. */
  controllers: string[];
  observers: string[];
  attachment_count: number;
}

export interface SessionLiveness {
  agent_connected: boolean;
  /** True when a joining client gets retained output to draw (the hub's replay is not empty). */
  has_screen: boolean;
  /** Seq of the newest output frame (0 before any). */
  replay_newest_seq: number;
  /** Largest number of bytes queued for one attached client and not yet taken by its socket. */
  max_client_lag: number;
}

/** A list entry of spec part 2. */
export interface SessionEntry extends SessionAccessFields {
  session_id: string;
  /** Ours: the agent's instance id. */
  instance_id: string;
  command_id: string;
  session_name: string;
  session_type: 'interactive';
  command: string;
  created_at_secs: number;
  has_screen: boolean;
  /** Ours: starting, running, detached. */
  state: SessionState;
  membership: SessionMembership;
  liveness: SessionLiveness;
}

/** GET /api/v1/agents/{id}/sessions. */
export interface SessionList {
  agent_id: string;
  sessions: SessionEntry[];
}

export type SessionSignal = 'TERM' | 'KILL' | 'INT' | 'HUP';

/** 200 of DELETE …/sessions/{session}: only a verified kill answers. */
export interface SessionKillResult {
  killed: true;
}

// ---------------------------------------------------------------- HITL (4.16; our shape, the spec shows none)

/** What kind of prompt a human-in-the-loop request answers (detection: src/sessions/hitl-detector.ts). */
export type HitlKind = 'sudo' | 'password' | 'confirm' | 'press_enter';

/** A pending human-in-the-loop request detected in a session's output. */
export interface HitlRequest {
  id: string;
  session_id: string;
  agent_id: string;
  command_id: string;
  kind: HitlKind;
  /** The prompt text seen on the terminal. */
  prompt: string;
  /** RFC 3339. */
  created_at: string;
}

/** GET /api/v1/hitl: pending requests, oldest first. */
export interface HitlList {
  requests: HitlRequest[];
}

/** POST /api/v1/hitl/{id}/respond. */
export interface HitlRespondResult {
  resolved: boolean;
}
