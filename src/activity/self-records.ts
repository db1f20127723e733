/**
 * What sandboxd records about itself (README "What sandboxd records"): the v1 events it already
 * emits for commands and sessions, and the tool calls of tasks' coding agents, mapped to
 * activity.event/v1 drafts. Metadata only, by construction: a command is its argv0 (the program's
 * base name; never its arguments, environment, stdin or output), a session its id and name, a
 * tool call its id, tool name and status (never its input or result). The validator
 * (record.ts) still checks every record before it is queued.
 *
 *   v1 event / observation                      activity event      plane     correlation
 *   agent.command.started                       command.started     runtime   command_id (+ session_id when known)
 *   agent.command.completed                     command.finished    runtime   command_id (+ session_id when known)
 *   agent.pty.created with a session_id          session.opened      session   session_id, command_id
 *   agent.pty.closed with a session_id           session.closed      session   session_id, command_id
 *   a task's tool_use                            tool.call_started   action    task_id, tool_call_id, command_id
 *   a task's tool_result                         tool.call_finished  action    task_id, tool_call_id, command_id
 */
import type { StoredEvent } from '../events/event-store.js';
import type { TaskToolCall } from '../tasks/orchestrator.js';
import type { ActivityOutcome, ActivityPlane } from '../wire/activity.js';
import { ACTIVITY_ID_RE } from './record.js';

/** The correlation ids a self-recorded event may carry (scope is added by the collector). */
export type SelfCorrelation = Partial<Record<'session_id' | 'task_id' | 'tool_call_id' | 'command_id' | 'trace_id', string>>;

/** One event before it has a scope, an id and a sequence. */
export interface SelfDraft {
  readonly agentId: string;
  readonly eventName: string;
  readonly plane: ActivityPlane;
  /** RFC 3339. */
  readonly occurredAt: string;
  readonly correlation: SelfCorrelation;
  readonly outcome?: ActivityOutcome;
  readonly payload: Record<string, unknown>;
}

/** What the mapping needs to know beyond the event: the session a command belongs to. */
export interface DraftContext {
  sessionOfCommand(commandId: string): string | undefined;
}

const HEX32 = /^[0-9a-f]{32}$/;

/** The id when it is a valid activity id, else undefined (an id the store would refuse is left out, not mangled). */
export function activityId(v: unknown): string | undefined {
  return typeof v === 'string' && ACTIVITY_ID_RE.test(v) ? v : undefined;
}

/** A scope value the store accepts: the id itself, or its invalid characters replaced by `_`. */
export function scopeId(v: string): string {
  if (ACTIVITY_ID_RE.test(v)) return v;
  const s = v
    .replace(/[^A-Za-z0-9._:@/+-]/g, '_')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 256);
  return s === '' ? 'unknown' : s;
}

/** The program's base name of a command line: `/usr/bin/make -j4` → `make`. Nothing after the first word. */
export function argv0(command: unknown): string | undefined {
  if (typeof command !== 'string') return undefined;
  const first = command.trim().split(/\s+/, 1)[0] ?? '';
  const base = first.slice(first.lastIndexOf('/') + 1).slice(0, 128);
  return base === '' ? undefined : base;
}

function int(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;
}

function word(v: unknown, max = 64): string | undefined {
  return typeof v === 'string' && v !== '' && /^[A-Za-z0-9._:-]+$/.test(v) ? v.slice(0, max) : undefined;
}

/** Drops undefined values (exactOptionalPropertyTypes, and no `"k": undefined` in the record). */
function defined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function base(e: StoredEvent): { agentId: string; occurredAt: string; trace: SelfCorrelation } {
  const ms = Date.parse(e.timestamp);
  const trace = e.trace_id !== null && HEX32.test(e.trace_id) ? { trace_id: e.trace_id } : {};
  return { agentId: e.agent_id, occurredAt: new Date(Number.isNaN(ms) ? Date.now() : ms).toISOString(), trace };
}

