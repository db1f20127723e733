/**
 * The fleet tools the MCP server serves (README "MCP"): each a name, a description, the
 * permission it needs, a strict zod input schema (unknown fields are refused, so a misspelt
 * argument never silently becomes a default) and what it does through the existing services.
 * This table is the one source: the server registers it (server.ts) and discovery reads the
 * registered server (discovery.ts), so neither can drift from it.
 *
 * | tool           | permission         | does |
 * |----------------|--------------------|------|
 * | list_agents    | admin.read         | the agents registry (GET /api/v1/agents), filtered and paged |
 * | list_vms       | admin.read         | the hypervisor's VMs (GET /api/v1/vms), paged |
 * | read_task_log  | admin.read         | one page of a task's log (task-log-page.ts) |
 * | create_vm      | admin.hypervisor   | POST /api/v1/vms's create (same rules), optionally waiting for its operation |
 * | run_command    | admin.hypervisor   | one command on an agent, output streamed as progress (run-command.ts) |
 */
import { z } from 'zod';
import type { Permission } from '../auth/permissions.js';
import type { Operation } from '../wire/vms.js';
import { AGENT_STATUSES, type Agent } from '../wire/agents.js';
import { LIMITS, PROFILES, VM_NAME_MAX, parseCreateVm, type CreateVmRequest } from '../vms/create-request.js';
import type { CommandStarter } from '../tasks/agent-run.js';
import { runCommandForMcp, type AgentStatusLookup } from './run-command.js';
import { readTaskLogPage, type TaskLogSource } from './task-log-page.js';

/** Most items a list tool returns in one call. */
export const kMaxListLimit = 1000;
/** Default and largest bound of each output stream of run_command (bytes). */
export const kRunCommandOutputBytes = { default: 64 * 1024, max: 1024 * 1024 } as const;
/** Largest timeout_seconds of run_command. */
export const kRunCommandMaxTimeoutSeconds = 3600;
/** Largest wait_seconds of create_vm. */
export const kCreateVmMaxWaitSeconds = 600;
/** Bounds of one read_task_log page. */
export const kTaskLogPage = { defaultRecords: 200, maxRecords: 1000, defaultBytes: 64 * 1024, maxBytes: 1024 * 1024 } as const;

/** The services the tools use, as slices (tests and the component pass the real ones). */
export interface FleetToolDeps {
  readonly agents: Pick<AgentStatusLookup, 'get'> & { list(): Agent[] };
  readonly vms: {
    list(q: { state: 'running' | 'stopped' | 'all'; prefix: string }): Promise<{ vms: readonly unknown[]; total: number }>;
    create(req: CreateVmRequest): Promise<{ operation: Operation; warnings?: string[] }>;
    waitForOperation(id: string, opts: { timeoutMs: number; signal: AbortSignal }): Promise<Operation>;
    /** The operation as it is now, null when unknown. */
    getOperation(id: string): Operation | null;
  };
  readonly commands: CommandStarter;
  readonly tasks: TaskLogSource;
  /** SVC_EXEC_DEFAULT_TIMEOUT_SECONDS: run_command's default timeout. */
  readonly execDefaultTimeoutSeconds: number;
  /** SVC_ENABLE_DIRECT_RUNTIME_SSH (create_vm's rules need it; the tool takes no ssh_key). */
  readonly directRuntimeSsh: boolean;
  /** Records an accepted create in the fleet inventory as desired (absent without the fleet feature). */
  readonly recordCreate?: (
    req: CreateVmRequest,
    operationId: string,
    owner: { actor: string | null; mode: 'mtls' | 'local' },
  ) => Promise<void>;
}

/** What a tool call gets besides its arguments. */
export interface ToolCall {
  /** Aborted when the caller cancels the request or goes away. */
  readonly signal: AbortSignal;
  /** Who called (the operator identity of the request). */
  readonly caller: { readonly actor: string | null; readonly mode: 'mtls' | 'local' };
  /** Sends a progress notification; absent when the caller asked for none (no progressToken). */
  readonly progress?: (progress: number, message?: string, total?: number) => void;
}

/** One tool, its types erased (defineTool checks them). */
export interface FleetTool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly permission: Permission;
  /** True for tools that change nothing (MCP readOnlyHint). */
  readonly readOnly: boolean;
  readonly input: z.ZodObject;
  /** The structured result; rejects with an SvcError the server reports as a tool error. */
  run(args: unknown, call: ToolCall): Promise<Record<string, unknown>>;
  /** The human-readable text of a result (default: its JSON). */
  text?(result: Record<string, unknown>): string;
}

