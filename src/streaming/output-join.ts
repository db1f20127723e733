/**
 * Joining an agent-output or chat stream (spec 4.7) without losing or repeating an event, per the
 * live-subscriber protocol (src/http/live-subscriber.ts): subscribe to the live topic first, holding live frames; ask the
 * agent actor that owns the command (actors/protocol/output-calls.ts) for its state and the buffered events; write
 * them (page by page for a long catch-up, waiting for the client to take each page); then release
 * the held live frames the answer did not cover (their clock is above the answer's).
 *
 * agent_output streams:
 * - command_id given (agent from agent_id, or learned from the actors' frames): the command's
 *   state is asked; replay=true writes the newest `limit` chunks, a cursor (Last-Event-ID) writes
 *   everything buffered after it in pages of `limit`; output no longer buffered comes as an
 *   output_gap event. A finished command's stream ends with stream_end (command_finished) after
 *   its output; an expired one at once (command_expired). An unknown command stays live (it may
 *   start later).
 * - agent_id only, with a cursor: every command of the agent after the cursor, merged by clock.
 * - neither, with a cursor: live only, announced by an `agent_output.error` resume_not_exact event.
 * - the owning actor cannot be asked (timeout, shard restarted): `agent_output.error`
 *   replay_unavailable with the cursor to retry from, and the stream closes.
 */
import type { Logger } from 'pino';
import { ChatErrorCode, chatErrorEvent, encodeChatSse, parseChatCursor } from '../../actors/protocol/chat-events.js';
import { encodeSlowSubscriberSse, encodeStreamEndSse, AGENT_OUTPUT_SCHEMA } from '../../actors/protocol/output-events.js';
import { formatOutputCursor, parseOutputCursor } from '../../actors/protocol/output-cursor.js';
import { OutputCall, type ChatAnswer, type ReplayAnswer, type ReplayArgs } from '../../actors/protocol/output-calls.js';
import { chatTopic } from '../../actors/protocol/publish-frames.js';
import { releaseReplayBytes } from '../../actors/protocol/replay-lease.js';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import { toWire } from '../core/errors.js';
import { LiveSubscriber } from '../http/live-subscriber.js';
import type { SseSink } from '../http/types.js';
import type { CommandIndex } from './command-index.js';
import type { FanoutMetrics } from './fanout-metrics.js';
import { outputSubscriptionTopic } from './output-topics.js';
import type { AgentOutputQuery, ChatQuery } from './query.js';
import type { SseTopics } from './sse-topics.js';

/** Default bound of one call to an agent actor during a join (ms). */
export const DEFAULT_JOIN_CALL_TIMEOUT_MS = 10_000;

export interface OutputJoinDeps {
  readonly actors: { call<T = unknown>(id: string, method: string, args?: unknown, opts?: { timeoutMs?: number }): Promise<T> };
  readonly index: CommandIndex;
  readonly outputTopics: SseTopics;
  readonly chatTopics: SseTopics;
  readonly metrics: FanoutMetrics;
  readonly logger: Logger;
  /** Per-subscriber queue bound, bytes. */
  readonly subscriberQueueBytes: number;
  readonly callTimeoutMs?: number;
  /** The session of a command for chat streams without session_id; default: the command id. */
  readonly sessionOf?: (commandId: string) => string | undefined;
}

const utf8 = new TextEncoder();

/**
 * `isNew` for resumeLive on agent-output streams: a held live frame is new when its clock is
 * above the last replayed event's (clocks order every event of one agent, across its commands).
 * Frames without a cursor pass.
 */
export function afterOutputClock(lastReplayedClock: number): (cursor: string | undefined) => boolean {
  return (cursor) => {
    if (cursor === undefined) return true;
    const c = parseOutputCursor(cursor);
    return c === null || c.clock > lastReplayedClock;
  };
}

/** An `agent_output.error` event without id (stream-level notices). */
function outputNotice(code: string, message: string, extra: Record<string, unknown> = {}): Uint8Array {
  const data = JSON.stringify({ schema: AGENT_OUTPUT_SCHEMA, event_type: 'agent_output.error', code, message, ...extra });
  return utf8.encode(`event: agent_output.error\ndata: ${data}\n\n`);
}

/** A chat `error` event without id (the subscriber's Last-Event-ID stays at the last real event). */
function chatNotice(sessionId: string, commandId: string, message: string): Uint8Array {
  const data = {
    session_id: sessionId,
    raw_ref: { command_id: commandId, line: 0 },
    role: 'system',
    kind: 'error',
    error: message,
    code: ChatErrorCode.kStreamInterrupted,
  };
  return utf8.encode(`event: error\ndata: ${JSON.stringify(data)}\n\n`);
}

