/**
 * Id formats more than one feature checks. A leaf, so that storage can validate a task id
 * without importing the tasks feature.
 */

/** Task ids: `task-<uuid>` (lower-case, RFC 4122 layout). */
export const TASK_ID_RE = /^task-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/u;
