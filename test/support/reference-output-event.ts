/**
 * Tests' reference for the per-chunk facts shared by every encoding of a chunk (SSE agent_output,
 * WS output): cursor, base64 and the decoded text, computed once (used by reference-encode.ts;
 * the server's encoder is actors/protocol/chunk-events.ts with actors/protocol/live-text.ts). The text is decoded per (command, stream) by
 * stream-text.ts rules: a character split across chunks appears whole in the chunk where it ends.
 */
import { formatOutputCursor } from '../../actors/protocol/output-cursor.js';
import type { OutputStreamName, ReplayChunk } from '../../actors/replay/replay-ring.js';
import { StreamTextDecoder } from '../../actors/protocol/stream-text.js';

/** The per-chunk facts every encoding of one chunk shares. */
export interface OutputEvent {
  readonly agentId: string;
  readonly commandId: string;
  readonly stream: OutputStreamName;
  readonly timestampMs: number;
  readonly seq: number;
  readonly clock: number;
  /** `<clock>-<seq>`. */
  readonly cursor: string;
  /** The chunk's exact bytes, base64. */
  readonly dataBase64: string;
  /** Decoded text (split characters appear whole in the chunk where they end). */
  readonly text: string;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

interface TextState {
  decoder: StreamTextDecoder;
  nextOffset: number;
}

/**
 * Live encoding of one command's chunks, in arrival order (one per command, in the actor that
 * owns the ring). Call {@link next} once for every chunk the ring stored.
 */
export class LiveOutputEncoder {
  readonly agentId: string;
  readonly commandId: string;
  readonly #streams = new Map<OutputStreamName, TextState>();

  constructor(agentId: string, commandId: string) {
    this.agentId = agentId;
    this.commandId = commandId;
  }

  /** The shared facts of the next chunk. Bytes missing before it (offset jump) restart the decoder. */
  next(chunk: Omit<ReplayChunk, 'carry'>): OutputEvent {
    let st = this.#streams.get(chunk.stream);
    if (st === undefined) {
      st = { decoder: new StreamTextDecoder(), nextOffset: 0 };
      this.#streams.set(chunk.stream, st);
    }
    if (st.nextOffset !== chunk.offset) st.decoder.reset();
    return toEvent(this.agentId, this.commandId, chunk, st);
  }
}

function toEvent(agentId: string, commandId: string, chunk: Omit<ReplayChunk, 'carry'>, st: TextState): OutputEvent {
  const text = st.decoder.decode(chunk.bytes, chunk.eof);
  st.nextOffset = chunk.offset + chunk.bytes.byteLength;
  return {
    agentId,
    commandId,
    stream: chunk.stream,
    timestampMs: chunk.timestampMs,
    seq: chunk.seq,
    clock: chunk.clock,
    cursor: formatOutputCursor(chunk.clock, chunk.seq),
    dataBase64: base64(chunk.bytes),
    text,
  };
}
