/**
 * The ordering rules of pty-ws.v1 as sandboxd states them (src/sessions/binding/README.md, "How
 * the session hub speaks it"), checked on every frame a conformance client receives:
 *
 * - the first frame is `binding_hello` with sequence 0; nothing follows `binding_goodbye`;
 * - the sequences one connection sees never decrease;
 * - connection-local frames (RoleAssigned, the Keyframe of a join or a request, or the PTY Error
 *   KEYFRAME_UNAVAILABLE in its place, the binding's Error) repeat the connection's position: the sequence of the last session frame it was sent
 *   (the first RoleAssigned sets it: the newest frame, or `replay_from`);
 * - session frames (Output, also as PW1O, Resize, MembershipChanged, Closed, cadence Keyframes,
 *   PTY Errors) advance the position by exactly 1, except that after a connection-local Keyframe
 *   the frames up to its `anchor_sequence` are skipped (they are in the snapshot);
 * - no session frame before the join's RoleAssigned, no Output or Resize after Closed;
 * - across the connections of one session, a sequence names one frame: same kind, payload, id and
 *   ts (a PW1O message and a JSON Output of the same sequence carry the same bytes).
 *
 * A broken rule is recorded, not thrown, so a test can finish its scenario and report every
 * violation with the frames around it.
 */
import { createHash } from 'node:crypto';
import type { ServerFrame, SessionFramePayload } from '../../src/sessions/binding/frames.js';

/** One message a conformance client received. */
export interface SeenFrame {
  /** Position on the connection, from 0. */
  readonly index: number;
  /** When it arrived (this process's clock). */
  readonly atMs: number;
  /** The text frame's `op`; `PW1O` for a binary output message. */
  readonly op: string;
  /** The `kind` of a pty.session_frame (`Output` for PW1O). */
  readonly kind: string | undefined;
  readonly sequence: number | undefined;
  /** The parsed text frame. */
  readonly json: ServerFrame | undefined;
  /** Output bytes (JSON `data` decoded, or the PW1O body). */
  readonly bytes: Buffer | undefined;
  /** Set by {@link StreamRules}: not part of the session stream (never replayed). */
  local: boolean;
}

/** A session frame's payload (throws for another frame: a test bug). */
export function payloadOf<K extends SessionFramePayload['kind']>(f: SeenFrame, kind: K): Extract<SessionFramePayload, { kind: K }> {
  const p = f.json?.op === 'pty.session_frame' ? f.json.payload : undefined;
  if (p?.kind !== kind) throw new Error(`frame #${f.index} is ${describeFrame(f)}, not ${kind}`);
  return p as Extract<SessionFramePayload, { kind: K }>;
}

/** A PTY Error KEYFRAME_UNAVAILABLE: what fills a keyframe's place when no snapshot came. */
export function isKeyframeUnavailable(f: SeenFrame): boolean {
  return f.json?.op === 'pty.session_frame' && f.json.payload.kind === 'Error' && f.json.payload.code === 'KEYFRAME_UNAVAILABLE';
}

/** Short text of a frame for messages: `Output#12(34 B)`, `Error:PERMISSION_DENIED@7`. */
export function describeFrame(f: SeenFrame): string {
  const seq = f.sequence === undefined ? '' : `#${f.sequence}`;
  if (f.op === 'PW1O') return `PW1O${seq}(${f.bytes?.byteLength ?? 0} B)`;
  if (f.op === 'Error' && f.json?.op === 'Error') return `Error:${f.json.payload.code}${seq}`;
  if (f.kind === undefined) return `${f.op}${seq}`;
  const p = f.json?.op === 'pty.session_frame' ? f.json.payload : undefined;
  const extra =
    p?.kind === 'Output'
      ? `(${f.bytes?.byteLength ?? 0} B)`
      : p?.kind === 'Keyframe'
        ? `(anchor ${p.anchor_sequence})`
        : p?.kind === 'Error'
          ? `(${p.code})`
          : p?.kind === 'RoleAssigned'
            ? `(${p.role})`
            : '';
  return `${f.kind}${seq}${extra}${f.local && f.kind === 'Keyframe' ? '[local]' : ''}`;
}

/** The frames each sequence of one session named, shared by that session's clients. */
export class SessionLedger {
  readonly #bySequence = new Map<number, { print: string; id: string | undefined; ts: string | undefined; who: string }>();

