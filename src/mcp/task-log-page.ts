/**
 * The MCP `read_task_log` tool's work: one page of a task's log (the records GET
 * /api/v1/tasks/{id}/logs streams: stdout, stderr, event, and the terminal completed or error),
 * read from the log file after everything appended so far was written.
 *
 * Paging by seq, the log's own cursor: a page holds the records after `afterSeq`, at most
 * `maxRecords` of them and at most `maxBytes` of their data (always at least one record, whose
 * data is cut to `maxBytes` if it alone is larger, and marked so). `next_after_seq` is where the
 * next page starts; `end_of_log` is true once the task finished and the page reached its last
 * record, so a caller reads until then.
 */
import { readRecords } from '../tasks/task-log-stream.js';
import type { TaskLog, TaskLogEventName } from '../tasks/task-log.js';

/** The slice of the task orchestrator the tool needs. */
export interface TaskLogSource {
  get(id: string): { readonly state: string; readonly exit_code: number | null; readonly error: string | null };
  taskLog(id: string): Pick<TaskLog, 'flushed' | 'path' | 'writtenBytes' | 'finished' | 'lastSeq'>;
}

export interface TaskLogRecordView {
  readonly seq: number;
  readonly event: TaskLogEventName;
  readonly data: string;
  /** True when `data` was cut to the page's byte bound. */
  readonly cut?: true;
}

export interface TaskLogPage {
  readonly task_id: string;
  readonly state: string;
  readonly exit_code: number | null;
  readonly error: string | null;
  readonly records: readonly TaskLogRecordView[];
  /** Pass as after_seq for the next page. */
  readonly next_after_seq: number;
  /** The newest record's seq when the page was read. */
  readonly last_seq: number;
  /** The task finished and this page holds its last record: nothing more will come. */
  readonly end_of_log: boolean;
}

export interface TaskLogPageRequest {
  readonly taskId: string;
  readonly afterSeq: number;
  readonly maxRecords: number;
  readonly maxBytes: number;
}

/** Rejects task.not_found for an unknown task. */
export async function readTaskLogPage(tasks: TaskLogSource, r: TaskLogPageRequest): Promise<TaskLogPage> {
  const task = tasks.get(r.taskId);
  const log = tasks.taskLog(r.taskId);
  // Read the finished flag first: a log finished then has its terminal record in the file after flushed().
  const finished = log.finished;
  await log.flushed();
  const records: TaskLogRecordView[] = [];
  let bytes = 0;
  let next = r.afterSeq;
  let more = false;
  for await (const rec of readRecords(log.path, log.writtenBytes)) {
    if (rec.seq <= r.afterSeq) continue;
    const size = Buffer.byteLength(rec.data);
    if (records.length >= r.maxRecords || (records.length > 0 && bytes + size > r.maxBytes)) {
      more = true;
      break;
    }
    if (size > r.maxBytes) {
      records.push({ seq: rec.seq, event: rec.event, data: Buffer.from(rec.data).subarray(0, r.maxBytes).toString('utf8'), cut: true });
      bytes += r.maxBytes;
    } else {
      records.push(rec);
      bytes += size;
    }
    next = rec.seq;
  }
  return {
    task_id: r.taskId,
    state: task.state,
    exit_code: task.exit_code,
    error: task.error,
    records,
    next_after_seq: next,
    last_seq: log.lastSeq,
    end_of_log: finished && !more,
  };
}
