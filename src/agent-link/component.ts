/**
 * The agents feature as two components. `agentsComponent`: the AgentService (registry, agent
 * streams, Exec calls) bound to the actors, the agent frame kinds, shard restarts, and
 * GET /api/v1/agents with reprovision (through the VM component when it runs).
 * `agentListenerComponent`: the mTLS gRPC listener, listed after every component that subscribes
 * to agent events (sessions, the fanout), so no agent connects before they listen.
 */
import { emittedKindsOf } from '../../actors/protocol/frame-kinds.js';
import { framesOf, type Component } from '../component/component.js';
import { SvcError } from '../core/errors.js';
import { AGENT_ACTOR_MODULE, AgentService } from './agent-service.js';
import { registerAgentRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    agents: AgentService;
  }
}

export const agentsComponent: Component = {
  name: 'agents',
  actorModules: [AGENT_ACTOR_MODULE],
  start(ctx) {
    const agents = new AgentService({ config: ctx.config, logger: ctx.logger, metrics: ctx.metrics, events: ctx.need('events') });
    agents.bindActors(ctx.need('actors'));
    ctx.provide('agents', agents);
    return Promise.resolve({
      frames: framesOf(emittedKindsOf('agent'), (kind, key, payload) => {
        if (!agents.onEmit(kind, key, payload)) ctx.logger.warn({ kind, key }, 'frame from an actor that no component claims');
      }),
      onShardRestart: (shardIndex, lost) => agents.onShardRestart(shardIndex, lost),
      routes: (router) =>
        registerAgentRoutes(router, {
          registry: agents.registry,
          reprovision: (id) =>
            ctx.find('vms')?.reprovision(id) ?? Promise.reject(new SvcError('server.not_ready', 'VMs are still starting')),
        }),
      // Idempotent: already done when the listener component ran and stopped first.
      stop: () => agents.stop(),
    });
  },
};

export const agentListenerComponent: Component = {
  name: 'grpc',
  readiness: ['grpc'],
  async start(ctx) {
    const agents = ctx.need('agents');
    await agents.start();
    return { stop: () => agents.stop() };
  },
};