  /** Records `f` as `who` saw it; returns a violation when another connection saw a different frame there. */
  record(f: SeenFrame, who: string): string | undefined {
    const seq = f.sequence!;
    // Output by digest: a scenario streams megabytes through several clients.
    const print =
      f.kind === 'Output'
        ? `Output ${f.json?.op === 'pty.session_frame' && f.json.payload.kind === 'Output' ? f.json.payload.stream : 'stdout'} ${f.bytes?.byteLength ?? 0} B sha1 ${createHash(
            'sha1',
          )
            .update(f.bytes ?? Buffer.alloc(0))
            .digest('hex')}`
        : JSON.stringify(f.json?.payload);
    const id = f.json?.id;
    const ts = f.json?.ts;
    const prior = this.#bySequence.get(seq);
    if (prior === undefined) {
      this.#bySequence.set(seq, { print, id, ts, who });
      return undefined;
    }
    if (prior.print !== print)
      return `sequence ${seq}: ${who} got ${describeFrame(f)} ${print.slice(0, 120)}, ${prior.who} got ${prior.print.slice(0, 120)}`;
    if (id !== undefined && prior.id !== undefined && (id !== prior.id || ts !== prior.ts))
      return `sequence ${seq}: ${who} got id ${id} ts ${ts}, ${prior.who} got id ${prior.id} ts ${prior.ts} (one frame, one id and ts)`;
    if (prior.id === undefined && id !== undefined) this.#bySequence.set(seq, { print, id, ts, who });
    return undefined;
  }
}

/** The rules of one connection; feed every frame in arrival order. */
export class StreamRules {
  readonly violations: string[] = [];
  readonly #ledger: SessionLedger;
  readonly #who: string;
  #highest = -1;
  /** Sequence of the last session frame sent to this connection (undefined before the join). */
  #position: number | undefined;
  /** Anchor of the last connection-local Keyframe: frames up to it are skipped. */
  #floor = -1;
  #closedSeen = false;
  #goodbyeSeen = false;

  constructor(ledger: SessionLedger, who: string) {
    this.#ledger = ledger;
    this.#who = who;
  }

  get position(): number | undefined {
    return this.#position;
  }

  /** The highest sequence seen (-1 before any). */
  get highest(): number {
    return this.#highest;
  }

  accept(f: SeenFrame): void {
    const fail = (msg: string): void => void this.violations.push(`${this.#who} frame #${f.index} ${describeFrame(f)}: ${msg}`);
    if (this.#goodbyeSeen) fail('arrived after binding_goodbye');
    if (f.index === 0 && f.op !== 'binding_hello') fail('the first frame is not binding_hello');
    if (f.op === 'binding_hello') {
      f.local = true;
      if (f.index !== 0) fail('binding_hello is not the first frame');
      if (f.sequence !== 0) fail('binding_hello carries a sequence other than 0');
      return;
    }
    if (f.sequence !== undefined) {
      if (f.sequence < this.#highest) fail(`sequence decreased (after ${this.#highest})`);
      this.#highest = Math.max(this.#highest, f.sequence);
    }
    if (f.op === 'binding_goodbye' || f.op === 'Error' || f.op === 'pong' || f.op === 'ping') {
      f.local = true;
      if (f.op === 'binding_goodbye') this.#goodbyeSeen = true;
      if (f.sequence !== undefined && this.#position !== undefined && f.sequence !== this.#position)
        fail(`a connection-local frame carries ${f.sequence}, not the connection's position ${this.#position}`);
      return;
    }
    if (f.op !== 'pty.session_frame' && f.op !== 'PW1O') return fail('unknown op');
    if (f.sequence === undefined) return fail('a session frame without sequence');
    if (f.kind === 'RoleAssigned') {
      f.local = true;
      if (this.#position === undefined) this.#position = f.sequence;
      else if (f.sequence !== this.#position) fail(`RoleAssigned carries ${f.sequence}, not the connection's position ${this.#position}`);
      return;
    }
    if (f.kind === 'Keyframe' && this.#position !== undefined && f.sequence === this.#position) {
      f.local = true;
      this.#floor = Math.max(this.#floor, payloadOf(f, 'Keyframe').anchor_sequence);
      return;
    }
    if (isKeyframeUnavailable(f) && this.#position !== undefined && f.sequence === this.#position) {
      // The stand-in for a join's or a request's Keyframe the snapshot could not make in time.
      f.local = true;
      return;
    }
    if (this.#position === undefined) return fail('a session frame before the join was answered (RoleAssigned)');
    const expected = Math.max(this.#position, this.#floor) + 1;
    if (f.sequence !== expected)
      fail(`expected sequence ${expected} (position ${this.#position}, keyframe anchor ${this.#floor}): a gap or a repeat`);
    this.#position = f.sequence;
    if (this.#closedSeen && (f.kind === 'Output' || f.kind === 'Resize')) fail('Output/Resize after Closed');
    if (f.kind === 'Closed') this.#closedSeen = true;
    const clash = this.#ledger.record(f, this.#who);
    if (clash !== undefined) this.violations.push(clash);
  }
}
