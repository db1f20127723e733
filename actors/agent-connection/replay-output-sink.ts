/**
 * The replay half of an agent actor's output sink (command-output.ts): one CommandReplay per
 * command (ring + live encoding), the agent's CursorClock, the chat projections of its commands,
 * and the `output.*` control calls (actors/protocol/output-calls.ts).
 *
 * Per chunk: ONE kFrameCommandOutput frame (the chunk's bytes with its seq, clock and text
 * carry: what Exec, the command listeners and the fanout on the main thread all read; nothing is
 * encoded here), then the chat events it completes, all through the actor's Outbox, so they keep
 * their order and wait together when the outbound ring is full. Gaps and ends go raw (Exec,
 * listeners) and as their encoded SSE event (kFrameOutputPublish): they are rare. A finished command's state is released after the
 * shard's retention period (kFrameOutputForget tells the main thread).
 */
import { CursorClock, parseOutputCursor } from '../protocol/output-cursor.js';
import { ChatProjection } from '../replay/chat-projection.js';
import { agentReplay, CommandReplay, type ReplayBytes } from '../replay/command-replay.js';
import { OutputCall, type ChatAnswer, type CommandOutputState, type OutputStats, type ReplayAnswer } from '../protocol/output-calls.js';
import { chatTopic, commandKey, encodeChatPublish, PublishFrameKind } from '../protocol/publish-frames.js';
import type { OutputStreamName } from '../replay/replay-types.js';
import { shardReplay, type ShardReplay } from '../replay/shard-replay.js';
import { SvcError } from '../../src/core/errors.js';
import {
  AgentFrameKind,
  OutputStream,
  type CommandGapFrame,
  type CommandResultFrame,
  type OutputHeader,
} from '../protocol/agent-frames.js';
import { outputFrameInScratch } from './output-frame.js';
import type { Outbox } from '../runtime/outbox.js';
import type { ChunkHeader, CommandOutputSink, OutputSinkOwner } from './output-sink.js';
const EMPTY = new Uint8Array(0);
const STREAMS: readonly OutputStreamName[] = ['stdout', 'stderr', 'log'];
const kMaxLimit = 1000;

function streamName(code: number): OutputStreamName {
  return code === OutputStream.stderr ? 'stderr' : code === OutputStream.log ? 'log' : 'stdout';
}

function args(a: unknown): Record<string, unknown> {
  if (typeof a !== 'object' || a === null) throw new SvcError('request.invalid', 'arguments must be an object');
  return a as Record<string, unknown>;
}

function commandIdArg(a: Record<string, unknown>): string {
  const id = a['commandId'];
  if (typeof id !== 'string' || id === '') throw new SvcError('request.invalid', 'commandId must be a non-empty string');
  return id;
}

function limitArg(a: Record<string, unknown>): number {
  const n = Number(a['limit']);
  if (!Number.isInteger(n) || n < 1 || n > kMaxLimit) throw new SvcError('request.invalid', `limit must be 1-${kMaxLimit}`);
  return n;
}

function streamArg(a: Record<string, unknown>): OutputStreamName | undefined {
  const s = a['stream'];
  if (s === undefined) return undefined;
  if (!STREAMS.includes(s as OutputStreamName)) throw new SvcError('request.invalid', 'stream must be stdout, stderr or log');
  return s as OutputStreamName;
}

function emptyPage(): ReplayBytes {
  return { bytes: EMPTY, events: 0, chunks: 0, last: null, more: false };
}

export class ReplayOutputSink implements CommandOutputSink {
  readonly #outbox: Outbox;
  readonly #raw: CommandOutputSink;
  readonly #shard: ShardReplay;
  readonly #commands = new Map<string, CommandReplay>();
  readonly #chats = new Map<string, Map<string, ChatProjection>>();
  /** commandKey per command id (one string per command instead of one per chunk). */
  readonly #keys = new Map<string, string>();
  /** The header of the chunk being sent (reused: nothing is allocated per chunk for it). */
  readonly #frame: Required<OutputHeader> = { stream: 0, eof: false, seq: 0, offset: 0, timestampMs: 0, clock: 0, carry: EMPTY };
  #owner: OutputSinkOwner = { agentId: '', now: Date.now, commandState: () => 'unknown' };
  #clock = new CursorClock();
  #stopped = false;