export class OutputJoins {
  readonly #d: OutputJoinDeps;

  constructor(deps: OutputJoinDeps) {
    this.#d = deps;
  }

  /** GET /api/v1/agent-output/stream. Resolves once the subscriber is live (or closed). */
  async joinOutput(sink: SseSink, q: AgentOutputQuery): Promise<void> {
    const d = this.#d;
    const agentId = q.agentId ?? (q.commandId === undefined ? undefined : d.index.agentOf(q.commandId));
    const ask = agentId !== undefined && (q.commandId !== undefined || q.resume !== undefined);
    const cursor = q.resume === undefined ? undefined : formatOutputCursor(q.resume.clock, q.resume.seq);
    const sub = new LiveSubscriber(sink, {
      maxQueuedBytes: d.subscriberQueueBytes,
      slowFrame: encodeSlowSubscriberSse,
      onSlow: () => d.metrics.slowSubscribers.inc({ transport: 'sse' }),
      holdLive: ask,
      ...(cursor !== undefined && { cursor }),
    });
    d.outputTopics.subscribe(outputSubscriptionTopic(q), sub);
    if (!ask) {
      if (q.resume !== undefined)
        sub.send(
          outputNotice(
            'resume_not_exact',
            'an unfiltered stream resumes live only: filter by agent_id or command_id to resume exactly after Last-Event-ID',
          ),
        );
      return;
    }
    try {
      if (q.commandId !== undefined) await this.#catchUpCommand(sub, agentId, q.commandId, q);
      else await this.#catchUpAgent(sub, agentId, q);
    } catch (err) {
      const wire = toWire(err);
      if (wire.code === 'actor.not_found') {
        // No actor for this agent (yet): nothing is buffered; stay live.
        sub.resumeLive([]);
        return;
      }
      d.logger.warn({ agent: agentId, command: q.commandId, err: wire.message }, 'agent output replay failed');
      sub.resumeLive([], () => false);
      sub.endWith(
        outputNotice(
          'replay_unavailable',
          `the buffered output could not be read (${wire.message}); reconnect with Last-Event-ID to retry`,
          { cursor: sub.cursor },
        ),
      );
    }
  }

