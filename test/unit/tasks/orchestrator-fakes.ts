/**
 * Stand-ins for the orchestrator's unit tests: a VM backend whose create operations the test
 * finishes, an agents registry the test drives, and a command starter whose commands behave by
 * their program name. Git and files are real.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandResultFrame } from '../../../actors/protocol/agent-frames.js';
import type { OperationJson } from '../../../src/core/operation-state.js';
import type { CommandHandlers, RunningCommand, StartArgs } from '../../../src/agent-link/command-client.js';
import { SvcError } from '../../../src/core/errors.js';
import type { CommandStarter } from '../../../src/tasks/agent-run.js';
import type { AgentReadiness, TaskVmBackend } from '../../../src/tasks/task-vm.js';
import type { CreateVmRequest } from '../../../src/vms/create-request.js';

type Change = Parameters<Parameters<AgentReadiness['subscribe']>[0]>[0];

export class FakeAgents implements AgentReadiness {
  readonly agents = new Map<string, { status: string; instance_id: string }>();
  readonly #listeners = new Set<(c: Change) => void>();
  get(id: string): { status: string; instance_id: string } | undefined {
    return this.agents.get(id);
  }
  subscribe(l: (c: Change) => void): () => void {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }
  set(id: string, status: string, instanceId: string): void {
    this.agents.set(id, { status, instance_id: instanceId });
    for (const l of [...this.#listeners]) l({ kind: 'updated', agent: { id, status } });
  }
  get listeners(): number {
    return this.#listeners.size;
  }
}

/** VMs: create answers at once; the operation completes after `createDelayMs` (or when the test says) and the agent becomes Ready. */
export class FakeVms implements TaskVmBackend {
  readonly created: CreateVmRequest[] = [];
  readonly removed: string[] = [];
  readonly existing = new Set<string>();
  createDelayMs = 0;
  failCreate: string | null = null;
  /** Every name is already taken by a VM that is not the task's. */
  nameTaken = false;
  readonly #ops = new Map<string, Promise<OperationJson>>();
  readonly #agents: FakeAgents;
  readonly api: TaskVmBackend['api'];
  readonly operations: TaskVmBackend['operations'];

  constructor(agents: FakeAgents) {
    this.#agents = agents;
    this.api = {
      create: (req) => {
        if (this.nameTaken) {
          this.existing.add(req.name);
          return Promise.reject(new SvcError('VM_ALREADY_EXISTS', `VM '${req.name}' already exists`));
        }
        this.created.push(req);
        const id = `op-${this.created.length}`;
        const op: OperationJson = {
          id,
          type: 'vm_create',
          status: 'completed',
          target: req.name,
          created_at: new Date().toISOString(),
          progress_percent: 100,
        };
        this.#ops.set(
          id,
          new Promise((resolve) =>
            setTimeout(() => {
              if (this.failCreate !== null) {
                resolve({ ...op, status: 'failed', error: this.failCreate, error_code: 'PROVISIONING_ERROR' });
                return;
              }
              this.existing.add(req.name);
              this.#agents.set(req.name, 'Ready', `uuid-${req.name}`);
              resolve(op);
            }, this.createDelayMs),
          ),
        );
        return Promise.resolve({ operation: { ...op, status: 'pending', progress_percent: 0 }, vm: null });
      },
      detail: (name) =>
        Promise.resolve({
          name,
          state: 'running',
          uuid: `uuid-${name}`,
          vcpus: 1,
          memory_mb: 256,
          ip_address: '10.0.0.7',
          uptime_seconds: 1,
          agent: { connected: true },
          host: 'test:///default',
          profile: 'basic',
          disk_gb: 1,
          accelerator: null,
        }),
      remove: (name) => {
        if (!this.existing.delete(name)) return Promise.reject(new SvcError('VM_NOT_FOUND', `VM '${name}' not found`));
        this.removed.push(name);
        return Promise.resolve({ deleted: true, name, disk_deleted: true });
      },
    };
    this.operations = {
      waitFor: async (id, opts = {}) => {
        const p = this.#ops.get(id);
        if (p === undefined) throw new SvcError('OPERATION_NOT_FOUND', id);
        const aborted = new Promise<never>((_, reject) => {
          if (opts.signal?.aborted === true) reject(opts.signal.reason as Error);
          opts.signal?.addEventListener('abort', () => reject(opts.signal?.reason as Error), { once: true });
        });
        return Promise.race([p, aborted]);
      },
    };
  }
}

/**
 * Commands by program name: `ok` prints stream-json with two tool calls and exits 0; `fail`
 * exits 5 after a stderr line; `hang` runs until SIGTERM (143); `stubborn` ignores SIGTERM and
 * dies on SIGKILL (137); `deaf` never answers at all; `refuse` cannot be started.
 */
export class FakeCommands implements CommandStarter {
  readonly started: Array<{ agentId: string; args: StartArgs }> = [];
  readonly signals: number[] = [];

  start(agentId: string, args: StartArgs, handlers: CommandHandlers = {}): Promise<RunningCommand> {
    if (args.command === 'refuse') return Promise.reject(new SvcError('agent.not_found', `agent ${agentId} is not connected`));
    this.started.push({ agentId, args });
    let resolve!: (r: CommandResultFrame) => void;
    const result = new Promise<CommandResultFrame>((r) => (resolve = r));
    const commandId = args.commandId ?? 'cmd-x';
    const finish = (exit: number): void =>
      resolve({
        agent_id: agentId,
        command_id: commandId,
        exit_code: exit,
        error: '',
        duration_ms: 1,
        success: exit === 0,
        timed_out_by: '',
        last_seq: 0,
        result: exit === 0 ? 'success' : 'failure',
      });
    let seq = 0;
    const out = (stream: 'stdout' | 'stderr' | 'log', text: string): void => handlers.output?.(stream, Buffer.from(text), ++seq);
    setImmediate(() => {
      if (args.command === 'ok') {
        out(
          'stdout',
          '{"type":"system","subtype":"init"}\n{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Edit","input":{}}]}}\n',
        );
        out(
          'stdout',
          '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}\n{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}\n{"type":"result","subtype":"success"}',
        );
        finish(0);
      } else if (args.command === 'fail') {
        out('stderr', 'first\nsomething broke\n');
        finish(5);
      } else if (args.command === 'hang' || args.command === 'stubborn') {
        out('stdout', 'working…\n');
      }
    });
    return Promise.resolve({
      agentId,
      commandId,
      result,
      signal: (n) => {
        this.signals.push(n);
        if ((args.command === 'hang' && n === 15) || (args.command === 'stubborn' && n === 9)) setImmediate(() => finish(128 + n));
        return Promise.resolve();
      },
      stdin: () => Promise.resolve(),
      resize: () => Promise.resolve(),
      detach: () => undefined,
    });
  }
}

/** A git repository with hello.txt; returns its path. */
export async function makeRepo(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=T', '-c', 'init.defaultBranch=main', ...args], {
      cwd: dir,
      stdio: 'ignore',
    });
  };
  git('init', '-q');
  await writeFile(join(dir, 'hello.txt'), 'hello\n');
  git('add', '.');
  git('commit', '-qm', 'one');
  return dir;
}
