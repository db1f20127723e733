/**
 * Topics of the agent-output SSE fanout. A subscriber listens on exactly one topic, named by its
 * filters (agent_id, command_id, stream; each may be absent); a chunk is published to the eight
 * topics that match it, so every subscriber gets it at most once. All eight carry the same frame
 * bytes: the event id format `<clock>-<seq>` serves every scope (actors/replay/cursor.ts).
 */
import type { OutputStreamName } from '../../actors/replay/replay-ring.js';

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
  for (const a of ['', agentId]) for (const c of ['', commandId]) for (const s of ['', stream]) out.push(`out${kSep}${a}${kSep}${c}${kSep}${s}`);
  return out;
}
