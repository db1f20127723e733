/**
 * A task of the store as A2A 1.0 ProtoJSON (wire.ts): what GetTask, ListTasks, SendMessage and the
 * TaskStatusUpdate frames of the pty-ws.v1 binding carry.
 */
import type { TaskSnapshot } from './task-store.js';
import { isTerminal, v10State, type A2aMessageJson, type A2aStatusUpdateJson, type A2aTaskJson } from './wire.js';

/** The 4.8 artifact listing of a task (the 0.3 base path; the 1.0 one is the same without /v1). */
export function artifactsPath(t: Pick<TaskSnapshot, 'instanceId' | 'id'>): string {
  return `/agents/${encodeURIComponent(t.instanceId)}/v1/tasks/${encodeURIComponent(t.id)}/artifacts`;
}

function statusOf(t: TaskSnapshot): A2aTaskJson['status'] {
  const status: A2aTaskJson['status'] = { state: v10State(t.state), timestamp: t.updatedAt };
  if (isTerminal(t.state)) {
    const text =
      t.state === 'completed'
        ? `the command exited 0; its output: ${artifactsPath(t)}`
        : `${t.reason !== '' ? t.reason : t.state}; its output: ${artifactsPath(t)}`;
    status.message = { messageId: `${t.id}-status`, role: 'ROLE_AGENT', parts: [{ text }], contextId: t.contextId, taskId: t.id };
  }
  return status;
}

/** The task; `historyLength` 0 leaves the user's message out. */
export function taskJson(t: TaskSnapshot, historyLength?: number): A2aTaskJson {
  const user: A2aMessageJson = {
    messageId: t.messageId,
    role: 'ROLE_USER',
    parts: [{ text: t.text }],
    contextId: t.contextId,
    taskId: t.id,
  };
  return {
    id: t.id,
    contextId: t.contextId,
    status: statusOf(t),
    ...(historyLength !== 0 && { history: [user] }),
    metadata: {
      instance_id: t.instanceId,
      command_id: t.commandId,
      exit_code: t.exitCode,
      artifact_count: t.artifactCount,
      output_bytes: t.outputBytes,
      output_truncated: t.outputTruncated,
      artifacts_path: artifactsPath(t),
    },
  };
}

/** The TaskStatusUpdateEvent of the task's current state. */
export function statusUpdateJson(t: TaskSnapshot): A2aStatusUpdateJson {
  return { taskId: t.id, contextId: t.contextId, status: statusOf(t), final: isTerminal(t.state) };
}
