/**
 * Builders of the agent's AgentMessages (plain objects the generated encoder takes).
 */
import type { v1 } from '../../proto/index.js';
import type { MetricsSample } from './metrics.js';
import type { OutboundEntry } from './output-buffer.js';
import type { SessionInfo } from './sessions.js';
import type { SystemInfoSample } from './system-info.js';

/** An output queue entry as the message that carries it. */
export function entryMessage(e: OutboundEntry): v1.IAgentMessage {
  switch (e.kind) {
    case 'chunk': {
      const chunk: v1.IOutputChunk = {
        streamId: e.commandId,
        data: e.data,
        timestampMs: e.timestampMs,
        eof: e.eof,
        seq: e.seq,
        offset: e.offset,
      };
      return e.stream === 'stdout' ? { stdout: chunk } : e.stream === 'stderr' ? { stderr: chunk } : { log: chunk };
    }
    case 'gap':
      return { outputGap: { commandId: e.commandId, firstSeq: e.firstSeq, lastSeq: e.lastSeq, lostBytes: e.lostBytes, reason: e.reason } };
    case 'result':
      return {
        commandResult: {
          commandId: e.commandId,
          exitCode: e.exitCode,
          error: e.error,
          durationMs: e.durationMs,
          success: e.exitCode === 0,
          timedOutBy: e.timedOutBy,
          lastSeq: e.lastSeq,
        },
      };
  }
}

export interface RegistrationInput {
  readonly agentId: string;
  readonly instanceId: string;
  readonly profile: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly agentVersion: string;
  readonly system: SystemInfoSample;
  readonly cursors: readonly { commandId: string; lastSeq: number }[];
}

export function registrationMessage(r: RegistrationInput): v1.IAgentMessage {
  return {
    registration: {
      agentId: r.agentId,
      ipAddress: r.system.ipAddress,
      hostname: r.system.hostname,
      profile: r.profile,
      labels: { ...r.labels },
      system: {
        os: r.system.os,
        kernel: r.system.kernel,
        cpuCores: r.system.cpuCores,
        memoryBytes: r.system.memoryBytes,
        diskBytes: r.system.diskBytes,
      },
      instanceId: r.instanceId,
      agentVersion: r.agentVersion,
      cursors: r.cursors.map((c) => ({ commandId: c.commandId, lastSeq: c.lastSeq })),
    },
  };
}

export function heartbeatMessage(agentId: string, status: v1.AgentStatus, m: MetricsSample, runningCommands: number): v1.IAgentMessage {
  return {
    heartbeat: {
      agentId,
      timestampMs: Date.now(),
      status,
      cpuPercent: m.cpuPercent,
      memoryUsedBytes: m.memoryUsedBytes,
      uptimeSeconds: m.uptimeSeconds,
      runningCommands,
    },
  };
}

export function metricsMessage(agentId: string, m: MetricsSample): v1.IAgentMessage {
  return {
    metrics: {
      agentId,
      timestampMs: m.timestampMs,
      cpuPercent: m.cpuPercent,
      memoryUsedBytes: m.memoryUsedBytes,
      memoryTotalBytes: m.memoryTotalBytes,
      diskUsedBytes: m.diskUsedBytes,
      diskTotalBytes: m.diskTotalBytes,
      loadAvg: [...m.loadAvg],
      uptimeSeconds: m.uptimeSeconds,
    },
  };
}

export function sessionReportMessage(agentId: string, sessions: readonly SessionInfo[]): v1.IAgentMessage {
  return {
    sessionReport: {
      agentId,
      timestampMs: Date.now(),
      sessions: sessions.map((s) => ({
        commandId: s.commandId,
        sessionName: s.sessionName,
        sessionType: s.sessionType,
        command: s.command,
        startedAtMs: s.startedAtMs,
        pid: s.pid,
        isPty: s.isPty,
        sessionId: s.sessionId,
      })),
    },
  };
}
