/**
 * What the sessions component needs from the agents server, as small interfaces the wiring
 * implements with the gRPC Connect stream (ManagementMessage) and the agent registry. Nothing
 * here knows about gRPC.
 */

/** A registered agent as sessions see it. */
export interface SessionAgentInfo {
  readonly agentId: string;
  /** AgentRegistration.instance_id (the SPIFFE id's last segment); the agent id when unknown. */
  readonly instanceId: string;
  /** True while its Connect stream is open. */
  readonly connected: boolean;
}

export interface SessionAgents {
  /** Undefined when no agent by this id is listed. */
  get(agentId: string): SessionAgentInfo | undefined;
  /** The listed agent with this instance id (pty-ws.v1's agent-scoped URL); the agent id also matches. */
  byInstance(instanceId: string): SessionAgentInfo | undefined;
}

/** A PTY command: CommandRequest {allocate_pty: true, command: argv[0], args: argv[1..], …}. */
export interface PtyCommandRequest {
  readonly commandId: string;
  readonly sessionId: string;
  readonly sessionName: string;
  /** argv[0] is the program (`tmux`), run without a shell. */
  readonly argv: readonly string[];
  readonly cols: number;
  readonly rows: number;
  /** pty_term; `xterm-256color`. */
  readonly term: string;
  /** timeout_seconds 0 (none): sessions run until they end. */
  readonly timeoutSeconds: 0;
  /** working_dir: absolute, `~` (home) or relative to the agent's work directory; absent: the work directory. */
  readonly workingDir?: string;
  /** env: set over the agent's own environment for the PTY command. */
  readonly env?: Readonly<Record<string, string>>;
}

/** A one-shot command: CommandRequest {allocate_pty: false, capture_output: true, …}. */
export interface OneShotCommandRequest {
  readonly commandId: string;
  readonly argv: readonly string[];
  readonly timeoutSeconds: number;
}

export interface OneShotResult {
  /** CommandResult.exit_code. */
  readonly exitCode: number;
  /** Captured stdout (and stderr), at most 64 KiB, UTF-8. */
  readonly output: string;
}

export interface SessionAgentPort {
  /**
   * Sends the PTY command. Resolves once it is queued on the agent's stream; rejects with
   * SvcError `server.unavailable` when the agent is not connected. The command's output and
   * result come back through SessionService.commandOutput / commandFinished.
   */
  startPty(agentId: string, req: PtyCommandRequest): Promise<void>;
  /** StdinChunk {command_id, data}. Returns false when the agent is not connected (dropped). */
  writeStdin(agentId: string, commandId: string, data: Uint8Array): boolean;
  /** PtyControl {command_id, resize {cols, rows}}. False when not connected. */
  resizePty(agentId: string, commandId: string, cols: number, rows: number): boolean;
  /**
   * Runs a one-shot command and resolves with its CommandResult. Rejects with
   * `server.unavailable` (not connected, or the stream ended first) or `server.timeout`
   * (no result within timeoutSeconds + a margin).
   */
  runCommand(agentId: string, req: OneShotCommandRequest): Promise<OneShotResult>;
}
