/**
 * Agent status (spec part 3): the values, the transition table, what triggers each move, and the
 * mapping to and from the wire enum `svc.sandbox.v1.AgentStatus`.
 *
 * Heartbeats are the status source while an agent is connected: each Heartbeat's status
 * (STARTING, READY, BUSY, ERROR, SHUTTING_DOWN) becomes the agent's status. The server adds the
 * two statuses an agent cannot report about itself: Stale (no heartbeat for
 * SVC_AGENT_STALE_AFTER_SECONDS; the next heartbeat ends it) and Disconnected (the stream ended;
 * the agent stays listed SVC_AGENT_RETENTION_SECONDS, then is removed, or registers again).
 *
 *   Disconnected ──registered──► Starting ──heartbeat──► Ready / Busy / Error / ShuttingDown
 *        ▲                          │   ▲                        │        ▲
 *        │                          │   └────── heartbeat ───────┤        │ heartbeat
 *        └──── stream ended ────────┴────────────────────────────┤        │
 *                                                                 └─► Stale (heartbeat missed)
 */
import { AGENT_STATUSES, type AgentStatus } from '../wire/agents.js';
import { StateMachine, transitionTableMarkdown, type StateMachineOptions, type TransitionTable } from './state-machine.js';

/** The spec's values, in its order: declared with the API's wire shapes (src/wire/agents.ts). */
export { AGENT_STATUSES, type AgentStatus };

/** Statuses an agent reports in its Heartbeat. */
export const REPORTED_STATUSES = ['Starting', 'Ready', 'Busy', 'Error', 'ShuttingDown'] as const satisfies readonly AgentStatus[];
export type ReportedStatus = (typeof REPORTED_STATUSES)[number];

/** Statuses of an agent whose stream is open. */
export const CONNECTED_STATUSES = [...REPORTED_STATUSES, 'Stale'] as const satisfies readonly AgentStatus[];

/** Causes of the moves (the `cause` of transition() and of the agent.status_changed event). */
export const AgentStatusCause = {
  /** A registration was accepted on a new stream. */
  registered: 'registered',
  /** A heartbeat reported a status. */
  heartbeat: 'heartbeat',
  /** No heartbeat for SVC_AGENT_STALE_AFTER_SECONDS. */
  heartbeatMissed: 'heartbeat_missed',
  /** The stream ended (agent gone, network, superseded by a new stream, refused, server actor restarted). */
  streamEnded: 'stream_ended',
} as const;

function reportedExcept(s: ReportedStatus): AgentStatus[] {
  return REPORTED_STATUSES.filter((r) => r !== s);
}

/**
 * Allowed moves. Every connected status may move to any reported one (a heartbeat), to Stale
 * (except Stale itself) and to Disconnected; Disconnected moves only to Starting (registration).
 * Removal after the retention period is not a status: the agent leaves the list.
 */
export const AGENT_STATUS_TABLE: TransitionTable<AgentStatus> = {
  Starting: [...reportedExcept('Starting'), 'Stale', 'Disconnected'],
  Ready: [...reportedExcept('Ready'), 'Stale', 'Disconnected'],
  Busy: [...reportedExcept('Busy'), 'Stale', 'Disconnected'],
  Error: [...reportedExcept('Error'), 'Stale', 'Disconnected'],
  ShuttingDown: [...reportedExcept('ShuttingDown'), 'Stale', 'Disconnected'],
  Stale: [...REPORTED_STATUSES, 'Disconnected'],
  Disconnected: ['Starting'],
};

function causesOf(table: TransitionTable<AgentStatus>): Partial<Record<AgentStatus, Partial<Record<AgentStatus, string>>>> {
  const out: Partial<Record<AgentStatus, Partial<Record<AgentStatus, string>>>> = {};
  for (const from of AGENT_STATUSES) {
    const row: Partial<Record<AgentStatus, string>> = {};
    for (const to of table[from]) {
      if (to === 'Disconnected') row[to] = 'the stream ended';
      else if (to === 'Stale') row[to] = 'no heartbeat for SVC_AGENT_STALE_AFTER_SECONDS';
      else if (from === 'Disconnected') row[to] = 'registration accepted on a new stream';
      else row[to] = `heartbeat reports ${to}`;
    }
    out[from] = row;
  }
  return out;
}

/** The table as Markdown, for the README. */
export function agentStatusTableMarkdown(): string {
  return transitionTableMarkdown(AGENT_STATUS_TABLE, causesOf(AGENT_STATUS_TABLE));
}

/** A machine for one agent, starting Disconnected (not yet registered). */
export function agentStatusMachine(opts: Omit<StateMachineOptions<AgentStatus>, 'initial' | 'table' | 'name'>): StateMachine<AgentStatus> {
  return new StateMachine<AgentStatus>({ ...opts, name: 'agent status', initial: 'Disconnected', table: AGENT_STATUS_TABLE });
}

/**
 * Numbers of svc.sandbox.v1.AgentStatus (proto/svc/sandbox/v1/agent.proto). Kept here rather than
 * imported so core does not load the generated code; test/unit/core/agent-status.test.ts checks
 * them against it.
 */
export const PROTO_AGENT_STATUS: Readonly<Record<AgentStatus, number>> = {
  Starting: 1,
  Ready: 2,
  Busy: 3,
  Error: 4,
  ShuttingDown: 5,
  Stale: 6,
  Disconnected: 7,
};

/** The wire value of a status. */
export function toProtoStatus(status: AgentStatus): number {
  return PROTO_AGENT_STATUS[status];
}

/**
 * The status a Heartbeat reports, or null for a value an agent may not report: UNSPECIFIED (0),
 * STALE and DISCONNECTED (server-assigned), and unknown numbers from a newer agent (rule 5 of
 * proto/README.md: treated as unspecified).
 */
export function reportedStatusFromProto(value: number | null | undefined): ReportedStatus | null {
  for (const s of REPORTED_STATUSES) if (PROTO_AGENT_STATUS[s] === value) return s;
  return null;
}

/** Any wire value as a status (null for UNSPECIFIED and unknown numbers). */
export function statusFromProto(value: number | null | undefined): AgentStatus | null {
  for (const s of AGENT_STATUSES) if (PROTO_AGENT_STATUS[s] === value) return s;
  return null;
}

export function isAgentStatus(value: unknown): value is AgentStatus {
  return typeof value === 'string' && (AGENT_STATUSES as readonly string[]).includes(value);
}
