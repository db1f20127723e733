/**
 * Actor module of agent connections (listed in the ActorSystem's actorModules and imported by
 * every shard by URL). One actor per agent, id `agent:<agent_id>`, spawned by the main thread
 * when the agent's first verified stream opens; see agent-connection.ts.
 */
import type { ActorFactory } from '../runtime/actor.js';
import { AgentConnectionActor } from './agent-connection.js';
import { AGENT_ACTOR_TYPE, type AgentActorInit } from '../protocol/agent-frames.js';

export const actorTypes: Record<string, ActorFactory> = {
  [AGENT_ACTOR_TYPE]: (ctx, init) => new AgentConnectionActor(ctx, init as AgentActorInit),
};