  /** @param raw receives every gap and result first (their raw frames for Exec and listeners). */
  constructor(outbox: Outbox, raw: CommandOutputSink, shard: ShardReplay = shardReplay) {
    this.#outbox = outbox;
    this.#raw = raw;
    this.#shard = shard;
  }

  bind(owner: OutputSinkOwner): void {
    this.#owner = owner;
    this.#clock = new CursorClock(() => owner.now());
  }

  started(commandId: string): void {
    this.#outbox.emit(PublishFrameKind.kFrameOutputKnown, commandKey(this.#owner.agentId, commandId), EMPTY, true);
  }

  output(commandId: string, header: ChunkHeader, data: Uint8Array): void {
    const key = this.#keyOf(commandId);
    if (this.#stopped) {
      this.#outbox.emit(AgentFrameKind.kFrameCommandOutput, key, outputFrameInScratch(header, data));
      return;
    }
    const clock = this.#clock.next();
    const stream = streamName(header.stream);
    const carry = this.#replayFor(commandId).chunk(
      { seq: header.seq, stream, offset: header.offset, timestampMs: header.timestampMs, eof: header.eof, bytes: data },
      clock,
    );
    // clock 0: not stored, so not published (the ring was released or already had the seq).
    const frame = this.#frame;
    frame.stream = header.stream;
    frame.eof = header.eof;
    frame.seq = header.seq;
    frame.offset = header.offset;
    frame.timestampMs = header.timestampMs;
    frame.clock = carry === null ? 0 : clock;
    frame.carry = carry ?? EMPTY;
    this.#outbox.emit(AgentFrameKind.kFrameCommandOutput, key, outputFrameInScratch(frame, data));
    if (stream === 'stdout') {
      const chats = this.#chats.get(commandId);
      if (chats !== undefined) for (const chat of chats.values()) this.#publishChat(chat, chat.push(data));
    }
  }

  gap(frame: CommandGapFrame): void {
    this.#raw.gap(frame);
    if (this.#stopped) return;
    const payload = this.#replayFor(frame.command_id).gap(
      { firstSeq: frame.first_seq, lastSeq: frame.last_seq, lostBytes: frame.lost_bytes, timestampMs: this.#owner.now() },
      this.#clock.next(),
    );
    if (payload === null) return;
    this.#shard.gaps++;
    this.#outbox.emit(PublishFrameKind.kFrameOutputPublish, commandKey(this.#owner.agentId, frame.command_id), payload, true);
  }

  result(frame: CommandResultFrame): void {
    this.#raw.result(frame);
    if (this.#stopped) return;
    const commandId = frame.command_id;
    const replay = this.#replayFor(commandId);
    const nowMs = this.#owner.now();
    this.#outbox.emit(
      PublishFrameKind.kFrameOutputPublish,
      commandKey(this.#owner.agentId, commandId),
      replay.end(frame.exit_code, nowMs),
      true,
    );
    const chats = this.#chats.get(commandId);
    if (chats !== undefined) for (const chat of chats.values()) this.#publishChat(chat, chat.end());
    this.#shard.releaseLater(Date.now(), () => this.#release(commandId, replay));
  }

  call(method: string, a: unknown): unknown {
    switch (method) {
      case OutputCall.kReplay:
        return this.#replay(args(a));
      case OutputCall.kReplayAgent:
        return this.#replayAgent(args(a));
      case OutputCall.kChat:
        return this.#chat(args(a));
      case OutputCall.kStats:
        return this.stats();
      default:
        throw new SvcError('request.invalid', `agent actor has no method ${method}`);
    }
  }

  stats(): OutputStats {
    let ringBytes = 0;
    let chats = 0;
    for (const r of this.#commands.values()) ringBytes += r.ring.bytes;
    for (const m of this.#chats.values()) chats += m.size;
    return { commands: this.#commands.size, ringBytes, chatProjections: chats };
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const [id, r] of [...this.#commands]) this.#release(id, r);
  }

  #replayFor(commandId: string): CommandReplay {
    let r = this.#commands.get(commandId);
    if (r === undefined) {
      const s = this.#shard.settings;
      r = new CommandReplay(this.#owner.agentId, commandId, { ringBytes: s.ringBytes, budget: this.#shard.budget });
      this.#commands.set(commandId, r);
    }
    return r;
  }

  #stateOf(commandId: string, r: CommandReplay | undefined): CommandOutputState {
    if (r !== undefined) return r.finished ? 'finished' : 'running';
    const known = this.#owner.commandState(commandId);
    return known === 'finished' ? 'expired' : known;
  }

  #replay(a: Record<string, unknown>): ReplayAnswer {
    const commandId = commandIdArg(a);
    const mode = a['mode'];
    if (mode !== 'none' && mode !== 'tail' && mode !== 'after') throw new SvcError('request.invalid', 'mode must be none, tail or after');
    const limit = limitArg(a);
    const stream = streamArg(a);
    const r = this.#commands.get(commandId);
    const clock = this.#clock.last;
    const state = this.#stateOf(commandId, r);
    let page = emptyPage();
    if (r !== undefined && mode !== 'none') {
      const afterSeq = mode === 'after' ? Math.max(0, Math.trunc(Number(a['afterSeq']) || 0)) : undefined;
      page = r.replay({ afterSeq, limit, stream });
    }
    const answer: ReplayAnswer = { state, ...page, clock };
    if (r?.finished === true && !page.more) answer.end = r.endFrame();
    return answer;
  }

  #replayAgent(a: Record<string, unknown>): ReplayAnswer {
    const after = a['after'] as { clock?: unknown; seq?: unknown } | undefined;
    const cursor = parseOutputCursor(`${String(after?.clock)}-${String(after?.seq)}`);
    if (cursor === null) throw new SvcError('request.invalid', 'after must be an output cursor {clock, seq}');
    const clock = this.#clock.last;
    return { state: 'running', ...agentReplay(this.#commands.values(), cursor, limitArg(a), streamArg(a)), clock };
  }

  #chat(a: Record<string, unknown>): ChatAnswer {
    const commandId = commandIdArg(a);
    const sessionId = a['sessionId'];
    if (typeof sessionId !== 'string' || sessionId === '') throw new SvcError('request.invalid', 'sessionId must be a non-empty string');
    const afterSeq = a['afterSeq'] === null ? null : Math.max(0, Math.trunc(Number(a['afterSeq']) || 0));
    let r = this.#commands.get(commandId);
    const state = this.#stateOf(commandId, r);
    if (state === 'expired' || state === 'unknown') return { state, bytes: EMPTY, events: 0, lastSeq: 0, terminated: true };
    r ??= this.#replayFor(commandId);
    let chats = this.#chats.get(commandId);
    if (chats === undefined) {
      chats = new Map<string, ChatProjection>();
      this.#chats.set(commandId, chats);
    }
    let chat = chats.get(sessionId);
    if (chat === undefined) {
      chat = new ChatProjection({ sessionId, commandId, maxBytes: this.#shard.settings.chatBytes });
      // Catch up on the buffered stdout; these events reach the joiner through the answer.
      for (const c of r.rawChunks('stdout')) chat.push(c.bytes);
      if (r.finished) chat.end();
      chats.set(sessionId, chat);
      this.#shard.chatProjections++;
    }
    const join = chat.join(afterSeq ?? chat.seq);
    return { state, ...join };
  }

  #publishChat(chat: ChatProjection, frames: ReturnType<ChatProjection['push']>): void {
    if (frames.length === 0) return;
    const topic = chatTopic(chat.commandId, chat.sessionId);
    for (const f of frames)
      this.#outbox.emit(PublishFrameKind.kFrameChatPublish, topic, encodeChatPublish(f.terminal, f.id, f.frame), true);
  }

  #keyOf(commandId: string): string {
    let key = this.#keys.get(commandId);
    if (key === undefined) {
      key = commandKey(this.#owner.agentId, commandId);
      // Commands without output state (released, stopped) are few; the bound is for a misbehaving agent.
      if (this.#keys.size >= 4096) this.#keys.clear();
      this.#keys.set(commandId, key);
    }
    return key;
  }

  #release(commandId: string, replay: CommandReplay): void {
    if (this.#commands.get(commandId) !== replay) return;
    this.#commands.delete(commandId);
    this.#keys.delete(commandId);
    replay.ring.release();
    const chats = this.#chats.get(commandId);
    if (chats !== undefined) {
      this.#shard.chatProjections -= chats.size;
      this.#chats.delete(commandId);
    }
    this.#shard.released++;
    this.#outbox.emit(PublishFrameKind.kFrameOutputForget, commandKey(this.#owner.agentId, commandId), EMPTY, true);
  }
}
