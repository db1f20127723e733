/**
 * The tasks component: the task orchestrator on VMs, agents, storage and the hypervisor, with its
 * routes. Listed after the VM component; stopped first (reverse order), so its VMs are deleted
 * while the VM service still runs. Options override what the config decides (tests).
 */
import type { Component } from '../component/component.js';
import { startTaskService, type TaskService, type TaskServiceOptions } from './task-service.js';

declare module '../component/component.js' {
  interface Services {
    tasks: TaskService;
  }
}

/** TaskServiceOptions over the ones made from the config and the earlier components. */
export type TasksComponentOptions = Partial<TaskServiceOptions>;

export function tasksComponent(o: TasksComponentOptions = {}): Component {
  return {
    name: 'tasks',
    readiness: ['tasks'],
    async start(ctx) {
      const { config } = ctx;
      const jobs = ctx.find('jobs');
      const tasks = await startTaskService({
        logger: ctx.logger.child({ component: 'tasks' }),
        metrics: ctx.metrics,
        events: ctx.need('events'),
        stateDir: config.stateDir,
        storage: ctx.need('storage'),
        vms: ctx.need('vms'),
        agents: ctx.need('agents'),
        actors: ctx.need('actors'),
        hypervisor: ctx.need('hypervisor'),
        agentCommand: config.taskAgentCommand,
        ...(jobs !== undefined && { jobs }),
        maxConcurrent: config.taskMaxConcurrent,
        stopDeadlineMs: Math.max(1000, Math.floor(config.shutdownDeadlineMs / 2)),
        ...o,
      });
      ctx.provide('tasks', tasks);
      return { routes: (router) => tasks.registerRoutes(router), stop: () => tasks.stop() };
    },
  };
}
