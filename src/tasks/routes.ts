/**
 * Task routes (spec 4.6). What the states mean and when they change: src/tasks/orchestrator.ts
 * and src/tasks/task-state.ts.
 *
 * | route                                   | success                                    | errors |
 * |-----------------------------------------|--------------------------------------------|--------|
 * | POST /api/v1/tasks                      | 202 {task_id, accepted: true, error: null} | 400 task.invalid_manifest; 503 task.no_capacity (+ Retry-After) |
 * | GET /api/v1/tasks?state=&limit=&offset= | 200 {tasks, total_count}, newest first     | 400 request.invalid (unknown state, bad limit/offset) |
 * | GET /api/v1/tasks/{id}                  | 200 Task                                   | 404 task.not_found |
 * | DELETE /api/v1/tasks/{id} {reason}      | 200 {success: true, error: null}           | 400 task.not_cancellable; 404 |
 * | GET /api/v1/tasks/{id}/logs             | 200 SSE                                    | 404 |
 * | GET /api/v1/tasks/{id}/artifacts        | 200 {artifacts: [entry]}                   | 404 |
 * | GET /api/v1/tasks/{id}/artifacts/{name} | 200 the file (streamed), Content-Type, Content-Disposition | 404 task.not_found / storage.not_found; 400 storage.invalid_path; 413 storage.download_too_large |
 *
 * POST: manifest parsing runs inline on the main thread: the YAML loader refuses anything large,
 * deep or alias-heavy before parsing (src/tasks/manifest-yaml.ts), so a manifest costs well under
 * a millisecond and a round trip to the job pool would cost more than it saves.
 *
 * DELETE answers once the task's process group is gone (or after the kill grace plus 10 s).
 * The body is optional; `reason` (a string of at most 1024 characters) goes into state_message.
 *
 * Logs (SSE): `stdout` / `stderr` (data: the text), `event` (data: JSON: `{"kind":"state",
 * "from","to","message","at"}` for every state change, `{"kind":"stream_json","event":{…}}` for
 * each stream-json object the coding agent printed, `{"kind":"workspace"…}`,
 * `{"kind":"command_exited","exit_code"…}`, `{"kind":"gap"…}`, `{"kind":"truncated"…}`), and
 * exactly one terminal frame: `completed` (data: the exit code, `0`) when the task completed, or
 * `error` (data: the task's error) when it failed, was preserved or was cancelled. Every frame
 * has an id (its seq): a reconnect with Last-Event-ID resumes after it. The stream replays from
 * the start and then follows live, and closes after the terminal frame.
 *
 * Artifact names contain `/` for files in subfolders: send them percent-encoded
 * (`reports%2Fsummary.md`) or as plain path segments; both address the same file.
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import { contentTypeFor, downloadHeaders } from '../storage/content-type.js';
import { fileSource } from '../storage/file-source.js';
import type { TaskOrchestrator } from './orchestrator.js';
import { parseLastEventId, streamTaskLog } from './task-log-stream.js';
import { TASK_ID_RE } from '../core/ids.js';
import { parseTaskListQuery } from './task-store.js';
import type { TaskArtifactList, TaskCancelResult, TaskList, TaskSubmitResult, Task } from '../wire/tasks.js';

/** Longest cancel reason accepted (characters). */
export const MAX_CANCEL_REASON_CHARS = 1024;

const PROGRESS_SCHEMA = {
  type: 'object',
  properties: {
    output_bytes: { type: 'integer' },
    tool_calls: { type: 'integer' },
    current_tool: { type: ['string', 'null'] },
    last_activity_at: { type: 'string' },
  },
  required: ['output_bytes', 'tool_calls', 'current_tool', 'last_activity_at'],
};

/** The spec's Task (part 2). */
export const TASK_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    state: { type: 'string' },
    state_message: { type: 'string' },
    created_at: { type: 'string' },
    started_at: { type: ['string', 'null'] },
    state_changed_at: { type: 'string' },
    vm_name: { type: ['string', 'null'] },
    vm_ip: { type: ['string', 'null'] },
    exit_code: { type: ['integer', 'null'] },
    error: { type: ['string', 'null'] },
    progress: PROGRESS_SCHEMA,
  },
  required: [
    'id',
    'name',
    'state',
    'state_message',
    'created_at',
    'started_at',
    'state_changed_at',
    'vm_name',
    'vm_ip',
    'exit_code',
    'error',
    'progress',
  ],
};

