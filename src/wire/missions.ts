/**
 * Wire shapes of mission dispatch (spec 4.16, part 5) and of the executor and mission routes
 * (ours; README "Missions and dispatch"). Shared by the routes, the client and `sbx executor` /
 * `sbx mission`. JSON Schemas: src/missions/executor-v1.schema.json, mission-v1.schema.json.
 */

/** Where a mission is (machine: src/missions/mission-state.ts). */
export const MISSION_RECORD_STATUSES = ['assigned', 'running', 'completed', 'failed'] as const;
export type MissionRecordStatus = (typeof MISSION_RECORD_STATUSES)[number];

/** Every v1 event type a mission emits, in the order a successful one emits them (README "Missions and dispatch"). */
export const MISSION_EVENT_TYPES = ['mission.assigned', 'mission.started', 'mission.completed', 'mission.failed'] as const;
export type MissionEventType = (typeof MISSION_EVENT_TYPES)[number];

/** POST /api/v2/executors body. */
export interface ExecutorRegisterRequest {
  /** The agent whose missions this executor runs. */
  agent_id: string;
  name?: string;
  capabilities?: string[];
  /** Argv a mission runs on the agent; default SVC_MISSION_COMMAND. */
  command?: string[];
}

/** An executor as the routes show it: never its token nor the token's hash. */
export interface Executor {
  schema_version: 'sandboxd.executor/v1';
  executor_id: string;
  agent_id: string;
  name: string;
  capabilities: string[];
  /** The argv its missions run; null: SVC_MISSION_COMMAND. */
  command: string[] | null;
  created_at: string;
  /** Who registered it (the operator identity's actor). */
  created_by: string;
  last_dispatch_at: string | null;
}

/** 201 of POST /api/v2/executors: the only answer that ever holds the token. */
export interface ExecutorRegistered {
  executor: Executor;
  /** The dispatch bearer token (`Authorization: Bearer <token>`); shown once, stored hashed. */
  token: string;
}

/** POST /api/v1/sessions/{id}/dispatch body (spec 4.16). */
export interface DispatchRequest {
  mission_id: string;
  objective: string;
  completion?: string;
  long_running?: boolean;
  executor_filter?: { agent_id?: string; executor_id?: string; capabilities?: string[] };
  metadata?: Record<string, unknown>;
}

/** 202 of a dispatch (spec 4.16). */
export interface DispatchAccepted {
  mission_id: string;
  executor_id: string;
  status: 'assigned';
  /** RFC 3339. */
  estimated_start: string;
}

/** A mission as GET /api/v2/missions shows it. */
export interface Mission {
  schema_version: 'sandboxd.mission/v1';
  mission_id: string;
  /** The `{id}` of the dispatch path: the orchestration server's session for this mission. */
  session_id: string;
  executor_id: string;
  agent_id: string;
  objective: string;
  completion: string;
  long_running: boolean;
  metadata: Record<string, unknown>;
  status: MissionRecordStatus;
  /** The command on the agent (its output: GET /api/v1/agent-output/stream?agent_id=…&command_id=…&replay=true). */
  command_id: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  /** When failed: mission.failed's reason. */
  reason: string | null;
  error: string | null;
}