  async #catchUpCommand(sub: LiveSubscriber, agentId: string, commandId: string, q: AgentOutputQuery): Promise<void> {
    const d = this.#d;
    const args: ReplayArgs = { commandId, mode: q.resume !== undefined ? 'after' : q.replay ? 'tail' : 'none', limit: q.limit };
    if (q.resume !== undefined) args.afterSeq = q.resume.seq;
    if (q.stream !== undefined) args.stream = q.stream;
    if (args.mode !== 'none') d.metrics.replays.inc({ kind: 'command' });
    for (;;) {
      const a = await d.actors.call<ReplayAnswer>(
        agentActorId(agentId),
        OutputCall.kReplay,
        { ...args },
        { timeoutMs: d.callTimeoutMs ?? DEFAULT_JOIN_CALL_TIMEOUT_MS },
      );
      if (sub.closed) return releaseReplayBytes(a);
      if (a.state === 'expired') {
        sub.resumeLive([], () => false);
        sub.endWith(encodeStreamEndSse({ reason: 'command_expired', agentId, commandId }));
        return;
      }
      this.#writePage(sub, a);
      if (a.more && a.last !== null) {
        await sub.whenDrained();
        if (sub.closed) return;
        args.mode = 'after';
        args.afterSeq = parseOutputCursor(a.last)?.seq ?? 0;
        continue;
      }
      // Without a replay every held frame is new (it came after the subscription); with one, only
      // those the answer did not cover. A held stream_end (no id) passes and ends the stream.
      sub.resumeLive([], args.mode === 'none' ? () => true : afterOutputClock(a.clock));
      // Finished before the call: end the stream (a no-op when a held stream_end already did).
      if (a.end !== undefined) sub.endWith(a.end);
      return;
    }
  }

  async #catchUpAgent(sub: LiveSubscriber, agentId: string, q: AgentOutputQuery): Promise<void> {
    const d = this.#d;
    let after = q.resume ?? { clock: 0, seq: 0 };
    d.metrics.replays.inc({ kind: 'agent' });
    for (;;) {
      const args = q.stream === undefined ? { after, limit: q.limit } : { after, limit: q.limit, stream: q.stream };
      const a = await d.actors.call<ReplayAnswer>(agentActorId(agentId), OutputCall.kReplayAgent, args, {
        timeoutMs: d.callTimeoutMs ?? DEFAULT_JOIN_CALL_TIMEOUT_MS,
      });
      if (sub.closed) return releaseReplayBytes(a);
      this.#writePage(sub, a);
      const last = a.last === null ? null : parseOutputCursor(a.last);
      if (a.more && last !== null) {
        await sub.whenDrained();
        if (sub.closed) return;
        after = last;
        continue;
      }
      sub.resumeLive([], afterOutputClock(a.clock));
      return;
    }
  }

  /**
   * Writes one page in one write of its one buffer, and gives the buffer back to the shard that
   * lent it (a replay is joined into a buffer the shard reuses: actors/protocol/replay-lease.ts).
   * When the page would wait in the subscriber's queue (backpressure from an earlier page) or the
   * sink does not copy, the queue gets a copy instead of the lent buffer.
   */
  #writePage(sub: LiveSubscriber, a: ReplayAnswer): void {
    try {
      if (a.events > a.chunks) this.#d.metrics.gapsReported.inc({ where: 'replay' }, a.events - a.chunks);
      if (a.bytes.byteLength > 0) {
        const frame = a.lease === undefined || sub.takesReplayNow ? a.bytes : Buffer.from(a.bytes);
        sub.sendReplay([{ frame, cursor: a.last ?? undefined }]);
      }
    } finally {
      releaseReplayBytes(a);
    }
  }

  /** GET /api/v1/agent-output/chat. */
  async joinChat(sink: SseSink, q: ChatQuery): Promise<void> {
    const d = this.#d;
    const commandId = q.commandId;
    const sessionId = q.sessionId ?? q.resume?.sessionId ?? d.sessionOf?.(commandId) ?? commandId;
    const interrupted = (message: string): Uint8Array =>
      encodeChatSse(chatErrorEvent(sessionId, commandId, (q.resume?.seq ?? 0) + 1, ChatErrorCode.kStreamInterrupted, message));
    const agentId = d.index.agentOf(commandId);
    const sub = new LiveSubscriber(sink, {
      maxQueuedBytes: d.subscriberQueueBytes,
      onSlow: () => d.metrics.slowSubscribers.inc({ transport: 'sse' }),
      slowFrame: () =>
        chatNotice(sessionId, commandId, 'the subscriber fell behind and was disconnected; reconnect with Last-Event-ID to resume'),
      holdLive: true,
    });
    if (agentId === undefined) {
      sub.resumeLive([]);
      sub.endWith(interrupted(`command ${commandId} is unknown or its output has expired`));
      return;
    }
    d.chatTopics.subscribe(chatTopic(commandId, sessionId), sub);
    d.metrics.replays.inc({ kind: 'chat' });
    let a: ChatAnswer;
    const afterSeq = q.resume !== undefined ? q.resume.seq : q.replay ? 0 : null;
    try {
      a = await d.actors.call<ChatAnswer>(
        agentActorId(agentId),
        OutputCall.kChat,
        { commandId, sessionId, afterSeq },
        { timeoutMs: d.callTimeoutMs ?? DEFAULT_JOIN_CALL_TIMEOUT_MS },
      );
    } catch (err) {
      const wire = toWire(err);
      if (wire.code !== 'actor.not_found') d.logger.warn({ agent: agentId, command: commandId, err: wire.message }, 'chat join failed');
      sub.resumeLive([], () => false);
      sub.endWith(
        wire.code === 'actor.not_found'
          ? interrupted(`command ${commandId} is unknown or its output has expired`)
          : chatNotice(sessionId, commandId, `the chat projection could not be read (${wire.message}); reconnect to retry`),
      );
      return;
    }
    if (sub.closed) return;
    if (a.state === 'unknown' || a.state === 'expired') {
      sub.resumeLive([], () => false);
      sub.endWith(interrupted(`command ${commandId} is unknown or its output has expired`));
      return;
    }
    if (a.bytes.byteLength > 0) sub.sendReplay([{ frame: a.bytes }]);
    // Live only: every held event came after the subscription; otherwise those above the answer.
    const lastSeq = a.lastSeq;
    sub.resumeLive([], (cursor) => {
      if (afterSeq === null || cursor === undefined) return true;
      const c = parseChatCursor(cursor);
      return c === null || c.seq > lastSeq;
    });
    // The projection had ended (a no-op when a held terminal event already closed the stream).
    if (a.terminated) sub.endWith();
  }
}
