/**
 * Topics of the agent-output SSE fanout. A subscriber listens on exactly one topic, named by its
 * filters (agent_id, command_id, stream; each may be absent); a chunk is published to the eight
 * topics that match it, so every subscriber gets it at most once. All eight carry the same frame
 * bytes: the event id format `<clock>-<seq>` serves every scope (actors/protocol/output-cursor.ts).
 */
import type { OutputStreamName } from '../../actors/protocol/agent-frames.js';

export interface OutputFilter {
  agentId?: string | undefined;
  commandId?: string | undefined;
  stream?: OutputStreamName | undefined;
}

// Ids never contain NUL (query parsing rejects control characters); '' stands for "any".
const kSep = '\u0000';

/** The topic a subscriber with these filters listens on. */
export function outputSubscriptionTopic(f: OutputFilter): string {
  return `out${kSep}${f.agentId ?? ''}${kSep}${f.commandId ?? ''}${kSep}${f.stream ?? ''}`;
}

/** The topics a chunk of (agent, command, stream) is published to: every filter it matches. */
export function outputPublishTopics(agentId: string, commandId: string, stream: OutputStreamName): string[] {
  const out: string[] = [];
  for (const a of ['', agentId])
    for (const c of ['', commandId]) for (const s of ['', stream]) out.push(`out${kSep}${a}${kSep}${c}${kSep}${s}`);
  return out;
}

const STREAMS: readonly OutputStreamName[] = ['stdout', 'stderr', 'log'];

/** The topics an event about every stream of a command (an output gap) is published to: 16. */
export function outputPublishTopicsAllStreams(agentId: string, commandId: string): string[] {
  const out = new Set<string>();
  for (const s of STREAMS) for (const t of outputPublishTopics(agentId, commandId, s)) out.add(t);
  return [...out];
}

/** The topics of subscribers scoped to one command (command_id filter, any agent and stream filter): 8. */
export function commandScopedTopics(agentId: string, commandId: string): string[] {
  const out: string[] = [];
  for (const a of ['', agentId]) for (const s of ['', ...STREAMS]) out.push(`out${kSep}${a}${kSep}${commandId}${kSep}${s}`);
  return out;
}
