/**
 * Progress of an agent run, extracted from its chat events (for task progress and dashboards):
 * how many tools it called, which one is running, when it last did something, how much it
 * printed, and how it finished.
 */
import type { ChatEvent } from '../protocol/chat-events.js';

/** Tool calls remembered while waiting for their result; older ones are forgotten past this. */
export const kMaxOpenToolCalls = 256;

export interface ChatProgress {
  /** tool_call events seen. */
  toolCalls: number;
  /** tool_result events with status error. */
  toolErrors: number;
  /** Name of the most recent tool call still waiting for its result; null when none. */
  currentTool: string | null;
  /** Unix ms of the last output or event; null before any. */
  lastActivityMs: number | null;
  /** Bytes of command output observed. */
  outputBytes: number;
  /** A done or error event was seen. */
  finished: boolean;
  /** done's finish_reason, or 'error' after an error event; null while running. */
  finishReason: 'stop' | 'error' | null;
  /** done's total_cost_usd, when reported. */
  costUsd: number | null;
  model: string | null;
}

export class ChatProgressTracker {
  readonly #open = new Map<string, string>();
  #p: ChatProgress = {
    toolCalls: 0,
    toolErrors: 0,
    currentTool: null,
    lastActivityMs: null,
    outputBytes: 0,
    finished: false,
    finishReason: null,
    costUsd: null,
    model: null,
  };

  /** Output bytes arrived (whether or not they completed a line). */
  observeBytes(byteLength: number, nowMs: number = Date.now()): void {
    this.#p.outputBytes += byteLength;
    this.#p.lastActivityMs = nowMs;
  }

  /** Events from the projector. */
  observe(events: readonly ChatEvent[], nowMs: number = Date.now()): void {
    for (const ev of events) this.#one(ev);
    if (events.length > 0) this.#p.lastActivityMs = nowMs;
  }

  /** A copy of the current progress. */
  snapshot(): ChatProgress {
    return { ...this.#p };
  }

  #one(ev: ChatEvent): void {
    const d = ev.data;
    switch (ev.event) {
      case 'tool_call': {
        this.#p.toolCalls++;
        const name = typeof d.name === 'string' ? d.name : 'unknown';
        const id = typeof d.tool_id === 'string' ? d.tool_id : `#${ev.seq}`;
        this.#open.delete(id);
        this.#open.set(id, name);
        if (this.#open.size > kMaxOpenToolCalls) {
          const oldest = this.#open.keys().next();
          if (oldest.done !== true) this.#open.delete(oldest.value);
        }
        break;
      }
      case 'tool_result':
        if (d.status === 'error') this.#p.toolErrors++;
        if (typeof d.tool_id === 'string') this.#open.delete(d.tool_id);
        break;
      case 'status':
        if (typeof d.model === 'string') this.#p.model = d.model;
        break;
      case 'done':
        this.#finish(d.finish_reason === 'error' ? 'error' : 'stop');
        if (typeof d.total_cost_usd === 'number') this.#p.costUsd = d.total_cost_usd;
        if (typeof d.model === 'string') this.#p.model = d.model;
        break;
      case 'error':
        this.#finish('error');
        break;
      default:
        break;
    }
    let current: string | null = null;
    for (const name of this.#open.values()) current = name;
    this.#p.currentTool = current;
  }

  #finish(reason: 'stop' | 'error'): void {
    this.#p.finished = true;
    this.#p.finishReason = reason;
    this.#open.clear();
  }
}
