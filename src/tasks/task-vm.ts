/**
 * The VM side of a task (the provisioning state and the clean-up): each task gets a VM of its
 * own, created through the VM machinery (the same queue actors and operations as
 * POST /api/v1/vms), named `agent-task-<first 8 hex of the task uuid>`; the task waits for the
 * create operation and then for the VM's agent to be connected and `Ready` (the agent id is the
 * VM name, its instance id the VM uuid, so a retained agent of an older VM of the same name never
 * counts). There is no pool of idle agents: every task provisions, and its VM is deleted (force,
 * delete_disk) when the task ends, unless it ends failed_preserved.
 *
 * While the command runs the agent is watched: Disconnected for longer than `agentLostGraceMs`
 * (its output is buffered and resent if it comes back within that time), or removed, is "agent
 * lost" and fails the task.
 */
import { SvcError, isErrorCode } from '../core/errors.js';
import { isTestDriverUri } from '../hypervisor/uri.js';
import type { OperationJson } from '../core/operation-state.js';
import type { CreateVmRequest, Profile } from '../vms/create-request.js';
import type { VmApi } from '../vms/vm-controller.js';

/** What the VM feature offers tasks (VmService has it: `{ api, operations }`). */
export interface TaskVmBackend {
  readonly api: Pick<VmApi, 'create' | 'detail' | 'remove'>;
  readonly operations: { waitFor(id: string, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<OperationJson> };
}

/** The agents registry as tasks read it (AgentRegistry has it). */
export interface AgentReadiness {
  get(agentId: string): { readonly status: string; readonly instance_id: string } | undefined;
  subscribe(
    listener: (change: { kind: 'updated'; agent: { id: string; status: string } } | { kind: 'removed'; agentId: string }) => void,
  ): () => void;
}

/** Size of a task VM. */
export interface TaskVmSpec {
  readonly profile: Profile;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
}

/** Default task VM: profile basic, 1 vCPU, 1 GiB memory, 10 GiB disk. */
export const DEFAULT_TASK_VM: TaskVmSpec = { profile: 'basic', vcpus: 1, memoryMiB: 1024, diskGiB: 10 };
/** Default time a task's agent may stay disconnected while its command runs (60 s). */
export const DEFAULT_AGENT_LOST_GRACE_MS = 60_000;
/** Attempts to delete a VM that is still busy with another operation. */
const DELETE_ATTEMPTS = 5;

/** `agent-task-<first 8 hex of the uuid>` for `task-<uuid>`. */
export function taskVmName(taskId: string): string {
  return `agent-task-${taskId.slice('task-'.length, 'task-'.length + 8)}`;
}

export class TaskVms {
  readonly #vms: TaskVmBackend;
  readonly #agents: AgentReadiness;
  readonly #spec: TaskVmSpec;

  constructor(vms: TaskVmBackend, agents: AgentReadiness, spec: TaskVmSpec = DEFAULT_TASK_VM) {
    this.#vms = vms;
    this.#agents = agents;
    this.#spec = spec;
  }

  /** Queues the create operation; resolves with its id. Rejects like POST /api/v1/vms (VM_ALREADY_EXISTS, HYPERVISOR_UNAVAILABLE, …). */
  async create(name: string): Promise<string> {
    const req: CreateVmRequest = {
      name,
      profile: this.#spec.profile,
      vcpus: this.#spec.vcpus,
      memoryMiB: this.#spec.memoryMiB,
      diskGiB: this.#spec.diskGiB,
      agentshare: true,
      start: true,
      enrollment: 'mtls',
      sshKeys: [],
      warnings: [],
    };
    const accepted = await this.#vms.api.create(req);
    return accepted.operation.id;
  }

