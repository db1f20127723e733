/**
 * The task orchestrator (spec 4.6, part 3 "Task"): takes validated manifests and walks each task
 * through its states, one runner per task.
 *
 *   pending       waiting for one of `maxConcurrent` slots (FIFO)
 *   staging       shallow `git clone` into <stateDir>/tasks/<id>/workspace; outbox created
 *   provisioning  a VM of its own (task-vm.ts), its agent connected and Ready
 *   ready → running   the coding agent: buildArgv(agent.command, {prompt, model}), no shell,
 *                 cwd = the workspace, env SANDBOX_TASK_ID, SANDBOX_WORKSPACE, SANDBOX_OUTBOX
 *   completing    exit 0: artifacts collected from the outbox (sha256 each)
 *   completed / failed / failed_preserved / cancelled
 * and finally the VM is deleted unless the task ended failed_preserved.
 *
 * Artifact convention: every regular file the command leaves under $SANDBOX_OUTBOX
 * (`<storage>/outbox/<task_id>/`, recursively) that matches artifacts.patterns (default `**`) is
 * an artifact, named by its path relative to the outbox.
 *
 * lifecycle.timeout is ONE timer per task, started at submission (time spent pending counts):
 * when it fires the task fails with "lifecycle.timeout (30m) expired in state S" and a running
 * command's process group is killed. Every move is a task.state_changed event (details task_id,
 * name, from, to, message, exit_code, error; `from` null when the task is created) and a state
 * record in the task log.
 *
 * On the libvirt test driver the VM's agent is a local process, so the workspace and outbox paths
 * are directly usable by the command. A real guest cannot see them: there the host's clone is
 * copied in after `ready` and the guest's outbox copied back during `completing` (and, best
 * effort, when a task fails), through the agent (guest-workspace.ts); the command gets the
 * guest's paths.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import type { Metrics } from '../observability/metrics.js';
import type { OpenedFile } from '../storage/safe-path.js';
import type { Storage } from '../storage/storage.js';
import {
  runAgentCommand,
  within,
  AGENT_BACKSTOP_SLACK_SECONDS,
  DEFAULT_KILL_GRACE_MS,
  RESULT_AFTER_KILL_MS,
  type CommandStarter,
} from './agent-run.js';
import { collectArtifacts, globToRegExp, type ArtifactEntry } from './artifacts.js';
import { gitClone, DEFAULT_CLONE_TIMEOUT_MS } from './git-clone.js';
import { pullOutbox, pushWorkspace, type GuestDirs } from './guest-workspace.js';
import { buildArgv, type ManifestDefaults, type TaskManifest } from './manifest.js';
import { parseSubmissionJob } from './task-jobs.js';
import type { JobRunner } from '../util/job-runner.js';
import type { ToolCallSeen } from './progress.js';
import { describeFailure, TaskOutput } from './task-output.js';
import { TaskLog, DEFAULT_TASK_LOG_MAX_BYTES } from './task-log.js';
import { TaskSlots } from './task-slots.js';
import { isTerminal, type TaskRecord, type TaskState, type TaskStateEvent } from './task-state.js';
import { TaskStore, type TaskList, type TaskListQuery } from './task-store.js';
import { DEFAULT_AGENT_LOST_GRACE_MS, taskVmName, type TaskVms } from './task-vm.js';
import { errorMessage } from '../util/error-message.js';

/** Default bound of provisioning: VM created and its agent Ready (5 minutes). */
export const DEFAULT_PROVISION_TIMEOUT_MS = 5 * 60_000;
/** Default number of pending tasks accepted before 503 task.no_capacity. */
export const DEFAULT_MAX_PENDING_TASKS = 1000;
/** Default number of finished tasks remembered (with their logs and outboxes). */
export const DEFAULT_TASK_RETENTION = 1000;
/** Bound of the best-effort outbox copy from the guest of a failed task (ms). */
const GUEST_PULL_ON_FAILURE_MS = 60_000;

