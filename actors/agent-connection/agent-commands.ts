/**
 * The command half of an agent actor: dispatch (control calls from the main thread) and what
 * comes back (chunks, gaps, results), de-duplicated by seq through the CommandTracker and handed
 * to the CommandOutputSink in order. Also the command events (agent.command.*, agent.pty.*) and
 * the command metrics (svc_commands_total, svc_commands_by_result, latency).
 */
import type { v1 } from '../../proto/index.js';
import { SvcError } from '../../src/core/errors.js';
import { classifyResult, clip, nonNegativeInt } from './agent-view.js';
import type { CommandOutputSink } from './output-sink.js';
import type { CommandTracker } from './command-tracker.js';
import type { AgentMetricFrame, RejectReason, RunCommandArgs } from '../protocol/agent-frames.js';

/** What AgentCommands needs from its actor. */
export interface CommandHost {
  readonly liveConnId: number | null;
  sendToAgent(message: v1.IManagementMessage): boolean;
  event(eventType: string, details: Record<string, unknown>): void;
  metric(frame: AgentMetricFrame): void;
  reject(reason: RejectReason, fields?: object): void;
}

/** CommandResult.timed_out_by when the server gave up on a silent agent (expireCommand). */
export const TIMED_OUT_BY_SERVER = 'server_deadline';

const EMPTY = new Uint8Array(0);
const COMMAND_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function record(args: unknown): Record<string, unknown> {
  if (typeof args !== 'object' || args === null) throw new SvcError('request.invalid', 'arguments must be an object');
  return args as Record<string, unknown>;
}

function commandIdOf(a: Record<string, unknown>): string {
  const id = a['commandId'];
  if (typeof id !== 'string' || !COMMAND_ID_RE.test(id))
    throw new SvcError('request.invalid', 'commandId must be 1-128 of [A-Za-z0-9._:-]');
  return id;
}

export class AgentCommands {
  readonly #agentId: string;
  readonly #now: () => number;
  readonly #tracker: CommandTracker;
  readonly #sink: CommandOutputSink;
  readonly #host: CommandHost;
  #duplicates = 0;

  constructor(opts: { agentId: string; now: () => number; tracker: CommandTracker; sink: CommandOutputSink; host: CommandHost }) {
    this.#agentId = opts.agentId;
    this.#now = opts.now;
    this.#tracker = opts.tracker;
    this.#sink = opts.sink;
    this.#host = opts.host;
    const tracker = opts.tracker;
    opts.sink.bind?.({
      agentId: opts.agentId,
      now: opts.now,
      commandState: (id) => {
        const rec = tracker.get(id);
        return rec === undefined ? 'unknown' : rec.finished ? 'finished' : 'running';
      },
    });
  }

  /** The actor stops: the sink releases what it holds (replay rings). */
  stop(): void {
    this.#sink.stop?.();
  }

  /** Resent chunks and results dropped because the seq was already held. */
  get duplicates(): number {
    return this.#duplicates;
  }