  /**
   * Waits for the create operation, then for the VM's agent to be Ready. Resolves with the VM's
   * address ('' when unknown) and whether the agent runs in a real guest (qemu hosts) rather than
   * as a local process on this host (the test driver), which decides how the workspace gets there. Rejects with the operation's error, `server.timeout` naming what
   * it waited for, or the signal's reason.
   */
  async waitReady(
    name: string,
    operationId: string,
    opts: { timeoutMs: number; signal: AbortSignal },
  ): Promise<{ ip: string; guest: boolean }> {
    const deadline = Date.now() + opts.timeoutMs;
    const op = await this.#vms.operations.waitFor(operationId, { timeoutMs: opts.timeoutMs, signal: opts.signal });
    if (op.status === 'failed') {
      throw new SvcError(
        isErrorCode(op.error_code) ? op.error_code : 'PROVISIONING_ERROR',
        `creating VM ${name} failed: ${op.error ?? 'no reason given'}`,
      );
    }
    const detail = await this.#vms.api.detail(name);
    await this.#waitAgent(name, detail.uuid, Math.max(0, deadline - Date.now()), opts.signal);
    return { ip: detail.ip_address, guest: !isTestDriverUri(detail.host) };
  }

  /**
   * Calls `onLost` (once) when the agent stays Disconnected for `graceMs` or is removed.
   * Returns the function that stops watching.
   */
  watchAgent(name: string, graceMs: number, onLost: (why: string) => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    let fired = false;
    const lost = (why: string): void => {
      if (fired) return;
      fired = true;
      stop();
      onLost(why);
    };
    const unsubscribe = this.#agents.subscribe((c) => {
      if (c.kind === 'removed') {
        if (c.agentId === name) lost(`the agent of VM ${name} was removed`);
        return;
      }
      if (c.agent.id !== name) return;
      if (c.agent.status === 'Disconnected') {
        timer ??= setTimeout(() => lost(`the agent of VM ${name} stayed disconnected for ${Math.round(graceMs / 1000)} s`), graceMs);
        timer.unref();
      } else {
        clearTimeout(timer);
        timer = undefined;
      }
    });
    const stop = (): void => {
      clearTimeout(timer);
      unsubscribe();
    };
    return stop;
  }

  /**
   * Deletes the VM (force, delete_disk), first waiting (at most `waitMs`) for its create operation
   * when one was queued; a VM that is busy is retried a few times. Resolves false when it could
   * not be deleted (the caller logs it); true when it is gone (or never existed).
   */
  async release(name: string, createOperationId: string | null, waitMs: number): Promise<boolean> {
    if (createOperationId !== null) await this.#vms.operations.waitFor(createOperationId, { timeoutMs: waitMs }).catch(() => undefined);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#vms.api.remove(name, { force: true, deleteDisk: true });
        return true;
      } catch (err) {
        if (err instanceof SvcError && err.code === 'VM_NOT_FOUND') return true;
        if (!(err instanceof SvcError && err.code === 'VM_BUSY') || attempt >= DELETE_ATTEMPTS) throw err;
        await new Promise((r) => setTimeout(r, 500 * attempt).unref());
      }
    }
  }

  #waitAgent(name: string, instanceId: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
    const ready = (): boolean => {
      const a = this.#agents.get(name);
      return a !== undefined && a.status === 'Ready' && a.instance_id === instanceId;
    };
    if (ready()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const finish = (err?: unknown): void => {
        clearTimeout(timer);
        unsubscribe();
        signal.removeEventListener('abort', onAbort);
        if (err === undefined) resolve();
        else reject(err instanceof Error ? err : new Error('aborted'));
      };
      const onAbort = (): void => finish(signal.reason);
      const timer = setTimeout(() => {
        const a = this.#agents.get(name);
        finish(
          new SvcError(
            'server.timeout',
            `the agent of VM ${name} was not Ready within ${Math.round(timeoutMs / 1000)} s (${a === undefined ? 'never registered' : `status ${a.status}`})`,
          ),
        );
      }, timeoutMs);
      timer.unref();
      const unsubscribe = this.#agents.subscribe(() => {
        if (ready()) finish();
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