function defineTool<S extends z.ZodRawShape, R extends object>(def: {
  name: string;
  title: string;
  description: string;
  permission: Permission;
  readOnly: boolean;
  input: S;
  run: (args: z.output<z.ZodObject<S>>, call: ToolCall) => Promise<R>;
  text?: (result: R) => string;
}): FleetTool {
  const { text } = def;
  return {
    name: def.name,
    title: def.title,
    description: def.description,
    permission: def.permission,
    readOnly: def.readOnly,
    input: z.strictObject(def.input),
    // The SDK validated args against `input` before calling.
    run: async (args, call) => (await def.run(args as z.output<z.ZodObject<S>>, call)) as Record<string, unknown>,
    ...(text !== undefined && { text: (r: Record<string, unknown>) => text(r as R) }),
  };
}

const page = {
  limit: z.number().int().min(1).max(kMaxListLimit).default(100).describe(`most items to return (1-${kMaxListLimit}, default 100)`),
  offset: z.number().int().min(0).default(0).describe('items to skip (default 0)'),
};

/** The tools, in the order listTools shows them. */
export function fleetTools(d: FleetToolDeps): readonly FleetTool[] {
  return [
    defineTool({
      name: 'list_agents',
      title: 'List agents',
      description:
        'The agents sandboxd knows (one per VM, the agent id is the VM name), sorted by id, with status ' +
        `(${AGENT_STATUSES.join(', ')}), hostname, address, heartbeat and metrics. Paged: total is the count before paging.`,
      permission: 'admin.read',
      readOnly: true,
      input: { status: z.enum(AGENT_STATUSES).optional().describe('only agents with this status'), ...page },
      run: ({ status, limit, offset }) => {
        const all = d.agents.list().filter((a) => status === undefined || a.status === status);
        return Promise.resolve({ agents: all.slice(offset, offset + limit), total: all.length });
      },
    }),
    defineTool({
      name: 'list_vms',
      title: 'List VMs',
      description: 'The VMs of the hypervisor: name, state, uuid, vCPUs, memory, address, uptime. Paged: total is the count before paging.',
      permission: 'admin.read',
      readOnly: true,
      input: {
        state: z.enum(['running', 'stopped', 'all']).default('all').describe('running, stopped (stopped or crashed) or all (default)'),
        prefix: z.string().max(64).default('agent-').describe('name prefix (default agent-; * for every VM)'),
        ...page,
      },
      run: async ({ state, prefix, limit, offset }) => {
        const list = await d.vms.list({ state, prefix: prefix === '*' ? '' : prefix });
        return { vms: list.vms.slice(offset, offset + limit), total: list.total };
      },
    }),
    defineTool({
      name: 'create_vm',
      title: 'Create a VM',
      description:
        'Creates and (by default) starts a VM with its agent, as POST /api/v1/vms does: an asynchronous vm_create operation. ' +
        'With wait_seconds > 0 the call waits up to that long for the operation to finish and returns it completed or failed ' +
        '(or still running when the wait ran out); the new agent id is the VM name. Direct SSH keys are not offered here (use gateway SSH leases).',
      permission: 'admin.hypervisor',
      readOnly: false,
      input: {
        name: z
          .string()
          .max(VM_NAME_MAX)
          .regex(/^agent-[a-z0-9-]+$/)
          .describe(`the VM name: ^agent-[a-z0-9-]+$, at most ${VM_NAME_MAX} characters`),
        profile: z.enum(PROFILES).optional().describe('svc-dev (default) or basic'),
        vcpus: z.number().int().min(LIMITS.vcpus.min).max(LIMITS.vcpus.max).optional().describe(`default ${LIMITS.vcpus.default}`),
        memory_mb: z
          .number()
          .int()
          .min(LIMITS.memory_mb.min)
          .max(LIMITS.memory_mb.max)
          .optional()
          .describe(`MiB, default ${LIMITS.memory_mb.default}`),
        disk_gb: z
          .number()
          .int()
          .min(LIMITS.disk_gb.min)
          .max(LIMITS.disk_gb.max)
          .optional()
          .describe(`GiB, default ${LIMITS.disk_gb.default}`),
        agentshare: z.boolean().optional().describe('shared storage (default true)'),
        start: z.boolean().optional().describe('start after provisioning (default true)'),
        wait_seconds: z
          .number()
          .int()
          .min(0)
          .max(kCreateVmMaxWaitSeconds)
          .default(0)
          .describe(`seconds to wait for the operation to finish (0-${kCreateVmMaxWaitSeconds}, default 0: return at once)`),
      },
      run: async ({ wait_seconds, ...body }, call) => {
        const req = parseCreateVm(body, { directRuntimeSsh: d.directRuntimeSsh });
        const accepted = await d.vms.create(req);
        await d.recordCreate?.(req, accepted.operation.id, call.caller);
        let operation = accepted.operation;
        let waited = false;
        if (wait_seconds > 0 && operation.status !== 'completed' && operation.status !== 'failed') {
          call.progress?.(operation.progress_percent, `vm_create ${operation.id} ${operation.status}`, 100);
          try {
            operation = await d.vms.waitForOperation(operation.id, { timeoutMs: wait_seconds * 1000, signal: call.signal });
            waited = true;
          } catch (err) {
            // The wait ran out (server.timeout) or the caller went away: the operation goes on.
            if (call.signal.aborted) throw err;
            operation = d.vms.getOperation(operation.id) ?? operation;
          }
        }
        return {
          operation,
          agent_id: body.name,
          ...(accepted.warnings !== undefined && accepted.warnings.length > 0 && { warnings: accepted.warnings }),
          ...(wait_seconds > 0 && !waited && { note: `the operation did not finish within ${wait_seconds} s; it goes on` }),
        };
      },
    }),
    defineTool({
      name: 'run_command',
      title: 'Run a command on an agent',
      description:
        'Runs a program on a connected agent (no shell: for one, command "sh" with args ["-c", "..."]) and returns its exit code, ' +
        'stdout and stderr. While it runs, the output is sent as progress notifications when the request has a progressToken. ' +
        `Bounded: the result keeps at most max_output_bytes of each stream (default ${kRunCommandOutputBytes.default}), ` +
        'its first and last half, and says how many bytes it left out; the full output stays replayable by command_id from ' +
        'GET /api/v1/agent-output/stream?command_id=<id>&replay=true. Cancelling the request kills the command (its process group).',
      permission: 'admin.hypervisor',
      readOnly: false,
      input: {
        agent_id: z.string().min(1).max(256).describe('the agent (list_agents; the VM name for VMs sandboxd created)'),
        command: z.string().min(1).max(4096).describe('the program to run (looked up in PATH)'),
        args: z.array(z.string().max(65_536)).max(1024).default([]).describe('its arguments'),
        cwd: z.string().max(4096).default('').describe("working directory (default: the agent's work directory; ~ for home)"),
        env: z.record(z.string(), z.string().max(65_536)).default({}).describe('extra environment variables'),
        timeout_seconds: z
          .number()
          .int()
          .min(1)
          .max(kRunCommandMaxTimeoutSeconds)
          .optional()
          .describe(
            `the agent kills the command's process group after this (1-${kRunCommandMaxTimeoutSeconds}; default SVC_EXEC_DEFAULT_TIMEOUT_SECONDS)`,
          ),
        max_output_bytes: z
          .number()
          .int()
          .min(1024)
          .max(kRunCommandOutputBytes.max)
          .default(kRunCommandOutputBytes.default)
          .describe(`bytes of each stream the result keeps (1024-${kRunCommandOutputBytes.max})`),
      },
      run: (a, call) =>
        runCommandForMcp(d.commands, d.agents, {
          agentId: a.agent_id,
          command: a.command,
          args: a.args,
          cwd: a.cwd,
          env: a.env,
          timeoutSeconds: a.timeout_seconds ?? d.execDefaultTimeoutSeconds,
          maxOutputBytes: a.max_output_bytes,
          signal: call.signal,
          ...(call.progress !== undefined && { onProgress: (p: number, m: string | undefined) => call.progress?.(p, m) }),
        }),
      text: (r) => {
        const parts = [`exit code ${r.exit_code}${r.error !== '' ? ` (${r.error})` : ''}`];
        if (r.stdout.total_bytes > 0) parts.push(`--- stdout (${r.stdout.total_bytes} bytes) ---\n${r.stdout.text}`);
        if (r.stderr.total_bytes > 0) parts.push(`--- stderr (${r.stderr.total_bytes} bytes) ---\n${r.stderr.text}`);
        if (r.gaps.length > 0) parts.push(`--- output lost ---\n${JSON.stringify(r.gaps)}`);
        parts.push(`command_id ${r.command_id}`);
        return parts.join('\n');
      },
    }),
    defineTool({
      name: 'read_task_log',
      title: "Read a task's log",
      description:
        "One page of a task's log (records stdout, stderr, event, and the terminal completed or error), with the task's state. " +
        'Page with after_seq = next_after_seq until end_of_log is true.',
      permission: 'admin.read',
      readOnly: true,
      input: {
        task_id: z
          .string()
          .regex(/^task-[0-9a-f-]{36}$/)
          .describe('the task id (task-<uuid>)'),
        after_seq: z.number().int().min(0).default(0).describe('records after this seq (default 0: from the start)'),
        max_records: z
          .number()
          .int()
          .min(1)
          .max(kTaskLogPage.maxRecords)
          .default(kTaskLogPage.defaultRecords)
          .describe(`most records in the page (default ${kTaskLogPage.defaultRecords})`),
        max_bytes: z
          .number()
          .int()
          .min(1024)
          .max(kTaskLogPage.maxBytes)
          .default(kTaskLogPage.defaultBytes)
          .describe(`most bytes of record data in the page (default ${kTaskLogPage.defaultBytes})`),
      },
      run: (a) => readTaskLogPage(d.tasks, { taskId: a.task_id, afterSeq: a.after_seq, maxRecords: a.max_records, maxBytes: a.max_bytes }),
    }),
  ];
}
