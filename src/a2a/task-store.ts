/**
 * The executor task store (spec 4.8): A2A tasks of each instance, the messages that made them, and
 * the output their commands printed, captured as artifact records
 * `{artifact_id, task_id, created_at, artifact: {kind, stream, data, data_base64, command_id, seq}}`
 * (artifact-record.schema.json). The 4.8 routes and the pty-ws.v1 A2A operations read it; message
 * dispatch (dispatch.ts) writes it, and other features may too through {@link A2aTaskWriter}.
 *
 * Held in memory and, given an {@link A2aTaskDb}, written through to `$SVC_STATE_DIR/a2a/tasks.db`:
 * after a restart the tasks and their output are back, and a task whose command was still running
 * is failed ("sandboxd restarted while the command ran": nothing resumes it).
 * Bounded (README "A2A", Limits):
 * - at most `maxTasks` tasks; a new task evicts the oldest terminal task, and is refused
 *   (`a2a.store_full`, 503) when every task is still running;
 * - at most `maxTaskOutputBytes` of output per task: past it the chunk is cut, one
 *   `output_truncated` record says so and `metadata.output_truncated` turns true;
 * - at most `maxTotalOutputBytes` over all tasks: the oldest terminal tasks are evicted to make
 *   room, and when none is left the new output is truncated as above.
 *
 * `data` is the chunk as UTF-8 text (the reference's encoding). A multi-byte character split
 * across two chunks is held back and recorded whole with the next one, so the `data` of a stream's
 * records, concatenated, is exactly what the command printed when it printed UTF-8; `data_base64`
 * carries the same span as raw bytes for output that is not UTF-8.
 */
