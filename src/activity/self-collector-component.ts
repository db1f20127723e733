/**
 * The self-collector as a component (src/main.ts lists it right after the activity and events
 * components): it subscribes to the v1 event store (commands, sessions) and, once the tasks
 * component runs, to its tool calls; it stops after the components listed later (reverse order),
 * so the commands and sessions they end while stopping are still recorded, and before the
 * activity store closes, so its last flush is stored.
 *
 * Without the activity service (a subset of components) it records nothing.
 */
import { Counter } from 'prom-client';
import type { Component } from '../component/component.js';
import { SelfCollector } from './self-collector.js';

/** Bound of the last flush at stop (ms); at most half the shutdown deadline. */
const STOP_FLUSH_MS = 5000;

export function activitySelfCollectorComponent(): Component {
  return {
    name: 'activity-self-collector',
    async start(ctx) {
      const activity = ctx.find('activity');
      if (activity === undefined) return { stop: () => Promise.resolve() };
      const events = ctx.need('events');
      const registry = ctx.metrics.registry;
      const name = 'svc_activity_self_events_total';
      const counter =
        (registry.getSingleMetric(name) as Counter<'result'> | undefined) ??
        new Counter<'result'>({
          name,
          help: 'Activity events sandboxd recorded about itself, by result (recorded, dropped, refused)',
          labelNames: ['result'],
          registers: [registry],
        });
      for (const result of ['recorded', 'dropped', 'refused']) counter.inc({ result }, 0);
      const collector = new SelfCollector({
        service: activity,
        logger: ctx.logger.child({ component: 'activity-self' }),
        instanceOf: (agentId) => ctx.find('agents')?.registry.get(agentId)?.instance_id,
        counter,
      });
      await collector.start();
      // The tasks component starts later: linked when it is there (a task's state events come
      // through the event store before its coding agent runs, so no tool call is missed).
      let unlinkTasks: (() => void) | null = null;
      const linkTasks = (): void => {
        if (unlinkTasks !== null) return;
        const tasks = ctx.find('tasks');
        if (tasks !== undefined) unlinkTasks = tasks.orchestrator.subscribeToolCalls((c) => collector.toolCall(c));
      };
      const unsubscribe = events.subscribe((e, origin) => {
        linkTasks();
        collector.event(e, origin);
      });
      linkTasks();
      let stopping: Promise<void> | undefined;
      return {
        stop() {
          stopping ??= (async () => {
            unsubscribe();
            unlinkTasks?.();
            await collector.stop(Math.min(STOP_FLUSH_MS, Math.max(1000, Math.floor(ctx.config.shutdownDeadlineMs / 2))));
          })();
          return stopping;
        },
      };
    },
  };
}
