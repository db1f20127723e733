/**
 * Decoding of SSE events into the client's typed stream items (task logs, JSON data frames).
 */
import { ApiError } from './api-error.js';
import type { SseEvent } from './sse-parser.js';
import type { TaskLogEvent } from './types.js';

/** The event's data as JSON; ApiError `protocol` when it is not. */
export function parseJsonData(ev: SseEvent): unknown {
  try {
    return JSON.parse(ev.data) as unknown;
  } catch {
    throw new ApiError(0, 'protocol', `event ${ev.event}: data is not JSON`);
  }
}

/** One task log SSE event as a TaskLogEvent (null for unknown event names). */
export function taskLogEvent(ev: SseEvent): TaskLogEvent | null {
  switch (ev.event) {
    case 'stdout':
    case 'stderr':
      return { type: ev.event, text: ev.data, id: ev.id };
    case 'event': {
      let data: unknown = ev.data;
      try {
        data = JSON.parse(ev.data) as unknown;
      } catch {
        // Keep the text.
      }
      return { type: 'event', data, id: ev.id };
    }
    case 'completed': {
      const t = ev.data.trim();
      let code: unknown = t === '' ? null : Number(t);
      if (typeof code === 'number' && !Number.isInteger(code)) {
        try {
          code = (JSON.parse(t) as { exit_code?: unknown }).exit_code ?? null;
        } catch {
          code = null;
        }
      }
      return { type: 'completed', exitCode: typeof code === 'number' && Number.isInteger(code) ? code : null, id: ev.id };
    }
    case 'error':
      return { type: 'error', message: ev.data, id: ev.id };
    default:
      return null;
  }
}
