/**
 * The `a2a` component (issue 23 items 3 and 4; README "A2A"): the executor task store, message
 * dispatch to the instances' agents (through an AgentCommandClient of its own, like tasks and
 * MCP), the 4.8 artifact routes with A2A-Version negotiation, the per-instance AgentCard, and the
 * A2A core operations of the pty-ws.v1 binding. The store is `$SVC_STATE_DIR/a2a/tasks.db`
 * (task-db.ts). Listed before `sessions`, which looks its binding
 * handler up at start (so binding_hello lists the A2A ops only when this component runs).
 *
 * Metrics: `svc_a2a_tasks_total{state}` (tasks that ended, by terminal state),
 * `svc_a2a_version_requests_total{version}` (0.3, 1.0, rejected).
 */
import { join } from 'node:path';
import { Counter } from 'prom-client';
import { AgentCommandClient } from '../agent-link/command-client.js';
import type { Component } from '../component/component.js';
import { CONNECTED_STATUSES } from '../core/agent-status.js';
import { originUrl, publicOrigin } from '../http/public-url.js';
import { A2aBindingOps } from './binding-handler.js';
import { A2aDispatcher, type InstanceAgents } from './dispatch.js';
import { registerA2aRoutes } from './routes.js';
import { A2aTaskDb } from './task-db.js';
import { A2aTaskStore } from './task-store.js';

/** What the component provides: the store (other features may record tasks in it), dispatch and the binding handler. */
export interface A2aService {
  readonly store: A2aTaskStore;
  readonly dispatcher: A2aDispatcher;
  readonly binding: A2aBindingOps;
}

declare module '../component/component.js' {
  interface Services {
    a2a: A2aService;
  }
}

export const A2A_SERVER_VERSION = '0.1.0';
/** The store's directory under $SVC_STATE_DIR. */
export const A2A_DIR = 'a2a';

export interface A2aComponentOptions {
  readonly maxTasks?: number;
  readonly maxTaskOutputBytes?: number;
  readonly maxTotalOutputBytes?: number;
  readonly commandTimeoutSeconds?: number;
  readonly killGraceMs?: number;
}

export function a2aComponent(o: A2aComponentOptions = {}): Component {
  return {
    name: 'a2a',
    start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'a2a' });
      const agents = ctx.need('agents');
      const registers = [ctx.metrics.registry];
      const ended = new Counter({
        name: 'svc_a2a_tasks_total',
        help: 'A2A tasks that ended, by terminal state (completed, failed, canceled, rejected)',
        labelNames: ['state'] as const,
        registers,
      });
      const versions = new Counter({
        name: 'svc_a2a_version_requests_total',
        help: 'Requests to the A2A artifact routes by negotiated A2A-Version (0.3, 1.0, rejected)',
        labelNames: ['version'] as const,
        registers,
      });
      for (const state of ['completed', 'failed', 'canceled']) ended.inc({ state }, 0);
      for (const version of ['0.3', '1.0', 'rejected']) versions.inc({ version }, 0);
      const store = new A2aTaskStore({
        db: new A2aTaskDb(join(config.stateDir, A2A_DIR)),
        maxTasks: o.maxTasks ?? config.a2aMaxTasks,
        maxTaskOutputBytes: o.maxTaskOutputBytes ?? config.a2aTaskOutputBytes,
        maxTotalOutputBytes: o.maxTotalOutputBytes ?? config.a2aStoreOutputBytes,
        logger,
        onTerminal: (state) => ended.inc({ state }),
      });
      const registry = agents.registry;
      const instanceOf = (agentId: string): string | undefined => {
        const a = registry.get(agentId);
        return a === undefined ? undefined : a.instance_id || agentId;
      };
      const byInstance: InstanceAgents['byInstance'] = (instanceId) => {
        for (const id of registry.ids()) {
          const a = registry.get(id);
          if (a !== undefined && (a.instance_id || id) === instanceId) {
            return { agentId: id, connected: (CONNECTED_STATUSES as readonly string[]).includes(a.status) };
          }
        }
        return undefined;
      };
      const commands = new AgentCommandClient(ctx.need('actors'), agents);
      const dispatcher = new A2aDispatcher({
        store,
        commands,
        agents: { byInstance },
        timeoutSeconds: o.commandTimeoutSeconds ?? config.a2aCommandTimeoutSeconds,
        ...(o.killGraceMs !== undefined && { killGraceMs: o.killGraceMs }),
        logger,
      });
      const binding = new A2aBindingOps({ store, dispatcher, instanceOf, logger });
      ctx.provide('a2a', { store, dispatcher, binding });
      const urls = {
        trustedProxies: config.trustedProxies,
        listener: () => ({ host: config.httpAddr.host, port: ctx.find('http')?.port ?? config.httpAddr.port }),
      };
      return Promise.resolve({
        routes: (router) =>
          registerA2aRoutes(router, {
            store,
            instanceKnown: (id) => byInstance(id) !== undefined,
            origins: (req) => {
              const origin = publicOrigin(req, urls);
              return { http: originUrl(origin), ws: originUrl(origin, 'ws') };
            },
            serverVersion: A2A_SERVER_VERSION,
            countVersion: (version) => versions.inc({ version }),
          }),
        stop: () => {
          dispatcher.stop();
          commands.stop();
          store.close();
          return Promise.resolve();
        },
      });
    },
  };
}
