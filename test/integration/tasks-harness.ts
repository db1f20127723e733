/**
 * The task feature on real parts, for the tasks-*.test.ts files: libvirt's test driver, worker
 * shards hosting agent and VM actors, the mTLS gRPC agents listener with real local
 * sandbox-agent processes (one per task VM), real git, real files, a real HTTP listener on
 * loopback; the coding agent is test/fixtures/fake-claude/fake-claude.mjs.
 * startServer with the events, actors, agents, gRPC listener, hypervisor, VM, storage, task,
 * server-route and HTTP listener components (no output fanout, no sessions, no job pool).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { AgentService } from '../../src/agent-link/agent-service.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { eventsComponent } from '../../src/events/component.js';
import type { EventStore } from '../../src/events/event-store.js';
import { startServer } from '../../src/main.js';
import { actorsComponent, httpComponent, hypervisorComponent } from '../../src/server/runtime-components.js';
import { serverRoutesComponent } from '../../src/server/server-routes.js';
import { storageComponent } from '../../src/storage/component.js';
import { tasksComponent } from '../../src/tasks/component.js';
import { DEFAULT_TASK_STOP_DEADLINE_MS, type TaskService, type TaskServiceOptions } from '../../src/tasks/task-service.js';
import { vmsComponent } from '../../src/vms/component.js';
import type { VmService } from '../../src/vms/vm-service.js';
import { initGitRepo } from '../support/git-repo.js';
import { repoRoot } from '../support/paths.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, tail, waitFor } from '../support/wait.js';

export const FAKE_CLAUDE = join(repoRoot, 'test', 'fixtures', 'fake-claude', 'fake-claude.mjs');

/** The manifest's agent.command running the fake CLI like Claude Code. */
export const FAKE_COMMAND = [process.execPath, FAKE_CLAUDE, '-p', '{prompt}', '--output-format', 'stream-json', '--model', '{model}'];

export type Json = Record<string, unknown>;

export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

export interface TaskHarness {
  readonly dir: string;
  readonly base: string;
  readonly events: EventStore;
  readonly agents: AgentService;
  readonly vms: VmService;
  readonly tasks: TaskService;
  request(method: string, path: string, body?: unknown): Promise<{ status: number; headers: Headers; body: Json; text: string }>;
  /** POSTs a manifest object; asserts 202; resolves with the task id. */
  submit(manifest: Json): Promise<string>;
  /**
   * Polls GET /api/v1/tasks/{id} until its state is one of `states` (default: any terminal); the
   * timeout shows the task and the tail of its log.
   */
  waitTask(id: string, states?: readonly string[], deadlineMs?: number): Promise<Json>;
  /** The task as the API has it and the tail of its log file, for a timeout message. */
  describeTask(id: string): Promise<string>;
  /** Reads an SSE stream until the server closes it (or timeoutMs). */
  sse(path: string, headers?: Record<string, string>, timeoutMs?: number): Promise<SseEvent[]>;
  /** A git repository (hello.txt "hello world", branch `feature` with feature.txt); its path. */
  makeRepo(): Promise<string>;
  /** A manifest running the fake CLI against `repo`. */
  manifest(repo: string, prompt: string, extra?: Json): Json;
  stop(): Promise<void>;
}

export const TERMINAL = ['completed', 'failed', 'failed_preserved', 'cancelled'];