const LIST_SCHEMA = {
  type: 'object',
  properties: { tasks: { type: 'array', items: TASK_SCHEMA }, total_count: { type: 'integer' } },
  required: ['tasks', 'total_count'],
};
const SUBMIT_SCHEMA = {
  type: 'object',
  properties: { task_id: { type: 'string' }, accepted: { type: 'boolean' }, error: { type: ['string', 'null'] } },
  required: ['task_id', 'accepted', 'error'],
};
const CANCEL_SCHEMA = {
  type: 'object',
  properties: { success: { type: 'boolean' }, error: { type: ['string', 'null'] } },
  required: ['success', 'error'],
};
const ARTIFACT_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    path: { type: 'string' },
    size_bytes: { type: 'integer' },
    content_type: { type: 'string' },
    checksum: { type: 'string' },
  },
  required: ['name', 'path', 'size_bytes', 'content_type', 'checksum'],
};
const ARTIFACTS_SCHEMA = { type: 'object', properties: { artifacts: { type: 'array', items: ARTIFACT_SCHEMA } }, required: ['artifacts'] };

/** The {id} of a task route: anything that is not task-<uuid> cannot be a task (404 without a lookup). */
function taskId(params: Readonly<Record<string, string>>): string {
  const id = params['id'] ?? '';
  if (!TASK_ID_RE.test(id)) throw new SvcError('task.not_found', `no task ${JSON.stringify(id.slice(0, 80))}`);
  return id;
}

function cancelReason(body: unknown): string {
  if (body === undefined || body === null) return '';
  if (typeof body !== 'object' || Array.isArray(body)) throw new SvcError('request.invalid', 'the body must be a JSON object {reason}');
  const rec = body as Record<string, unknown>;
  const unknown = Object.keys(rec).filter((k) => k !== 'reason');
  if (unknown.length > 0)
    throw new SvcError('request.invalid', `unknown field ${JSON.stringify(unknown[0]?.slice(0, 40))} (send {reason})`);
  const reason = rec['reason'] ?? '';
  if (typeof reason !== 'string') throw new SvcError('request.invalid', 'reason must be a string');
  if (reason.length > MAX_CANCEL_REASON_CHARS)
    throw new SvcError('request.invalid', `reason must be at most ${MAX_CANCEL_REASON_CHARS} characters`);
  // Control characters would break log lines and SSE frames; they become spaces.
  let out = '';
  for (const ch of reason) out += ch < ' ' || ch === '\u007f' ? ' ' : ch;
  return out;
}

export function registerTaskRoutes(router: Router, deps: { tasks: TaskOrchestrator }): void {
  const { tasks } = deps;
  router.add({
    method: 'POST',
    path: '/api/v1/tasks',
    responseSchema: SUBMIT_SCHEMA,
    handler: async (req) => ({
      status: 202,
      json: { task_id: await tasks.submit(req.body), accepted: true, error: null } satisfies TaskSubmitResult,
    }),
  });
  router.add({
    method: 'GET',
    path: '/api/v1/tasks',
    responseSchema: LIST_SCHEMA,
    handler: (req) => ({ status: 200, json: tasks.list(parseTaskListQuery(req.query)) satisfies TaskList }),
  });
  router.add({
    method: 'GET',
    path: '/api/v1/tasks/:id',
    responseSchema: TASK_SCHEMA,
    handler: (req) => ({ status: 200, json: tasks.get(taskId(req.params)) satisfies Task }),
  });
  router.add({
    method: 'DELETE',
    path: '/api/v1/tasks/:id',
    maxBodyBytes: 16 * 1024,
    responseSchema: CANCEL_SCHEMA,
    handler: async (req) => {
      const id = taskId(req.params);
      await tasks.cancel(id, cancelReason(req.body));
      return { status: 200, json: { success: true, error: null } satisfies TaskCancelResult };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v1/tasks/:id/logs',
    handler: (req) => {
      const log = tasks.taskLog(taskId(req.params));
      const afterSeq = parseLastEventId(req.headers['last-event-id']);
      return { sse: (sink) => streamTaskLog(log, sink, { afterSeq }) };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v1/tasks/:id/artifacts',
    responseSchema: ARTIFACTS_SCHEMA,
    handler: async (req) => ({ status: 200, json: { artifacts: await tasks.artifacts(taskId(req.params)) } satisfies TaskArtifactList }),
  });
  router.add({
    method: 'GET',
    path: '/api/v1/tasks/:id/artifacts/*',
    handler: async (req) => {
      // Streamed like the storage downloads: one chunk in memory at a time, however large.
      const file = await tasks.artifactFile(taskId(req.params), req.params['*'] ?? '');
      const { 'content-length': _length, ...headers } = downloadHeaders(file.name, file.sizeBytes);
      return {
        status: 200,
        headers,
        contentType: contentTypeFor(file.name),
        lengthBytes: file.sizeBytes,
        stream: fileSource(file.fh, file.sizeBytes),
      };
    },
  });
}
