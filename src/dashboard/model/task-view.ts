/**
 * Task view helpers: the list filter (hash value → the `state` query of GET /api/v1/tasks), an
 * example manifest for the submit form, and the bounded log buffer of the live log view.
 */

/** States in which a task is still moving (spec part 3). */
export const ACTIVE_TASK_STATES = ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing'] as const;

const ALL_STATES = new Set<string>([...ACTIVE_TASK_STATES, 'completed', 'failed', 'failed_preserved', 'cancelled']);

/**
 * `''` → no filter; `active` → the active states; a state or a comma list of states → those
 * (unknown names dropped; nothing left → no filter).
 */
export function taskStateFilter(value: string): string[] | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  if (v === 'active') return [...ACTIVE_TASK_STATES];
  const states = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => ALL_STATES.has(s));
  return states.length > 0 ? states : undefined;
}

export const EXAMPLE_MANIFEST = `name: fix-flaky-test
repository:
  url: https://github.com/example/project.git
  branch: main
prompt: |
  Find why test/api.test.ts fails one run in ten and fix it.
lifecycle:
  timeout: 30m
`;

export type LogStream = 'stdout' | 'stderr' | 'event' | 'system';

export interface LogLine {
  readonly stream: LogStream;
  readonly text: string;
}

/**
 * The live log's lines, bounded by characters (a chatty task must not grow the page without
 * limit): the oldest lines fall off and `droppedChars` counts them. Chunks are split into lines;
 * a chunk that does not end in a newline continues on the next chunk of the same stream.
 */
export class LogBuffer {
  readonly #lines: LogLine[] = [];
  #chars = 0;
  #open: { stream: LogStream; text: string } | null = null;
  droppedChars = 0;
  readonly #maxChars: number;

  /** `maxChars` default 2 MiB of text. */
  constructor(maxChars = 2 * 1024 * 1024) {
    this.#maxChars = maxChars;
  }

  /** Adds a chunk; returns the complete lines it finished (in order). */
  push(stream: LogStream, chunk: string): LogLine[] {
    const out: LogLine[] = [];
    let text = chunk;
    if (this.#open !== null && this.#open.stream !== stream) out.push(this.#close());
    if (this.#open !== null) {
      text = this.#open.text + text;
      this.#open = null;
    }
    const parts = text.split('\n');
    const tail = parts.pop() ?? '';
    for (const p of parts) out.push({ stream, text: p });
    if (tail !== '') this.#open = { stream, text: tail };
    for (const l of out) this.#add(l);
    return out;
  }

  /** The unfinished last line, if any (shown but not yet committed). */
  get pending(): LogLine | null {
    return this.#open;
  }

  /** Ends the open line (end of stream). */
  flush(): LogLine[] {
    if (this.#open === null) return [];
    const l = this.#close();
    this.#add(l);
    return [l];
  }

  get lines(): readonly LogLine[] {
    return this.#lines;
  }

  #close(): LogLine {
    const l = this.#open as LogLine;
    this.#open = null;
    return l;
  }

  #add(l: LogLine): void {
    this.#lines.push(l);
    this.#chars += l.text.length + 1;
    while (this.#chars > this.#maxChars && this.#lines.length > 1) {
      const old = this.#lines.shift() as LogLine;
      this.#chars -= old.text.length + 1;
      this.droppedChars += old.text.length + 1;
    }
  }
}

/**
 * One line for a structured `event` of the task log (src/tasks/routes.ts lists the kinds): state
 * changes, the workspace, the command's exit, gaps and truncation read as sentences; anything
 * else (including stream-json events) stays JSON, so nothing is hidden.
 */
export function describeTaskEvent(data: unknown): string {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return typeof data === 'string' ? data : JSON.stringify(data);
  const e = data as Record<string, unknown>;
  const str = (v: unknown): string => (typeof v === 'string' ? v : v === null || v === undefined ? '' : JSON.stringify(v));
  switch (e['kind']) {
    case 'state': {
      const from = str(e['from']);
      const msg = str(e['message']);
      return `▸ ${str(e['to'])}${from !== '' ? ` (from ${from})` : ''}${msg !== '' ? ` — ${msg}` : ''}`;
    }
    case 'workspace': {
      const commit = str(e['commit']);
      return `▸ workspace ${str(e['path'])}${commit !== '' ? ` at commit ${commit.slice(0, 12)}` : ''}`;
    }
    case 'command_exited': {
      const how =
        e['killed'] === true
          ? ` (killed${e['timed_out_by'] !== null && e['timed_out_by'] !== undefined ? ` by the ${str(e['timed_out_by'])} timeout` : ''})`
          : '';
      return `▸ the command exited with code ${str(e['exit_code'])}${how}`;
    }
    case 'gap':
      return `▸ output lost here: ${JSON.stringify(e)}`;
    case 'truncated':
      return `▸ output truncated: ${JSON.stringify(e)}`;
    default:
      return JSON.stringify(e);
  }
}
