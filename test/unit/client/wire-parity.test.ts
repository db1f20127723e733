/**
 * The client's wire types (src/client/types.ts) equal the server's, checked by the compiler.
 *
 * The client re-declares every response shape on purpose: it is bundled into the dashboard and
 * must not import server code. So nothing but this file holds the two declarations together. Each
 * `Assert<Equal<Client, Server>>` line below fails `tsc` (and so `npm run build` and `npm test`)
 * as soon as one side gains, loses, renames or retypes a field, or changes whether a field is
 * optional; readonly modifiers are ignored (they do not exist on the wire). The runtime tests only
 * compare the few value lists both sides also keep.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type * as Client from '../../../src/client/types.js';
import { TERMINAL_TASK_STATES as CLIENT_TERMINAL_TASK_STATES } from '../../../src/client/types.js';
import type { Agent } from '../../../src/agent-link/agent-registry.js';
import type { AgentStatus } from '../../../src/core/agent-status.js';
import { AGENT_STATUSES } from '../../../src/core/agent-status.js';
import type { OperationJson, OperationStatus, OperationType, ReprovisionAcceptedJson } from '../../../src/core/operation-state.js';
import type { EventPage, StoredEvent } from '../../../src/events/event-store.js';
import type { VmState } from '../../../src/hypervisor/port.js';
import { VM_STATES } from '../../../src/hypervisor/port.js';
import type { HitlRequest } from '../../../src/sessions/hitl.js';
import type { SessionService } from '../../../src/sessions/session-service.js';
import type { SessionAccessFields, SessionCreateResponse, SessionListEntry, SessionLiveness, SessionMembership, SessionRole } from '../../../src/sessions/session-types.js';
import type { ArtifactEntry } from '../../../src/tasks/artifacts.js';
import type { TaskList } from '../../../src/tasks/task-store.js';
import type { TaskProgress, TaskRecord, TaskState } from '../../../src/tasks/task-state.js';
import { TASK_STATES, TERMINAL_TASK_STATES } from '../../../src/tasks/task-state.js';
import type { ContainerImage } from '../../../src/vms/container-images.js';
import type { AcceptedEnvelope, DeleteResult, LifecycleResult } from '../../../src/vms/vm-controller.js';
import type { VmDetailJson, VmJson } from '../../../src/vms/vm-view.js';

/** Drops `readonly`, recursively: what a value looks like once it is JSON on the wire. */
type Wire<T> = T extends (infer E)[] ? Wire<E>[] : T extends readonly (infer E)[] ? Wire<E>[] : T extends object ? { -readonly [K in keyof T]: Wire<T[K]> } : T;

/**
 * True only when A and B are the same type (not merely assignable: `string` and `'a'` differ, an
 * optional field and a required one differ). The usual trick: two generic functions are
 * identical only when their conditional types are.
 */
type Equal<A, B> = (<T>() => T extends Wire<A> ? 1 : 2) extends <T>() => T extends Wire<B> ? 1 : 2 ? true : false;
type Assert<T extends true> = T;

// Each alias compiles only when its two types are equal; `Checked` keeps them used.
type Checked = [
  // agents (4.2)
  Assert<Equal<Client.AgentStatus, AgentStatus>>,
  Assert<Equal<Client.Agent, Agent>>,
  Assert<Equal<Client.ReprovisionAccepted, ReprovisionAcceptedJson>>,
  // VMs and operations (4.3, 4.4)
  Assert<Equal<Client.VmState, VmState>>,
  Assert<Equal<Client.Vm, VmJson>>,
  Assert<Equal<Client.VmDetail, VmDetailJson>>,
  Assert<Equal<Client.OperationType, OperationType>>,
  Assert<Equal<Client.OperationStatus, OperationStatus>>,
  Assert<Equal<Client.Operation, OperationJson>>,
  Assert<Equal<Client.OperationAccepted, AcceptedEnvelope>>,
  Assert<Equal<Client.VmLifecycleResult, LifecycleResult>>,
  Assert<Equal<Client.VmDeleteResult, DeleteResult>>,
  // events (4.5)
  Assert<Equal<Client.EventRecord, StoredEvent>>,
  Assert<Equal<Client.EventPage, EventPage>>,
  // container images (4.16)
  Assert<Equal<Client.ContainerImage, ContainerImage>>,
  // tasks (4.6)
  Assert<Equal<Client.TaskState, TaskState>>,
  Assert<Equal<Client.TaskProgress, TaskProgress>>,
  Assert<Equal<Client.Task, TaskRecord>>,
  Assert<Equal<Client.TaskList, TaskList>>,
  Assert<Equal<Client.TaskArtifact, ArtifactEntry>>,
  // sessions (4.2, part 2)
  Assert<Equal<Client.SessionRole, SessionRole>>,
  Assert<Equal<Client.SessionAccessFields, SessionAccessFields>>,
  Assert<Equal<Client.SessionCreated, SessionCreateResponse>>,
  Assert<Equal<Client.SessionMembership, SessionMembership>>,
  Assert<Equal<Client.SessionLiveness, SessionLiveness>>,
  Assert<Equal<Client.SessionEntry, SessionListEntry>>,
  Assert<Equal<Client.SessionList, ReturnType<SessionService['list']>>>,
  Assert<Equal<Client.SessionKillResult, Awaited<ReturnType<SessionService['kill']>>>>,
  // human in the loop (4.16)
  Assert<Equal<Client.HitlRequest, HitlRequest>>,
];
export type { Checked };

/** The helper itself: it must tell apart exactly the drifts that matter on the wire. */
type Not<T extends boolean> = T extends true ? false : true;
type Drifted<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;
type SelfCheck = [
  Assert<Not<Equal<Omit<OperationJson, 'error_code'>, OperationJson>>>, // a field lost
  Assert<Not<Equal<OperationJson & { extra: string }, OperationJson>>>, // a field gained
  Assert<Not<Equal<Drifted<OperationJson, 'target'>, OperationJson>>>, // required became optional
  Assert<Not<Equal<Omit<ReprovisionAcceptedJson, 'status'> & { status: string }, ReprovisionAcceptedJson>>>, // a literal widened
  Assert<Not<Equal<Omit<TaskRecord, 'exit_code'> & { exit_code: number }, TaskRecord>>>, // null dropped
  Assert<Not<Equal<Omit<SessionListEntry, 'membership'> & { membership: Omit<SessionMembership, 'observers'> }, SessionListEntry>>>, // nested field lost
  Assert<Equal<Readonly<OperationJson>, OperationJson>>, // readonly is not a wire difference
];
export type { SelfCheck };

test('the value lists both sides keep agree (task, terminal task, agent and VM states)', () => {
  assert.deepEqual([...CLIENT_TERMINAL_TASK_STATES].sort(), [...TERMINAL_TASK_STATES].sort());
  // The client keeps no runtime lists of these; the unions above are checked by the compiler.
  assert.ok(TASK_STATES.length > 0 && AGENT_STATUSES.length > 0 && VM_STATES.length > 0);
});