/** A tool call of a task's coding agent, from its stream-json (what the activity store's self-collector records). */
export interface TaskToolCall extends ToolCallSeen {
  readonly taskId: string;
  /** The agent the coding agent runs on (the task VM's agent). */
  readonly agentId: string;
  /** The command running the coding agent (the task id: see runAgentCommand below). */
  readonly commandId: string;
  /** When it was seen. */
  readonly atMs: number;
}

/** Whether a new task could get a VM at all (see TaskServiceOptions.capacity). */
export type CapacityCheck = { ok: true } | { ok: false; reason: string; retryAfterSeconds?: number };

export interface OrchestratorOptions {
  readonly logger: Logger;
  readonly metrics?: Pick<Metrics, 'tasksByState' | 'taskOutcomesTotal'>;
  /** Runs manifest parsing, outbox archive reading and artifact hashing off the main thread; without it they run inline. */
  readonly jobs?: JobRunner;
  readonly events: { append(e: { event_type: string; vm_name?: string; agent_id?: string; details?: Record<string, unknown> }): unknown };
  readonly vms: TaskVms;
  readonly commands: CommandStarter;
  readonly storage: Pick<Storage, 'outboxDir' | 'openDownload'>;
  /** Task directories go to <stateDir>/tasks/<task_id>/. */
  readonly stateDir: string;
  readonly capacity: () => Promise<CapacityCheck>;
  readonly manifestDefaults?: ManifestDefaults;
  readonly maxConcurrent?: number;
  readonly maxPending?: number;
  readonly retention?: number;
  readonly cloneTimeoutMs?: number;
  readonly provisionTimeoutMs?: number;
  readonly killGraceMs?: number;
  readonly agentLostGraceMs?: number;
  readonly logMaxBytes?: number;
  /** Keep workspaces of finished tasks (default false: only failed_preserved keeps its workspace). */
  readonly keepWorkspaces?: boolean;
}

interface TaskContext {
  readonly id: string;
  readonly manifest: TaskManifest;
  readonly dir: string;
  readonly workspace: string;
  readonly outbox: string;
  readonly log: TaskLog;
  readonly timer: NodeJS.Timeout;
  vmName: string | null;
  createOperationId: string | null;
  artifacts: ArtifactEntry[] | null;
  /** The workspace and outbox inside a real guest (null: the agent runs on this host). */
  guest: GuestDirs | null;
  /** Resolves when no command of this task runs any more (DELETE waits for it). */
  readonly commandEnded: Promise<void>;
  endCommand: () => void;
  runner: Promise<void>;
}

export class TaskOrchestrator {
  readonly store: TaskStore;
  readonly #o: OrchestratorOptions;
  readonly #log: Logger;
  readonly #slots: TaskSlots;
  readonly #tasks = new Map<string, TaskContext>();
  readonly #toolCallListeners = new Set<(call: TaskToolCall) => void>();
  #stopping = false;

  constructor(o: OrchestratorOptions) {
    this.#o = o;
    this.#log = o.logger.child({ component: 'tasks' });
    this.#slots = new TaskSlots(o.maxConcurrent);
    this.store = new TaskStore({
      onEvent: (ev) => this.#onStateEvent(ev),
      logger: this.#log,
      maxFinishedTasks: o.retention ?? DEFAULT_TASK_RETENTION,
      ...(o.metrics !== undefined ? { metrics: o.metrics } : {}),
    });
  }