export async function startTaskHarness(
  opts: Partial<Omit<TaskServiceOptions, 'vms' | 'agents' | 'actors' | 'hypervisor' | 'storage'>> & { hypervisorUris?: string[] } = {},
): Promise<TaskHarness> {
  const { hypervisorUris, ...taskOpts } = opts;
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-tasks-'));
  const config = loopbackConfig(dir, {
    SVC_ACTORS: 'workers',
    SVC_ACTOR_SHARDS: '2',
    // Bounds the whole stop; the VM and task components keep the bounds they had on their own.
    SVC_SHUTDOWN_DEADLINE_MS: '20000',
    SVC_HYPERVISOR_URI: (hypervisorUris ?? ['test:///default']).join(','),
    SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
  });
  const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const server = await startServer(config, logger, {
    components: [
      eventsComponent(),
      actorsComponent,
      agentsComponent,
      agentListenerComponent,
      hypervisorComponent,
      vmsComponent({ agentConnectTimeoutMs: 120_000, localAgentStopGraceMs: 3000, stopDeadlineMs: 6000 }),
      storageComponent,
      tasksComponent({
        stopDeadlineMs: DEFAULT_TASK_STOP_DEADLINE_MS,
        vm: { vcpus: 1, memoryMiB: 256, diskGiB: 1 },
        keepWorkspaces: true,
        killGraceMs: 2000,
        provisionTimeoutMs: 180_000,
        ...taskOpts,
      }),
      serverRoutesComponent,
      httpComponent,
    ],
  });
  const { events, agents, vms, tasks } = server;
  const http = server.service('http');
  const base = `http://127.0.0.1:${http.port}`;

  const request: TaskHarness['request'] = async (method, path, body) => {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      init.headers = { 'content-type': 'application/json' };
    }
    const res = await fetch(base + path, init);
    const text = await res.text();
    let json: Json = {};
    try {
      json = JSON.parse(text) as Json;
    } catch {
      // A download or an empty body.
    }
    return { status: res.status, headers: res.headers, body: json, text };
  };
  const describeTask = async (id: string): Promise<string> => {
    const r = await request('GET', `/api/v1/tasks/${id}`);
    const b = r.body;
    const task = JSON.stringify({
      status: r.status,
      state: b['state'],
      state_message: b['state_message'],
      error: b['error'],
      vm: b['vm_name'],
      progress: b['progress'],
    });
    let log = '(no log file)';
    try {
      log = tail(readFileSync(join(dir, 'tasks', id, 'log.ndjson'), 'utf8'), 1500);
    } catch {
      // not written yet
    }
    return `task ${task}; log ${log}`;
  };
  let repoCount = 0;
  let stopped: Promise<void> | undefined;
  return {
    dir,
    base,
    events,
    agents,
    vms,
    tasks,
    request,
    async submit(manifest) {
      const r = await request('POST', '/api/v1/tasks', { manifest });
      assert.equal(r.status, 202, r.text);
      assert.equal(r.body['accepted'], true);
      assert.equal(r.body['error'], null);
      return String(r.body['task_id']);
    },
    async waitTask(id, states = TERMINAL, deadlineMs = 3 * DEADLINE_MS.endToEnd) {
      return await waitFor(
        `task ${id} to be ${states.join(' or ')}`,
        async () => {
          const r = await request('GET', `/api/v1/tasks/${id}`);
          assert.equal(r.status, 200, r.text);
          return states.includes(String(r.body['state'])) ? r.body : undefined;
        },
        { deadlineMs, intervalMs: 100, lastState: () => describeTask(id) },
      );
    },
    describeTask,
    sse: (path, headers = {}, timeoutMs = 120_000) => readSse(base + path, headers, timeoutMs),
    async makeRepo() {
      const repo = join(dir, 'repos', `repo-${++repoCount}`);
      const git = await initGitRepo(repo);
      await writeFile(join(repo, 'hello.txt'), 'hello world\nsecond line\n');
      git('commit', '-qam', 'second');
      git('checkout', '-qb', 'feature');
      await writeFile(join(repo, 'feature.txt'), 'on the feature branch\n');
      git('add', '.');
      git('commit', '-qm', 'feature');
      git('checkout', '-q', 'main');
      return repo;
    },
    manifest(repo, prompt, extra = {}) {
      return {
        name: 'fix-greeting',
        repository: { url: repo },
        agent: { prompt, model: 'claude-test-1', command: FAKE_COMMAND },
        ...extra,
      };
    },
    stop() {
      stopped ??= (async () => {
        await server.stop();
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/** A minimal SSE reader over fetch: events until the server ends the stream. */
export async function readSse(url: string, headers: Record<string, string>, timeoutMs: number): Promise<SseEvent[]> {
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: AbortSignal.timeout(timeoutMs) });
  assert.equal(
    res.status,
    200,
    await res
      .clone()
      .text()
      .catch(() => ''),
  );
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const text = await res.text();
  return parseSse(text);
}

export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    let event = 'message';
    let id: string | undefined;
    const data: string[] = [];
    let any = false;
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      any = true;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'id') id = value;
      else if (field === 'data') data.push(value);
    }
    if (any && data.length > 0) out.push({ event, data: data.join('\n'), id });
  }
  return out;
}

/** True while process `pid` exists and is not a zombie waiting to be reaped. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Polls until `cond` holds (the shared helper with this file's defaults); `lastState` is what a timeout shows. */
export async function until(
  what: string,
  cond: () => boolean | Promise<boolean>,
  deadlineMs: number = DEADLINE_MS.agent,
  lastState?: () => string | Promise<string>,
): Promise<void> {
  await waitFor(what, cond, { deadlineMs, intervalMs: 100, ...(lastState !== undefined && { lastState }) });
}
