/**
 * The events component: the v1 event store every other component appends to, and its routes
 * (GET /api/v1/events with follow, POST /api/v1/events). First in the list: the agents, VM,
 * session and task components need it.
 */
import type { Component } from '../component/component.js';
import { EventStore } from './event-store.js';
import { registerEventRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    events: EventStore;
  }
}

export interface EventsComponentOptions {
  /** Events kept in memory; default the store's (10,000). */
  readonly maxEvents?: number;
}

export function eventsComponent(o: EventsComponentOptions = {}): Component {
  return {
    name: 'events',
    start(ctx) {
      const events = new EventStore(o.maxEvents === undefined ? {} : { maxEvents: o.maxEvents });
      ctx.provide('events', events);
      return Promise.resolve({
        routes: (router) => registerEventRoutes(router, { events }),
        stop: () => Promise.resolve(),
      });
    },
  };
}