import { Buffer } from 'node:buffer';
import { SvcError } from '../core/errors.js';
import { StateMachine, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import type { A2aArtifactRecord } from '../wire/a2a.js';
import type { A2aTaskDb, TaskRow } from './task-db.js';
import { isTerminal, type TaskState } from './wire.js';

/** The output streams a command's chunks come on. */
export type OutputStream = 'stdout' | 'stderr';

/** One artifact record, as the 4.8 routes answer it (its wire shape is declared in src/wire/a2a.ts). */
export type ArtifactRecord = A2aArtifactRecord;

/** A task as the store holds it (read-only to callers). */
export interface TaskSnapshot {
  readonly id: string;
  readonly contextId: string;
  readonly instanceId: string;
  readonly state: TaskState;
  /** RFC 3339. */
  readonly createdAt: string;
  readonly updatedAt: string;
  /** The user's message text (the command). */
  readonly text: string;
  readonly messageId: string;
  readonly commandId: string;
  /** The command's exit code (128 + signal when a signal ended it), null until it ended. */
  readonly exitCode: number | null;
  /** Why it failed or was canceled, '' otherwise. */
  readonly reason: string;
  readonly artifactCount: number;
  readonly outputBytes: number;
  readonly outputTruncated: boolean;
}

/** Called after every state change of a task (and never again after its terminal one). */
export type TaskListener = (task: TaskSnapshot) => void;

/** What another feature needs to record tasks of its own (mission dispatch, say). */
export interface A2aTaskWriter {
  create(input: NewTask): TaskSnapshot;
  transition(taskId: string, to: TaskState, cause: string, fields?: { exitCode?: number; reason?: string }): boolean;
  appendOutput(taskId: string, stream: OutputStream, data: Uint8Array): void;
  finishOutput(taskId: string): void;
}

export interface NewTask {
  readonly instanceId: string;
  readonly text: string;
  readonly messageId: string;
  readonly contextId?: string | undefined;
  /** Default a new UUID. */
  readonly taskId?: string;
  readonly commandId: string;
}

export interface TaskStoreOptions {
  readonly maxTasks?: number;
  readonly maxTaskOutputBytes?: number;
  readonly maxTotalOutputBytes?: number;
  readonly logger?: TransitionLogger;
  /** Called once per task reaching a terminal state (metrics). */
  readonly onTerminal?: (state: TaskState) => void;
  readonly now?: () => number;
  /** Where the store is written through (none: memory only). */
  readonly db?: A2aTaskDb;
}

export const DEFAULT_MAX_TASKS = 1000;
export const DEFAULT_MAX_TASK_OUTPUT_BYTES = 1024 * 1024;
export const DEFAULT_MAX_TOTAL_OUTPUT_BYTES = 64 * 1024 * 1024;

/** A2A task lifecycle (spec part 3 leaves A2A tasks out; the A2A specification's states). */
export const A2A_TASK_TRANSITIONS: TransitionTable<TaskState> = {
  submitted: ['working', 'failed', 'canceled', 'rejected'],
  working: ['completed', 'failed', 'canceled', 'input-required', 'auth-required'],
  'input-required': ['working', 'canceled', 'failed'],
  'auth-required': ['working', 'canceled', 'failed'],
  completed: [],
  canceled: [],
  failed: [],
  rejected: [],
};

interface Entry {
  readonly id: string;
  readonly contextId: string;
  readonly instanceId: string;
  readonly createdAt: string;
  updatedAt: string;
  readonly text: string;
  readonly messageId: string;
  readonly commandId: string;
  exitCode: number | null;
  reason: string;
  readonly machine: StateMachine<TaskState>;
  readonly artifacts: ArtifactRecord[];
  readonly byId: Map<string, ArtifactRecord>;
  outputBytes: number;
  truncated: boolean;
  /** Incomplete UTF-8 sequence at the end of each stream, held for the next chunk. */
  readonly pending: Record<OutputStream, Buffer>;
  readonly listeners: Set<TaskListener>;
}

export class A2aTaskStore implements A2aTaskWriter {
  readonly #tasks = new Map<string, Entry>();
  readonly #maxTasks: number;
  readonly #maxTaskBytes: number;
  readonly #maxTotalBytes: number;
  readonly #o: TaskStoreOptions;
  #totalBytes = 0;

  constructor(o: TaskStoreOptions = {}) {
    this.#o = o;
    this.#maxTasks = o.maxTasks ?? DEFAULT_MAX_TASKS;
    this.#maxTaskBytes = o.maxTaskOutputBytes ?? DEFAULT_MAX_TASK_OUTPUT_BYTES;
    this.#maxTotalBytes = o.maxTotalOutputBytes ?? DEFAULT_MAX_TOTAL_OUTPUT_BYTES;
    if (o.db !== undefined) this.#load(o.db);
  }

  /** Reads the tasks back; a task left running by the previous process is failed. */
  #load(db: A2aTaskDb): void {
    for (const { task: t, artifacts } of db.load()) {
      const e = this.#entry(
        {
          instanceId: t.instance_id,
          text: t.text,
          messageId: t.message_id,
          contextId: t.context_id,
          taskId: t.id,
          commandId: t.command_id,
        },
        t.created_at,
        t.state as TaskState,
      );
      e.updatedAt = t.updated_at;
      e.exitCode = t.exit_code;
      e.reason = t.reason;
      for (const a of artifacts) {
        const rec: ArtifactRecord = {
          artifact_id: a.artifact_id,
          task_id: a.task_id,
          created_at: a.created_at,
          artifact: {
            kind: a.kind === 'output_truncated' ? 'output_truncated' : 'output_chunk',
            stream: a.stream === 'stderr' ? 'stderr' : 'stdout',
            data: a.data.toString('utf8'),
            data_base64: a.data.toString('base64'),
            command_id: a.command_id,
            seq: a.seq,
          },
        };
        e.artifacts.push(rec);
        e.byId.set(rec.artifact_id, rec);
        e.outputBytes += a.data.byteLength;
        if (rec.artifact.kind === 'output_truncated') e.truncated = true;
      }
      this.#totalBytes += e.outputBytes;
      this.#tasks.set(e.id, e);
      if (!isTerminal(e.machine.state))
        this.transition(e.id, 'failed', 'server_restarted', { reason: 'sandboxd restarted while the command ran' });
    }
  }

  /** Flushes and closes the file, when there is one. */
  close(): void {
    this.#o.db?.close();
  }

  #persist(e: Entry): void {
    const row: TaskRow = {
      id: e.id,
      instance_id: e.instanceId,
      context_id: e.contextId,
      created_at: e.createdAt,
      updated_at: e.updatedAt,
      text: e.text,
      message_id: e.messageId,
      command_id: e.commandId,
      state: e.machine.state,
      exit_code: e.exitCode,
      reason: e.reason,
      output_bytes: e.outputBytes,
      truncated: e.truncated ? 1 : 0,
    };
    this.#o.db?.putTask(row);
  }

  #now(): string {
    return new Date((this.#o.now ?? Date.now)()).toISOString();
  }

  /** Records a new task in `submitted`. Throws a2a.store_full when every slot holds a running task. */
  create(input: NewTask): TaskSnapshot {
    const id = input.taskId ?? crypto.randomUUID();
    if (this.#tasks.has(id)) throw new SvcError('request.invalid', `task ${id} exists`);
    while (this.#tasks.size >= this.#maxTasks) {
      if (!this.#evictOldestTerminal(undefined)) {
        throw new SvcError('a2a.store_full', `the task store holds ${this.#maxTasks} tasks that are all still running`);
      }
    }
    const e = this.#entry({ ...input, taskId: id }, this.#now(), 'submitted');
    this.#tasks.set(id, e);
    this.#persist(e);
    return snapshot(e);
  }

  #entry(input: NewTask & { taskId: string }, at: string, state: TaskState): Entry {
    const id = input.taskId;
    const machine = new StateMachine<TaskState>({
      name: 'a2a task',
      initial: state,
      table: A2A_TASK_TRANSITIONS,
      logFields: { task: id, instance: input.instanceId },
      ...(this.#o.logger !== undefined && { logger: this.#o.logger }),
    });
    return {
      id,
      contextId: input.contextId ?? crypto.randomUUID(),
      instanceId: input.instanceId,
      createdAt: at,
      updatedAt: at,
      text: input.text,
      messageId: input.messageId,
      commandId: input.commandId,
      exitCode: null,
      reason: '',
      machine,
      artifacts: [],
      byId: new Map(),
      outputBytes: 0,
      truncated: false,
      pending: { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) },
      listeners: new Set(),
    };
  }

  /** A task of `instanceId` (undefined when unknown, or another instance's). */
  get(instanceId: string, taskId: string): TaskSnapshot | undefined {
    const e = this.#tasks.get(taskId);
    return e === undefined || e.instanceId !== instanceId ? undefined : snapshot(e);
  }

  /** Whether any task of the instance is held. */
  hasInstance(instanceId: string): boolean {
    for (const e of this.#tasks.values()) if (e.instanceId === instanceId) return true;
    return false;
  }

  /**
   * The instance's tasks, newest first, a page at a time: `pageToken` is the id of the last task
   * of the previous page ('' or absent: from the newest).
   */
  list(
    instanceId: string,
    q: { pageSize: number; pageToken?: string | undefined; contextId?: string | undefined; state?: TaskState | undefined },
  ): { tasks: TaskSnapshot[]; nextPageToken: string } {
    const all = [...this.#tasks.values()]
      .filter((e) => e.instanceId === instanceId)
      .filter((e) => q.contextId === undefined || e.contextId === q.contextId)
      .filter((e) => q.state === undefined || e.machine.state === q.state)
      .reverse();
    let start = 0;
    if (q.pageToken !== undefined && q.pageToken !== '') {
      const i = all.findIndex((e) => e.id === q.pageToken);
      if (i < 0) throw new SvcError('request.invalid', 'page_token is not a task of this listing (it may have been evicted)');
      start = i + 1;
    }
    const page = all.slice(start, start + q.pageSize);
    const more = start + q.pageSize < all.length;
    return { tasks: page.map(snapshot), nextPageToken: more ? (page[page.length - 1]?.id ?? '') : '' };
  }

  /** The task's artifact records in order (undefined: no such task of this instance). */
  artifacts(instanceId: string, taskId: string): readonly ArtifactRecord[] | undefined {
    const e = this.#tasks.get(taskId);
    return e === undefined || e.instanceId !== instanceId ? undefined : [...e.artifacts];
  }

  /** One artifact record of the task. */
  artifact(instanceId: string, taskId: string, artifactId: string): ArtifactRecord | undefined {
    const e = this.#tasks.get(taskId);
    return e === undefined || e.instanceId !== instanceId ? undefined : e.byId.get(artifactId);
  }

  /** Moves the task (guarded by the transition table); listeners hear every change. */
  transition(taskId: string, to: TaskState, cause: string, fields: { exitCode?: number; reason?: string } = {}): boolean {
    const e = this.#tasks.get(taskId);
    if (e === undefined) return false;
    const from = e.machine.state;
    if (fields.exitCode !== undefined) e.exitCode = fields.exitCode;
    if (isTerminal(from)) {
      // A terminal task keeps its state; a late exit code (a canceled command's) is still recorded.
      if (fields.exitCode !== undefined) this.#persist(e);
      return false;
    }
    if (fields.reason !== undefined) e.reason = fields.reason;
    if (!e.machine.transition([from], to, cause)) return false;
    e.updatedAt = this.#now();
    this.#persist(e);
    if (isTerminal(to)) this.#o.onTerminal?.(to);
    const s = snapshot(e);
    for (const l of [...e.listeners]) l(s);
    if (isTerminal(to)) e.listeners.clear();
    return true;
  }

  /** Sets the exit code of a task that has already ended (a canceled command's result). */
  setExitCode(taskId: string, exitCode: number): void {
    const e = this.#tasks.get(taskId);
    if (e === undefined) return;
    e.exitCode = exitCode;
    this.#persist(e);
  }

  /** Listens to the task's state changes until it ends; returns the unsubscribe. */
  subscribe(taskId: string, listener: TaskListener): () => void {
    const e = this.#tasks.get(taskId);
    if (e === undefined || isTerminal(e.machine.state)) return () => undefined;
    e.listeners.add(listener);
    return () => e.listeners.delete(listener);
  }

  /** Records a chunk of output (see the file comment for the UTF-8 hold-back and the caps). */
  appendOutput(taskId: string, stream: OutputStream, data: Uint8Array): void {
    const e = this.#tasks.get(taskId);
    if (e === undefined || data.byteLength === 0) return;
    const held = e.pending[stream];
    const all = held.byteLength === 0 ? Buffer.from(data) : Buffer.concat([held, data]);
    const cut = completeUtf8Length(all);
    e.pending[stream] = Buffer.from(all.subarray(cut));
    if (cut > 0) this.#record(e, stream, all.subarray(0, cut));
  }

  /** The command ended: whatever a stream still holds back is recorded as it is. */
  finishOutput(taskId: string): void {
    const e = this.#tasks.get(taskId);
    if (e === undefined) return;
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = e.pending[stream];
      e.pending[stream] = Buffer.alloc(0);
      if (rest.byteLength > 0) this.#record(e, stream, rest);
    }
  }

  /** Tasks held and output bytes over all of them. */
  stats(): { tasks: number; outputBytes: number } {
    return { tasks: this.#tasks.size, outputBytes: this.#totalBytes };
  }

  #record(e: Entry, stream: OutputStream, bytes: Buffer): void {
    if (e.truncated) return;
    let keep = Math.min(bytes.byteLength, this.#maxTaskBytes - e.outputBytes);
    while (keep > 0 && this.#totalBytes + keep > this.#maxTotalBytes && this.#evictOldestTerminal(e.id));
    keep = Math.min(keep, this.#maxTotalBytes - this.#totalBytes);
    if (keep > 0) {
      // Cut at a character boundary when cutting at all.
      const piece = keep === bytes.byteLength ? bytes : bytes.subarray(0, completeUtf8Length(bytes.subarray(0, keep)) || keep);
      this.#push(e, 'output_chunk', stream, piece);
      e.outputBytes += piece.byteLength;
      this.#totalBytes += piece.byteLength;
      if (piece.byteLength === bytes.byteLength) return;
    }
    e.truncated = true;
    this.#push(e, 'output_truncated', stream, Buffer.alloc(0));
  }

  #push(e: Entry, kind: ArtifactRecord['artifact']['kind'], stream: OutputStream, bytes: Buffer): void {
    const seq = e.artifacts.length + 1;
    const rec: ArtifactRecord = {
      artifact_id: `${e.id}-${stream}-${String(seq).padStart(4, '0')}`,
      task_id: e.id,
      created_at: this.#now(),
      artifact: { kind, stream, data: bytes.toString('utf8'), data_base64: bytes.toString('base64'), command_id: e.commandId, seq },
    };
    e.artifacts.push(rec);
    e.byId.set(rec.artifact_id, rec);
    this.#o.db?.putArtifact({
      artifact_id: rec.artifact_id,
      task_id: e.id,
      seq,
      created_at: rec.created_at,
      kind,
      stream,
      data: Buffer.from(bytes),
      command_id: e.commandId,
    });
  }

  /** Evicts the oldest terminal task other than `keep`; false when there is none. */
  #evictOldestTerminal(keep: string | undefined): boolean {
    for (const e of this.#tasks.values()) {
      if (e.id === keep || !isTerminal(e.machine.state)) continue;
      this.#tasks.delete(e.id);
      this.#totalBytes -= e.outputBytes;
      this.#o.db?.deleteTask(e.id);
      return true;
    }
    return false;
  }
}

function snapshot(e: Entry): TaskSnapshot {
  return {
    id: e.id,
    contextId: e.contextId,
    instanceId: e.instanceId,
    state: e.machine.state,
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    text: e.text,
    messageId: e.messageId,
    commandId: e.commandId,
    exitCode: e.exitCode,
    reason: e.reason,
    artifactCount: e.artifacts.length,
    outputBytes: e.outputBytes,
    outputTruncated: e.truncated,
  };
}

/**
 * The length of `b` without an incomplete UTF-8 sequence at its end (the bytes of a character the
 * next chunk completes). Invalid bytes are not held back: they are recorded as they are.
 */
export function completeUtf8Length(b: Uint8Array): number {
  const n = b.byteLength;
  for (let i = n - 1; i >= 0 && i >= n - 4; i--) {
    const byte = b[i] ?? 0;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: look further back
    const need = byte >= 0xc2 && byte <= 0xdf ? 2 : byte >= 0xe0 && byte <= 0xef ? 3 : byte >= 0xf0 && byte <= 0xf4 ? 4 : 1;
    return i + need > n ? i : n;
  }
  return n;
}
