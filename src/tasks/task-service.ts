/**
 * The task feature, assembled for the composition root: the orchestrator, the command client it
 * runs coding agents through, the capacity check, and the routes.
 *
 * Wiring (src/main.ts), after the VM service started (tasks need VMs and agents) so that it
 * stops first (reverse order):
 *
 *   const tasks = await startTaskService({ logger, metrics, events, stateDir: config.stateDir,
 *     storage, vms: vmService, agents, actors, hypervisor, … });
 *   started.push({ name: 'tasks', stop: () => tasks.stop() });
 *   tasks.registerRoutes(router);
 *   // registerHealthRoutes(router, { …, activeTasks: () => tasks.activeCount() })
 *
 * No capacity (POST → 503 task.no_capacity, with Retry-After): there is no pool of idle agents,
 * so every task needs a new VM; a task cannot be had when the hypervisor reports `down` (no host
 * answered within its read budget, or every host's circuit is open), when `maxPending` tasks are
 * already waiting for a slot, or while sandboxd shuts down. The hypervisor's health is asked at
 * most once a second (bursts of submissions share one probe).
 *
 * At start, <stateDir>/tasks/ (logs and workspaces of a previous run) is removed: tasks live in
 * memory, so nothing can reach those files any more. Outboxes stay: the storage routes still
 * serve them.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentCommandClient, type CommandCallPort } from '../agent-link/command-client.js';
import type { AgentService } from '../agent-link/agent-service.js';
import { registerTaskRoutes } from './routes.js';
import type { Router } from '../http/router.js';
import type { HypervisorPort } from '../hypervisor/port.js';
import type { Storage } from '../storage/storage.js';
import { commandAt } from './manifest.js';
import { TaskOrchestrator, type CapacityCheck, type OrchestratorOptions } from './orchestrator.js';
import { DEFAULT_TASK_VM, TaskVms, type AgentReadiness, type TaskVmBackend, type TaskVmSpec } from './task-vm.js';
import { errorMessage } from '../util/error-message.js';

/** Default bound of stop() (ms). */
export const DEFAULT_TASK_STOP_DEADLINE_MS = 10_000;
/** How long one hypervisor health answer is reused by the capacity check (ms). */
const CAPACITY_CACHE_MS = 1000;

export interface TaskServiceOptions extends Pick<
  OrchestratorOptions,
  | 'logger'
  | 'metrics'
  | 'events'
  | 'stateDir'
  | 'maxConcurrent'
  | 'maxPending'
  | 'retention'
  | 'cloneTimeoutMs'
  | 'provisionTimeoutMs'
  | 'killGraceMs'
  | 'agentLostGraceMs'
  | 'logMaxBytes'
  | 'keepWorkspaces'
  | 'jobs'
> {
  readonly storage: Pick<Storage, 'outboxDir' | 'openDownload'>;
  /** The VM service (`api` and `operations`). */
  readonly vms: TaskVmBackend;
  /** The agents service: its registry (readiness, lost agents) and its command events. */
  readonly agents: Pick<AgentService, 'subscribeCommands'> & { readonly registry: AgentReadiness };
  /** The actor system (control calls to agent actors). */
  readonly actors: CommandCallPort;
  readonly hypervisor: Pick<HypervisorPort, 'health'>;
  /** SVC_TASK_AGENT_COMMAND: the deployment's argv template; null/undefined = Claude Code's. */
  readonly agentCommand?: readonly string[] | null;
  /** The deployment's default model for `{model}`; null/undefined = the manifest default. */
  readonly defaultModel?: string | null;
  /** Task VM size; default {@link DEFAULT_TASK_VM}. */
  readonly vm?: Partial<TaskVmSpec>;
  /** Default {@link DEFAULT_TASK_STOP_DEADLINE_MS}. */
  readonly stopDeadlineMs?: number;
}

export interface TaskService {
  readonly orchestrator: TaskOrchestrator;
  registerRoutes(router: Router): void;
  /** Unfinished tasks (/healthz/deep active_tasks). */
  activeCount(): number;
  /** Fails unfinished tasks, kills their commands, deletes their VMs (bounded), stops routing command events. Idempotent. */
  stop(): Promise<void>;
}

/** Builds the task feature. Rejects when SVC_TASK_AGENT_COMMAND is not a valid argv template. */
export async function startTaskService(o: TaskServiceOptions): Promise<TaskService> {
  let command: string[] | undefined;
  if (o.agentCommand !== undefined && o.agentCommand !== null) {
    try {
      command = commandAt([...o.agentCommand], 'SVC_TASK_AGENT_COMMAND');
    } catch (err) {
      throw new Error(errorMessage(err), { cause: err });
    }
  }
  await rm(join(o.stateDir, 'tasks'), { recursive: true, force: true });
  const commands = new AgentCommandClient(o.actors, o.agents);
  const orchestrator = new TaskOrchestrator({
    ...o,
    vms: new TaskVms(o.vms, o.agents.registry, { ...DEFAULT_TASK_VM, ...o.vm }),
    commands,
    capacity: hypervisorCapacity(o.hypervisor),
    manifestDefaults: {
      ...(command !== undefined ? { command } : {}),
      ...(o.defaultModel !== undefined && o.defaultModel !== null ? { model: o.defaultModel } : {}),
    },
  });
  let stopping: Promise<void> | undefined;
  return {
    orchestrator,
    registerRoutes: (router) => registerTaskRoutes(router, { tasks: orchestrator }),
    activeCount: () => orchestrator.activeCount(),
    stop() {
      stopping ??= (async () => {
        await orchestrator.stop(o.stopDeadlineMs ?? DEFAULT_TASK_STOP_DEADLINE_MS);
        commands.stop();
      })();
      return stopping;
    },
  };
}

/** The capacity check over the hypervisor's health (see the file comment). */
export function hypervisorCapacity(hv: Pick<HypervisorPort, 'health'>, now: () => number = Date.now): () => Promise<CapacityCheck> {
  let cached: { atMs: number; result: Promise<CapacityCheck> } | undefined;
  return () => {
    const t = now();
    if (cached !== undefined && t - cached.atMs < CAPACITY_CACHE_MS) return cached.result;
    const result = hv.health().then(
      (h): CapacityCheck => {
        if (h.status !== 'down') return { ok: true };
        const hosts = h.hosts.map((x) => `${x.host}: ${x.error?.message ?? x.status}, circuit ${x.circuit}`).join('; ');
        return {
          ok: false,
          reason: `no VM can be created for the task: the hypervisor is down (${hosts || 'no hosts'}), and tasks run on new VMs only (there is no pool of idle agents)`,
          retryAfterSeconds: h.retryAfterSeconds ?? 10,
        };
      },
      (err: unknown): CapacityCheck => ({
        ok: false,
        reason: `no VM can be created for the task: the hypervisor health check failed (${errorMessage(err)})`,
        retryAfterSeconds: 10,
      }),
    );
    cached = { atMs: t, result };
    return result;
  };
}
