/**
 * The pty-ws.v1 dialect of a session hub (session-dialect.ts): session events as the published
 * binding's frames (binding/encode.ts), as JSON text or, on `pty-ws.v1.binary`, with Output as
 * PW1O binary messages (binding/binary.ts). binding/README.md says how the hub uses them.
 */
import { encodeBinaryOutput } from './binding/binary.js';
import { LIMITS, PTY_EXTENSIONS_URI, SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON, SUPPORTED_OPERATIONS } from './binding/codes.js';
import {
  closedFrame,
  errorFrame,
  goodbyeFrame,
  helloFrame,
  keyframeFrame,
  membershipChangedFrame,
  outputFrame,
  resizeFrame,
  roleAssignedFrame,
  sessionErrorFrame,
  toText,
} from './binding/encode.js';
import type { PtyExtensionParams, SessionFrame } from './binding/frames.js';
import type { SessionDialect, SessionEvent } from './session-dialect.js';

/** pty-extensions params as sandboxd applies them (binding_hello extension_params). */
export interface BindingParams {
  readonly keyframeIntervalSeconds: number;
  readonly keyframeIntervalFrames: number;
  readonly replayFrames: number;
  readonly maxObservers: number;
  /** A2A core ops served on this binding (binding/a2a.ts), listed in supported_operations. */
  readonly a2aOperations?: readonly string[];
}

const SERVER_INFO = { name: 'sandboxd', version: '0.1.0' };

function sessionEventFrame(e: SessionEvent): SessionFrame {
  const stamp = { id: e.id, ts: e.ts };
  switch (e.kind) {
    case 'Output':
      return outputFrame(e.sequence, e.data, e.stream, stamp);
    case 'Resize':
      return resizeFrame(e.sequence, e.cols, e.rows, stamp);
    case 'MembershipChanged':
      return membershipChangedFrame(e.sequence, [...e.controllers], [...e.observers], stamp);
    case 'Keyframe':
      return keyframeFrame(
        e.sequence,
        { snapshot: e.snapshot, cols: e.cols, rows: e.rows, anchorSequence: e.anchorSequence, format: e.format },
        stamp,
      );
    case 'Closed':
      return closedFrame(e.sequence, e.exitCode, e.reason, e.detail, stamp);
    case 'Error':
      return sessionErrorFrame(e.sequence, e.code, e.message, stamp);
  }
}

/** The dialect of one negotiated subprotocol (`binary`: Output as PW1O). */
export function bindingDialect(binary: boolean, params: BindingParams): SessionDialect {
  return {
    key: binary ? SUBPROTOCOL_BINARY : SUBPROTOCOL_JSON,
    hello(info) {
      const extension: PtyExtensionParams = {
        max_controllers: 1,
        max_observers: params.maxObservers,
        keyframe_interval_seconds: params.keyframeIntervalSeconds,
        keyframe_interval_frames: params.keyframeIntervalFrames,
        replay_buffer_frames: params.replayFrames,
        replay_buffer_retention_seconds: 1,
        default_cols: info.terminalSize.cols,
        default_rows: info.terminalSize.rows,
      };
      return toText(
        helloFrame({
          supported_operations: [...SUPPORTED_OPERATIONS, ...(params.a2aOperations ?? [])],
          activated_extensions: [PTY_EXTENSIONS_URI],
          session: {
            session_id: info.sessionId,
            current_sequence: info.currentSequence,
            ...(info.agentId !== undefined && { agent_id: info.agentId }),
            ...(info.sessionBackend !== undefined && { session_backend: info.sessionBackend as never }),
            ...(info.sessionClass !== undefined && { session_class: info.sessionClass as never }),
            terminal_size: { cols: info.terminalSize.cols, rows: info.terminalSize.rows },
          },
          session_host: info.host,
          payload_modes: {
            subprotocol: binary ? SUBPROTOCOL_BINARY : SUBPROTOCOL_JSON,
            binary,
            json_subprotocol: SUBPROTOCOL_JSON,
            binary_subprotocol: SUBPROTOCOL_BINARY,
            max_input_bytes: LIMITS.maxInputBytes,
            max_frame_bytes: LIMITS.maxClientFrameBytes,
          },
          extension_params: { [PTY_EXTENSIONS_URI]: extension },
          server_info: SERVER_INFO,
        }),
      );
    },
    event(e) {
      if (binary && e.kind === 'Output') return encodeBinaryOutput(e.sequence, e.data, e.stream);
      return toText(sessionEventFrame(e));
    },
    role(r, position, requestId) {
      return toText(
        roleAssignedFrame(
          position,
          { role: r.role, clientId: r.clientId, downgraded: r.downgraded, ...(r.reason !== undefined && { reason: r.reason }) },
          requestId === undefined ? undefined : { id: requestId },
        ),
      );
    },
    keyframe(e, position, requestId) {
      return toText(sessionEventFrame({ ...e, sequence: position, ...(requestId !== undefined && { id: requestId }) }));
    },
    error(code, message, position, requestId) {
      return toText(errorFrame({ code, message: message.slice(0, LIMITS.maxMessageChars), requestId, sequence: position }));
    },
    status() {
      // The binding has no frame for "agent away": a Closed ends the session, and a detached one
      // simply goes quiet until its agent is back (the REST list shows liveness).
      return undefined;
    },
    goodbye(reason, detail) {
      return toText(goodbyeFrame(reason, detail));
    },
  };
}
