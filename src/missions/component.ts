/**
 * The `missions` component: executors, mission dispatch and mission events (spec 4.16, part 5,
 * part 6; README "Missions and dispatch") over the agents registry, an AgentCommandClient of its
 * own (like tasks, sessions and MCP) and the one event store. Its store is
 * `$SVC_STATE_DIR/missions/`. Listed after the agents listener (missions run on connected agents).
 *
 * Metrics: `svc_mission_dispatches_total{outcome}` (accepted, replayed, or the error code) and
 * `svc_missions_finished_total{status,reason}`.
 */
import { join } from 'node:path';
import { Counter } from 'prom-client';
import { AgentCommandClient } from '../agent-link/command-client.js';
import type { Component } from '../component/component.js';
import { MissionService } from './mission-service.js';
import { MissionStore } from './mission-store.js';
import { registerMissionRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    missions: MissionService;
  }
}

export const MISSIONS_DIR = 'missions';

export function missionsComponent(): Component {
  return {
    name: 'missions',
    start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'missions' });
      const agents = ctx.need('agents');
      const store = new MissionStore(join(config.stateDir, MISSIONS_DIR), { logger });
      const registers = [ctx.metrics.registry];
      const dispatches = new Counter({
        name: 'svc_mission_dispatches_total',
        help: 'Mission dispatches (POST /api/v1/sessions/{id}/dispatch) by outcome: accepted, replayed, or the error code',
        labelNames: ['outcome'],
        registers,
      });
      const finished = new Counter({
        name: 'svc_missions_finished_total',
        help: 'Missions finished, by status (completed, failed) and mission.failed reason',
        labelNames: ['status', 'reason'],
        registers,
      });
      const commands = new AgentCommandClient(ctx.need('actors'), agents);
      // Listed after the a2a component: a mission is also an A2A task of its agent's instance.
      const a2a = ctx.find('a2a');
      const service = new MissionService({
        store,
        events: ctx.need('events'),
        agent: (id) => agents.registry.get(id),
        commands,
        missionCommand: config.missionCommand,
        timeoutSeconds: config.missionTimeoutSeconds,
        startWindowMs: config.missionStartWindowMs,
        logger,
        onDispatch: (outcome) => dispatches.inc({ outcome }),
        onFinished: (status, reason) => finished.inc({ status, reason }),
        ...(a2a !== undefined && {
          tasks: {
            writer: a2a.store,
            instanceOf: (agentId: string) => {
              const a = agents.registry.get(agentId);
              return a === undefined ? undefined : a.instance_id || agentId;
            },
          },
        }),
      });
      const unsubscribe = agents.registry.subscribe((change) => {
        if (change.kind === 'removed') service.agentRemoved(change.agentId);
      });
      ctx.provide('missions', service);
      return Promise.resolve({
        routes: (router) => registerMissionRoutes(router, { service, identity: ctx.need('operatorIdentity') }),
        stop: () => {
          unsubscribe();
          service.stop();
          commands.stop();
          store.close();
          return Promise.resolve();
        },
      });
    },
  };
}
