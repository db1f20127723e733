/**
 * The aiwg bridge's wire shape (spec part 2 "Bridge status", 4.16): GET /api/v1/aiwg/status.
 * Schema: src/orchestration/bridge-status-v1.schema.json. A leaf: imports nothing.
 */

/** The link states (src/orchestration/orch-link.ts), plus `disabled` when ORCH_SERVE_ENDPOINT is unset. */
export const BRIDGE_STATES = ['disabled', 'idle', 'connecting', 'open', 'waiting', 'stopped'] as const;
export type BridgeState = (typeof BRIDGE_STATES)[number];

export interface BridgeStatus {
  /** The spec's: the orchestration link's WebSocket is open (registration sent on it). */
  connected: boolean;
  /** The spec's: live interactive sessions this server carries (its session registry). */
  session_count: number;
  /** The spec's: whole seconds since the last event went out over the link; -1 when none has. */
  last_event_secs: number;
  /** Ours: ORCH_SERVE_ENDPOINT is set. */
  configured: boolean;
  state: BridgeState;
  /** The endpoint without user info or query (a token may ride there); null when not configured. */
  endpoint: string | null;
  /** Event messages the socket wrote since the server started. */
  events_sent: number;
  /** Events dropped from the full queue (each reported to the server in a gap record). */
  events_dropped: number;
  /** Events waiting for the connection. */
  queued: number;
  /** Connections opened since the server started. */
  connections: number;
}

/** POST /api/v1/aiwg/reconnect. */
export interface BridgeReconnect {
  ok: true;
}