  /** Control calls. Throws SvcError request.invalid for an unknown method or bad arguments. */
  call(method: string, args: unknown): unknown {
    switch (method) {
      case 'runCommand':
        return this.#run(args as RunCommandArgs);
      case 'signalCommand': {
        const a = record(args);
        const signalNumber = Number(a['signal']);
        if (!Number.isInteger(signalNumber) || signalNumber < 1 || signalNumber > 64)
          throw new SvcError('request.invalid', 'signal must be 1-64');
        return this.#send({ ptyControl: { commandId: commandIdOf(a), signal: { signalNumber } } });
      }
      case 'sendStdin': {
        const a = record(args);
        const data = a['data'] instanceof Uint8Array ? a['data'] : EMPTY;
        return this.#send({ stdin: { commandId: commandIdOf(a), data, eof: a['eof'] === true } });
      }
      case 'resizePty': {
        const a = record(args);
        return this.#send({
          ptyControl: {
            commandId: commandIdOf(a),
            resize: { cols: nonNegativeInt(a['cols'] as number), rows: nonNegativeInt(a['rows'] as number) },
          },
        });
      }
      case 'expireCommand': {
        const a = record(args);
        return this.#expire(commandIdOf(a), typeof a['reason'] === 'string' ? a['reason'] : 'the server stopped waiting for a result');
      }
      case 'shutdownAgent': {
        const a = record(args);
        const reason = typeof a['reason'] === 'string' ? a['reason'] : '';
        return this.#send({ shutdown: { reason: clip(reason), gracePeriodSeconds: nonNegativeInt(a['graceSeconds'] as number) } });
      }
      default:
        // output.* calls (replays, chat) are the sink's: it holds the commands' replay state.
        if (method.startsWith('output.') && this.#sink.call !== undefined) return this.#sink.call(method, args);
        throw new SvcError('request.invalid', `agent actor has no method ${method}`);
    }
  }

  onChunk(stream: number, chunk: v1.IOutputChunk): void {
    const commandId = chunk.streamId ?? '';
    if (commandId === '') return this.#host.reject('invalid_field', { field: 'stream_id' });
    const v = this.#tracker.acceptChunk(commandId, nonNegativeInt(chunk.seq));
    if (v.kind === 'duplicate') {
      this.#duplicates++;
      return;
    }
    if (v.missing !== null) this.#gap(commandId, v.missing.first, v.missing.last, 0, 'output missing from the stream');
    const header = {
      stream,
      eof: chunk.eof === true,
      seq: v.seq,
      offset: nonNegativeInt(chunk.offset),
      timestampMs: nonNegativeInt(chunk.timestampMs),
    };
    this.#sink.output(commandId, header, chunk.data ?? EMPTY);
  }

  onGap(gap: v1.IOutputGap): void {
    const commandId = gap.commandId ?? '';
    if (commandId === '') return this.#host.reject('invalid_field', { field: 'command_id' });
    const v = this.#tracker.acceptGap(commandId, nonNegativeInt(gap.firstSeq), nonNegativeInt(gap.lastSeq));
    if (v.kind === 'duplicate') {
      this.#duplicates++;
      return;
    }
    this.#gap(commandId, v.range.first, v.range.last, nonNegativeInt(gap.lostBytes), clip(gap.reason) || 'dropped by the agent');
  }

  onResult(r: v1.ICommandResult): void {
    const commandId = r.commandId ?? '';
    if (commandId === '') return this.#host.reject('invalid_field', { field: 'command_id' });
    const v = this.#tracker.finish(commandId, nonNegativeInt(r.lastSeq));
    if (v.kind === 'duplicate') {
      this.#duplicates++;
      return;
    }
    if (v.missing !== null) this.#gap(commandId, v.missing.first, v.missing.last, 0, 'output missing before the result');
    const exitCode = Number(r.exitCode ?? 0);
    const timedOutBy = clip(r.timedOutBy);
    const durationMs = nonNegativeInt(r.durationMs);
    this.#finished(v.record, { exitCode, error: clip(r.error, 4096), durationMs, timedOutBy, lastSeq: v.record.lastSeq });
  }

  #run(a: RunCommandArgs): { commandId: string } {
    const commandId = commandIdOf(record(a));
    if (typeof a.command !== 'string' || a.command === '') throw new SvcError('request.invalid', 'command must be a non-empty string');
    if (this.#host.liveConnId === null) throw new SvcError('server.unavailable', `agent ${this.#agentId} is not connected`);
    const pty = a.allocatePty === true;
    const rec = this.#tracker.start(commandId, { source: a.source ?? 'server', dispatchedAtMs: this.#now(), pty });
    if (rec === null) throw new SvcError('request.invalid', `command ${commandId} already exists on agent ${this.#agentId}`);
    this.#host.sendToAgent({
      command: {
        commandId,
        command: a.command,
        args: a.args ?? [],
        workingDir: a.workingDir ?? '',
        env: a.env ?? {},
        timeoutSeconds: a.timeoutSeconds ?? 0,
        captureOutput: true,
        runAs: a.runAs ?? '',
        allocatePty: pty,
        ptyCols: a.ptyCols ?? 0,
        ptyRows: a.ptyRows ?? 0,
        ptyTerm: a.ptyTerm ?? '',
        sessionId: a.sessionId ?? '',
        sessionName: a.sessionName ?? '',
      },
    });
    this.#sink.started?.(commandId);
    this.#host.metric({ type: 'command_started' });
    this.#host.event('agent.command.started', {
      command_id: commandId,
      command: clip(a.command),
      source: rec.source,
      pty,
      timeout_seconds: a.timeoutSeconds ?? 0,
    });
    // A session's PTY commands (sessionId set) are announced by the sessions service, once per
    // session with its command and backend; here only PTY commands of no session.
    if (pty && !a.sessionId)
      this.#host.event('agent.pty.created', {
        command_id: commandId,
        session_id: a.sessionId ?? '',
        session_name: a.sessionName ?? '',
        cols: a.ptyCols ?? 80,
        rows: a.ptyRows ?? 24,
      });
    return { commandId };
  }

  #send(message: v1.IManagementMessage): boolean {
    if (!this.#host.sendToAgent(message)) throw new SvcError('server.unavailable', `agent ${this.#agentId} is not connected`);
    return true;
  }

  /** The server gives up on a command: it ends as a timeout now, and a late real result is a duplicate. */
  #expire(commandId: string, reason: string): boolean {
    const rec = this.#tracker.get(commandId);
    if (rec === undefined || rec.finished) return false;
    const v = this.#tracker.finish(commandId, rec.lastSeq);
    if (v.kind === 'duplicate') return false;
    // Best effort: the process group must not outlive the command the server abandoned.
    this.#host.sendToAgent({ ptyControl: { commandId, signal: { signalNumber: 9 } } });
    const durationMs = rec.dispatchedAtMs === null ? 0 : this.#now() - rec.dispatchedAtMs;
    this.#finished(rec, { exitCode: -1, error: reason, durationMs, timedOutBy: TIMED_OUT_BY_SERVER, lastSeq: rec.lastSeq });
    return true;
  }

  #finished(
    rec: { commandId: string; dispatchedAtMs: number | null; pty: boolean },
    r: { exitCode: number; error: string; durationMs: number; timedOutBy: string; lastSeq: number },
  ): void {
    const result = classifyResult(r);
    // Metrics count commands this server dispatched; an adopted command (dispatched before a
    // server restart) was never counted as started.
    if (rec.dispatchedAtMs !== null) {
      this.#host.metric({ type: 'command_finished', result, latency_seconds: Math.max(0, this.#now() - rec.dispatchedAtMs) / 1000 });
    }
    this.#sink.result({
      agent_id: this.#agentId,
      command_id: rec.commandId,
      exit_code: r.exitCode,
      error: r.error,
      duration_ms: r.durationMs,
      success: r.exitCode === 0 && r.timedOutBy === '',
      timed_out_by: r.timedOutBy,
      last_seq: r.lastSeq,
      result,
    });
    this.#host.event('agent.command.completed', {
      command_id: rec.commandId,
      exit_code: r.exitCode,
      duration_ms: r.durationMs,
      result,
      timed_out_by: r.timedOutBy,
      error: r.error,
    });
    if (rec.pty) this.#host.event('agent.pty.closed', { command_id: rec.commandId, exit_code: r.exitCode });
  }

  #gap(commandId: string, first: number, last: number, lostBytes: number, reason: string): void {
    this.#sink.gap({ agent_id: this.#agentId, command_id: commandId, first_seq: first, last_seq: last, lost_bytes: lostBytes, reason });
  }
}
