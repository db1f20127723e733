/**
 * Defensive parsing of what the WebSocket listener sends (spec 4.18): `output`, `metrics` and
 * `agent_status` messages, plus our `server_hello` greeting. Anything else, or a message with a
 * field of the wrong type, is `null`: the dashboard ignores what it does not understand rather
 * than drawing garbage.
 */

export interface MetricsMessage {
  readonly type: 'metrics';
  readonly agent_id: string;
  readonly cpu_percent: number;
  readonly memory_used_bytes: number;
  readonly memory_total_bytes: number;
  readonly disk_used_bytes: number;
  readonly disk_total_bytes: number;
  readonly load_avg: readonly number[];
  /** Unix ms. */
  readonly timestamp: number;
}

export interface AgentStatusMessage {
  readonly type: 'agent_status';
  readonly agent_id: string;
  readonly status: string;
  readonly timestamp: number;
}

export interface OutputMessage {
  readonly type: 'output';
  readonly agent_id: string;
  readonly stream_id: string;
  readonly stream_type: string;
  /** Base64 of the raw bytes. */
  readonly data: string;
  readonly timestamp: number;
}

export interface HelloMessage {
  readonly type: 'server_hello';
}

export type LiveMessage = MetricsMessage | AgentStatusMessage | OutputMessage | HelloMessage;

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isStr = (v: unknown): v is string => typeof v === 'string';

/** Parses one text frame; null for anything that is not a well-formed known message. */
export function parseLiveMessage(text: string): LiveMessage | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const m = raw as Record<string, unknown>;
  switch (m['type']) {
    case 'metrics': {
      const load = m['load_avg'];
      const ok =
        isStr(m['agent_id']) &&
        isNum(m['cpu_percent']) &&
        isNum(m['memory_used_bytes']) &&
        isNum(m['memory_total_bytes']) &&
        isNum(m['timestamp']) &&
        (load === undefined || (Array.isArray(load) && load.every(isNum)));
      if (!ok) return null;
      return {
        type: 'metrics',
        agent_id: m['agent_id'] as string,
        cpu_percent: m['cpu_percent'] as number,
        memory_used_bytes: m['memory_used_bytes'] as number,
        memory_total_bytes: m['memory_total_bytes'] as number,
        disk_used_bytes: isNum(m['disk_used_bytes']) ? m['disk_used_bytes'] : 0,
        disk_total_bytes: isNum(m['disk_total_bytes']) ? m['disk_total_bytes'] : 0,
        load_avg: Array.isArray(load) ? load : [],
        timestamp: m['timestamp'] as number,
      };
    }
    case 'agent_status':
      if (!isStr(m['agent_id']) || !isStr(m['status'])) return null;
      return { type: 'agent_status', agent_id: m['agent_id'], status: m['status'], timestamp: isNum(m['timestamp']) ? m['timestamp'] : 0 };
    case 'output':
      if (!isStr(m['agent_id']) || !isStr(m['data'])) return null;
      return {
        type: 'output',
        agent_id: m['agent_id'],
        stream_id: isStr(m['stream_id']) ? m['stream_id'] : '',
        stream_type: isStr(m['stream_type']) ? m['stream_type'] : 'stdout',
        data: m['data'],
        timestamp: isNum(m['timestamp']) ? m['timestamp'] : 0,
      };
    case 'server_hello':
      return { type: 'server_hello' };
    default:
      return null;
  }
}