/** The activity draft of a v1 event, or null for the events sandboxd does not record as activity. */
export function draftOfEvent(e: StoredEvent, ctx: DraftContext): SelfDraft | null {
  if (e.agent_id === '') return null;
  const d = e.details;
  const commandId = activityId(d['command_id']);
  const sessionId = activityId(d['session_id']);
  const { agentId, occurredAt, trace } = base(e);
  switch (e.event_type) {
    case 'agent.command.started':
    case 'agent.command.completed': {
      if (commandId === undefined) return null;
      const session = ctx.sessionOfCommand(commandId);
      const correlation: SelfCorrelation = { command_id: commandId, ...(session !== undefined && { session_id: session }), ...trace };
      if (e.event_type === 'agent.command.started')
        return {
          agentId,
          eventName: 'command.started',
          plane: 'runtime',
          occurredAt,
          correlation,
          outcome: { status: 'started' },
          payload: defined({
            argv0: argv0(d['command']),
            pty: typeof d['pty'] === 'boolean' ? d['pty'] : undefined,
            origin: word(d['source']),
            timeout_seconds: int(d['timeout_seconds']),
          }),
        };
      const exitCode = int(d['exit_code']);
      const timedOutBy = word(d['timed_out_by']);
      const result = word(d['result']);
      return {
        agentId,
        eventName: 'command.finished',
        plane: 'runtime',
        occurredAt,
        correlation,
        outcome: {
          status: exitCode === 0 && timedOutBy === undefined ? 'success' : 'failure',
          ...(exitCode !== undefined && { exit_code: exitCode }),
          // The reason says what the status does not: a timeout (which timer), a kill, an error.
          ...(timedOutBy !== undefined
            ? { reason: `timed out (${timedOutBy})` }
            : result !== undefined && result !== 'success' && result !== 'failure' && { reason: result }),
        },
        payload: defined({ duration_ms: int(d['duration_ms']), result, timed_out_by: timedOutBy }),
      };
    }
    case 'agent.pty.created':
    case 'agent.pty.closed': {
      // PTY commands of no session are recorded as commands (pty: true); this is the session's view.
      if (sessionId === undefined) return null;
      const correlation: SelfCorrelation = { session_id: sessionId, ...(commandId !== undefined && { command_id: commandId }), ...trace };
      const payload = defined({
        session_name: typeof d['session_name'] === 'string' && d['session_name'] !== '' ? d['session_name'].slice(0, 128) : undefined,
        session_backend: word(d['session_backend']),
        session_class: word(d['session_class']),
      });
      if (e.event_type === 'agent.pty.created')
        return {
          agentId,
          eventName: 'session.opened',
          plane: 'session',
          occurredAt,
          correlation,
          outcome: { status: 'started' },
          payload: { ...payload, ...defined({ argv0: argv0(d['command']) }) },
        };
      const exitCode = int(d['exit_code']);
      const reason = word(d['reason']);
      return {
        agentId,
        eventName: 'session.closed',
        plane: 'session',
        occurredAt,
        correlation,
        outcome: {
          status: exitCode === undefined || exitCode === 0 ? 'success' : 'failure',
          ...(exitCode !== undefined && { exit_code: exitCode }),
          ...(reason !== undefined && { reason }),
        },
        payload,
      };
    }
    default:
      return null;
  }
}

/** The activity draft of a task's tool call. */
export function draftOfToolCall(c: TaskToolCall): SelfDraft | null {
  const toolCallId = activityId(c.id);
  const taskId = activityId(c.taskId);
  if (toolCallId === undefined || taskId === undefined || c.agentId === '') return null;
  const commandId = activityId(c.commandId);
  const correlation: SelfCorrelation = {
    task_id: taskId,
    tool_call_id: toolCallId,
    ...(commandId !== undefined && { command_id: commandId }),
  };
  const payload = defined({ tool_name: c.name ?? undefined });
  const occurredAt = new Date(c.atMs).toISOString();
  if (c.phase === 'started')
    return {
      agentId: c.agentId,
      eventName: 'tool.call_started',
      plane: 'action',
      occurredAt,
      correlation,
      outcome: { status: 'started' },
      payload,
    };
  return {
    agentId: c.agentId,
    eventName: 'tool.call_finished',
    plane: 'action',
    occurredAt,
    correlation,
    outcome: { status: c.isError === true ? 'failure' : c.isError === false ? 'success' : 'unknown' },
    payload,
  };
}