  /**
   * POST /api/v1/tasks: validate (400 task.invalid_manifest), check capacity (503
   * task.no_capacity), create the task and start its runner. Resolves with the new task id.
   */
  async submit(body: unknown): Promise<string> {
    const manifest = await parseSubmissionJob(this.#o.jobs, body, this.#o.manifestDefaults ?? {});
    await this.#checkCapacity();
    const record = this.store.create(manifest);
    const id = record.id;
    const dir = join(this.#o.stateDir, 'tasks', id);
    let endCommand!: () => void;
    const commandEnded = new Promise<void>((resolve) => (endCommand = resolve));
    const timer = setTimeout(() => {
      const state = this.store.get(id)?.state ?? 'pending';
      const killed = state === 'running' ? '; the process group was killed' : '';
      this.store.fail(id, `lifecycle.timeout (${manifest.lifecycle.timeout}) expired in state ${state}${killed}`);
    }, manifest.lifecycle.timeoutMs);
    timer.unref();
    const ctx: TaskContext = {
      id,
      manifest,
      dir,
      workspace: join(dir, 'workspace'),
      outbox: this.#o.storage.outboxDir(id),
      log: new TaskLog({
        path: join(dir, 'log.ndjson'),
        maxBytes: this.#o.logMaxBytes ?? DEFAULT_TASK_LOG_MAX_BYTES,
        onError: (err) => this.#error(err, id, 'task log write failed; the log is live-only now'),
      }),
      timer,
      vmName: null,
      createOperationId: null,
      artifacts: null,
      guest: null,
      commandEnded,
      endCommand,
      runner: Promise.resolve(),
    };
    this.#tasks.set(id, ctx);
    ctx.log.appendEssential({ kind: 'state', from: null, to: 'pending', message: record.state_message, at: record.created_at });
    ctx.runner = this.#run(ctx);
    return id;
  }

  get(id: string): TaskRecord {
    return this.store.require(id);
  }

  list(q: TaskListQuery): TaskList {
    return this.store.list(q);
  }

  /**
   * DELETE /api/v1/tasks/{id}: 404 task.not_found, 400 task.not_cancellable; otherwise the task is
   * cancelled and this resolves once its command's process group is gone (bounded by the kill
   * grace plus {@link RESULT_AFTER_KILL_MS}).
   */
  async cancel(id: string, reason: string): Promise<TaskRecord> {
    const record = this.store.cancel(id, reason);
    const ctx = this.#tasks.get(id);
    if (ctx !== undefined) await within(ctx.commandEnded, (this.#o.killGraceMs ?? DEFAULT_KILL_GRACE_MS) + RESULT_AFTER_KILL_MS + 2000);
    return record;
  }

  /** The task's log (404 task.not_found). */
  taskLog(id: string): TaskLog {
    return this.#ctx(id).log;
  }

  /** Artifacts: those collected at completing, or the outbox as it is now for unfinished tasks. */
  async artifacts(id: string): Promise<ArtifactEntry[]> {
    const ctx = this.#ctx(id);
    return ctx.artifacts ?? collectArtifacts(ctx.outbox, { patterns: ctx.manifest.artifacts.patterns, ...this.#jobs() });
  }

  /**
   * One artifact, opened for a streamed download (the caller closes it; at most
   * SVC_STORAGE_MAX_DOWNLOAD_BYTES); 404 storage.not_found unless `name` matches the task's
   * artifact patterns.
   */
  async artifactFile(id: string, name: string): Promise<OpenedFile> {
    const ctx = this.#ctx(id);
    if (!ctx.manifest.artifacts.patterns.some((p) => globToRegExp(p).test(name))) {
      throw new SvcError('storage.not_found', `task ${id} has no artifact ${JSON.stringify(name.slice(0, 200))}`);
    }
    return this.#o.storage.openDownload('outbox', id, name);
  }

  /** Tool calls of every task's coding agent as they are seen; returns the unsubscribe function. A throwing listener is ignored. */
  subscribeToolCalls(listener: (call: TaskToolCall) => void): () => void {
    this.#toolCallListeners.add(listener);
    return () => this.#toolCallListeners.delete(listener);
  }

  #toolCall(taskId: string, agentId: string, seen: ToolCallSeen): void {
    if (this.#toolCallListeners.size === 0) return;
    const call: TaskToolCall = { ...seen, taskId, agentId, commandId: taskId, atMs: Date.now() };
    for (const l of this.#toolCallListeners) {
      try {
        l(call);
      } catch {
        // A listener's failure is its own; the task goes on.
      }
    }
  }

  /** Tasks not finished (/healthz/deep active_tasks). */
  activeCount(): number {
    return this.store.activeCount();
  }

  /**
   * Refuses new tasks, fails every unfinished one ("sandboxd is stopping"), which kills running
   * commands and deletes their VMs, and waits for the runners up to `deadlineMs`. Idempotent.
   */
  async stop(deadlineMs: number): Promise<void> {
    this.#stopping = true;
    for (const ctx of this.#tasks.values()) this.store.fail(ctx.id, 'sandboxd is stopping; the task was abandoned');
    const runners = [...this.#tasks.values()].map((c) => c.runner);
    const done = await within(
      Promise.all(runners).then(() => true),
      deadlineMs,
    );
    if (done === null) this.#log.warn({ deadlineMs }, 'task runners still cleaning up at shutdown');
    await Promise.all([...this.#tasks.values()].map((c) => c.log.close()));
  }

  async #run(ctx: TaskContext): Promise<void> {
    const { id, manifest } = ctx;
    const signal = this.store.signal(id);
    let release: (() => void) | undefined;
    let phase = 'pending';
    try {
      release = await this.#slots.acquire(signal);
      const branch = manifest.repository.branch;
      phase = 'staging';
      if (!this.#move(id, 'pending', 'staging', `cloning ${manifest.repository.url}${branch !== null ? ` (branch ${branch})` : ''}`))
        return;
      await mkdir(ctx.outbox, { recursive: true, mode: 0o700 });
      await mkdir(ctx.dir, { recursive: true, mode: 0o700 });
      const clone = await gitClone({
        url: manifest.repository.url,
        branch,
        dir: ctx.workspace,
        timeoutMs: this.#o.cloneTimeoutMs ?? DEFAULT_CLONE_TIMEOUT_MS,
        signal,
      });
      ctx.log.appendEssential({
        kind: 'workspace',
        path: ctx.workspace,
        commit: clone.commit,
        clone_ms: clone.durationMs,
        outbox: ctx.outbox,
      });

      phase = 'provisioning';
      const vm = taskVmName(id);
      if (
        !this.#move(id, 'staging', 'provisioning', `workspace ready (commit ${clone.commit?.slice(0, 12) ?? 'unknown'}); creating VM ${vm}`)
      )
        return;
      // Only a VM whose create was accepted is ours to delete later (a name already taken is not).
      ctx.createOperationId = await this.#o.vms.create(vm);
      ctx.vmName = vm;
      this.store.setVm(id, { name: vm, ip: null });
      const { ip, guest } = await this.#o.vms.waitReady(vm, ctx.createOperationId, {
        timeoutMs: this.#o.provisionTimeoutMs ?? DEFAULT_PROVISION_TIMEOUT_MS,
        signal,
      });
      this.store.setVm(id, { name: vm, ip: ip === '' ? null : ip });
      if (guest) {
        const t0 = Date.now();
        ctx.guest = await pushWorkspace(this.#o.commands, ctx.workspace, { agentId: vm, taskId: id, signal });
        ctx.log.appendEssential({ kind: 'guest_workspace', path: ctx.guest.workspace, outbox: ctx.guest.outbox, copy_ms: Date.now() - t0 });
      }
      if (!this.#move(id, 'provisioning', 'ready', `VM ${vm} is running and its agent is Ready`)) return;

      phase = 'running';
      const argv = buildArgv(manifest.agent.command, { prompt: manifest.agent.prompt, model: manifest.agent.model });
      if (!this.#move(id, 'ready', 'running', `running ${argv[0] ?? '?'} (model ${manifest.agent.model}) on ${vm}`)) return;
      const output = new TaskOutput(
        ctx.log,
        (p) => this.store.updateProgress(id, p),
        undefined,
        (call) => this.#toolCall(id, vm, call),
      );
      const stopWatch = this.#o.vms.watchAgent(vm, this.#o.agentLostGraceMs ?? DEFAULT_AGENT_LOST_GRACE_MS, (why) =>
        this.store.fail(id, `agent lost: ${why}`),
      );
      const remainingS = Math.ceil((Date.parse(this.store.require(id).created_at) + manifest.lifecycle.timeoutMs - Date.now()) / 1000);
      let outcome;
      try {
        outcome = await runAgentCommand(this.#o.commands, {
          agentId: vm,
          commandId: id,
          argv,
          cwd: ctx.guest?.workspace ?? ctx.workspace,
          signal,
          env: {
            SANDBOX_TASK_ID: id,
            SANDBOX_WORKSPACE: ctx.guest?.workspace ?? ctx.workspace,
            SANDBOX_OUTBOX: ctx.guest?.outbox ?? ctx.outbox,
          },
          timeoutSeconds: Math.max(1, remainingS) + AGENT_BACKSTOP_SLACK_SECONDS,
          ...(this.#o.killGraceMs !== undefined ? { killGraceMs: this.#o.killGraceMs } : {}),
          onOutput: (stream, data) => output.output(stream, data),
          onGap: (gap) => output.gap(gap),
        });
      } finally {
        stopWatch();
        output.end();
        ctx.endCommand();
      }
      ctx.log.appendEssential({
        kind: 'command_exited',
        exit_code: outcome.exitCode,
        killed: outcome.killed,
        timed_out_by: outcome.timedOutBy || null,
      });
      if (outcome.exitCode !== 0 || !outcome.resultReceived) {
        this.store.fail(id, describeFailure(outcome, manifest.lifecycle.timeout, output.lastStderrLine()), { exitCode: outcome.exitCode });
        return;
      }
      phase = 'completing';
      if (!this.#move(id, 'running', 'completing', 'the coding agent exited 0; collecting artifacts', { exitCode: 0 })) return;
      if (ctx.guest !== null) await this.#pullGuestOutbox(ctx, ctx.guest, signal);
      ctx.artifacts = await collectArtifacts(ctx.outbox, { patterns: manifest.artifacts.patterns, signal, ...this.#jobs() });
      this.#move(id, 'completing', 'completed', `${ctx.artifacts.length} artifact(s) collected`);
    } catch (err) {
      // After a cancel or timeout the abort surfaces here; the task is already finished then.
      if (!signal.aborted) this.store.fail(id, `${phase} failed: ${errorMessage(err)}`);
    } finally {
      release?.();
      ctx.endCommand();
      await this.#finish(ctx).catch((err: unknown) => this.#error(err, id, 'task clean-up failed'));
    }
  }

  /** After the runner: terminal log record, artifacts of unfinished work, VM and workspace clean-up. */
  async #finish(ctx: TaskContext): Promise<void> {
    clearTimeout(ctx.timer);
    let record = this.store.get(ctx.id);
    if (record !== undefined && !isTerminal(record.state)) {
      this.store.fail(ctx.id, `the orchestrator stopped in state ${record.state}`);
      record = this.store.get(ctx.id);
    }
    const state: TaskState | undefined = record?.state;
    if (ctx.artifacts === null && ctx.guest !== null && state !== 'cancelled') {
      // What a failed run left in the guest's outbox, while the VM still exists (best effort).
      await this.#pullGuestOutbox(ctx, ctx.guest, AbortSignal.timeout(GUEST_PULL_ON_FAILURE_MS)).catch((err: unknown) => {
        ctx.log.appendEssential({ kind: 'guest_outbox_lost', error: errorMessage(err) });
      });
    }
    if (ctx.artifacts === null) {
      ctx.artifacts = await collectArtifacts(ctx.outbox, { patterns: ctx.manifest.artifacts.patterns, ...this.#jobs() }).catch(() => []);
    }
    if (state === 'completed') ctx.log.finish('completed', String(record?.exit_code ?? 0));
    else ctx.log.finish('error', record?.error ?? record?.state_message ?? 'the task ended');
    const preserve = state === 'failed_preserved';
    if (ctx.vmName !== null && !preserve) {
      const waitMs = this.#o.provisionTimeoutMs ?? DEFAULT_PROVISION_TIMEOUT_MS;
      await this.#o.vms
        .release(ctx.vmName, ctx.createOperationId, waitMs)
        .catch((err: unknown) => this.#error(err, ctx.id, `could not delete VM ${ctx.vmName}`));
    }
    if (!preserve && this.#o.keepWorkspaces !== true) await rm(ctx.workspace, { recursive: true, force: true });
    await ctx.log.close();
    await this.#forgetEvicted();
  }

  async #pullGuestOutbox(ctx: TaskContext, guest: GuestDirs, signal: AbortSignal): Promise<void> {
    if (ctx.vmName === null) return;
    const pulled = await pullOutbox(this.#o.commands, guest.outbox, ctx.outbox, {
      agentId: ctx.vmName,
      taskId: ctx.id,
      signal,
      ...this.#jobs(),
    });
    ctx.log.appendEssential({ kind: 'guest_outbox', files: pulled.files, skipped: pulled.skipped });
  }

  /** Drops the files of tasks the store no longer remembers (retention). */
  async #forgetEvicted(): Promise<void> {
    for (const [id, ctx] of this.#tasks) {
      if (this.store.get(id) !== undefined) continue;
      this.#tasks.delete(id);
      await rm(ctx.dir, { recursive: true, force: true }).catch(() => undefined);
      await rm(ctx.outbox, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  #move(id: string, from: TaskState, to: TaskState, message: string, opts: { exitCode?: number } = {}): boolean {
    return this.store.tryTransition(id, [from], to, message, opts);
  }

  async #checkCapacity(): Promise<void> {
    if (this.#stopping) throw new SvcError('task.no_capacity', 'sandboxd is shutting down and accepts no new tasks');
    const max = this.#o.maxPending ?? DEFAULT_MAX_PENDING_TASKS;
    if (this.#slots.waiting >= max) {
      throw new SvcError('task.no_capacity', `${this.#slots.waiting} tasks are already waiting for one of ${this.#slots.max} task slots`, {
        retryAfterSeconds: 30,
      });
    }
    const cap = await this.#o.capacity();
    if (!cap.ok)
      throw new SvcError(
        'task.no_capacity',
        cap.reason,
        cap.retryAfterSeconds !== undefined ? { retryAfterSeconds: cap.retryAfterSeconds } : undefined,
      );
  }

  #onStateEvent(ev: TaskStateEvent): void {
    const vm = this.store.get(ev.task_id)?.vm_name ?? '';
    this.#o.events.append({
      event_type: 'task.state_changed',
      vm_name: vm,
      // A task VM's agent id is the VM name.
      agent_id: vm,
      details: {
        task_id: ev.task_id,
        name: ev.name,
        from: ev.from,
        to: ev.to,
        message: ev.message,
        exit_code: ev.exit_code,
        error: ev.error,
      },
    });
    this.#tasks.get(ev.task_id)?.log.appendEssential({ kind: 'state', from: ev.from, to: ev.to, message: ev.message, at: ev.at });
    // Moves are logged by the task's state machine (task-state.ts); the creation is not a move.
    if (ev.from === null) this.#log.info({ task: ev.task_id, to: ev.to }, ev.message);
  }

  /** `{ jobs }` for the option bags of the task helpers, or nothing without a job runner. */
  #jobs(): { jobs?: JobRunner } {
    return this.#o.jobs === undefined ? {} : { jobs: this.#o.jobs };
  }

  #ctx(id: string): TaskContext {
    this.store.require(id);
    const ctx = this.#tasks.get(id);
    if (ctx === undefined) throw new SvcError('task.not_found', `no task ${id.slice(0, 80)}`);
    return ctx;
  }

  #error(err: unknown, taskId: string, what: string): void {
    this.#log.error({ task: taskId, err: errorMessage(err) }, what);
  }
}
