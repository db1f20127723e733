/**
 * The `orchestration` component: the orchestration server link (ORCH_SERVE_ENDPOINT, spec part 1)
 * and the aiwg bridge routes over it (spec 4.16). Listed last: the register message names the
 * bound listener ports, and the session count is looked up per request. It stops first, after
 * handing the connection what is queued (bounded by a second).
 *
 * Without ORCH_SERVE_ENDPOINT there is no link: the status route says so, reconnect answers 409.
 * With it, the events the store holds at start (those of the server's start-up) are queued, and
 * the link subscribes to the one event store's live listeners, so every v1 event appended from
 * then on (sandboxd's own and POSTed ones) is queued for the server.
 *
 * Metrics: `svc_orch_link_connected` (0/1), `svc_orch_link_events_sent_total`,
 * `svc_orch_link_events_dropped_total`, `svc_orch_link_gaps_sent_total`,
 * `svc_orch_link_connect_failures_total`, `svc_orch_link_reconnects_total` (attempts after the
 * first, automatic or requested) and `svc_orch_link_queued_events`.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { Counter, Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component/component.js';
import { AGENT_VERSION } from '../guest-agent/version.js';
import { OrchLink, type LinkMetrics, type LinkSocketFactory } from './orch-link.js';
import { registerBridgeRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    /** The orchestration link; null when ORCH_SERVE_ENDPOINT is unset. */
    orchestration: OrchLink | null;
  }
}

export interface OrchestrationComponentOptions {
  /** Ping period of the link, ms (tests). Default the link's (20 s). */
  readonly pingIntervalMs?: number;
  /** Another socket implementation (tests). */
  readonly socketFactory?: LinkSocketFactory;
}

function linkMetrics(ctx: ComponentContext, queued: () => number): LinkMetrics {
  const registers = [ctx.metrics.registry];
  const connected = new Gauge({ name: 'svc_orch_link_connected', help: 'Orchestration link WebSocket open (1) or not (0)', registers });
  const sent = new Counter({
    name: 'svc_orch_link_events_sent_total',
    help: 'Events the orchestration link wrote to its WebSocket',
    registers,
  });
  const dropped = new Counter({
    name: 'svc_orch_link_events_dropped_total',
    help: 'Events dropped from the full orchestration link queue (reported to the server as gaps)',
    registers,
  });
  const gaps = new Counter({ name: 'svc_orch_link_gaps_sent_total', help: 'Gap records the orchestration link sent', registers });
  const failures = new Counter({
    name: 'svc_orch_link_connect_failures_total',
    help: 'Orchestration link connection attempts that failed before the WebSocket opened',
    registers,
  });
  const reconnects = new Counter({
    name: 'svc_orch_link_reconnects_total',
    help: 'Orchestration link connection attempts after the first (backoff retries and requested reconnects)',
    registers,
  });
  new Gauge({
    name: 'svc_orch_link_queued_events',
    help: 'Events waiting in the orchestration link queue',
    registers,
    collect() {
      this.set(queued());
    },
  });
  connected.set(0);
  return {
    connected: (open) => connected.set(open ? 1 : 0),
    eventSent: () => sent.inc(),
    gapSent: () => gaps.inc(),
    dropped: (n) => dropped.inc(n),
    connectFailed: () => failures.inc(),
    reconnect: () => reconnects.inc(),
  };
}

/** Where a listener is reached: its configured host (a wildcard one as 127.0.0.1) and bound port. */
function hostPort(host: string, port: number): string {
  const h = host === '' || host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `${h}:${port}`;
}

export function orchestrationComponent(o: OrchestrationComponentOptions = {}): Component {
  return {
    name: 'orchestration',
    start(ctx) {
      const { config } = ctx;
      const events = ctx.need('events');
      const sessionCount = (): number => ctx.find('sessions')?.registry.list().length ?? 0;
      const endpoint = config.orchServeEndpoint;
      if (endpoint === null) {
        ctx.provide('orchestration', null);
        return Promise.resolve({
          routes: (router) => registerBridgeRoutes(router, { link: null, sessionCount }),
          stop: () => Promise.resolve(),
        });
      }
      const logger = ctx.logger.child({ component: 'orchestration' });
      // Told apart from an earlier run of this server: event ids start again at 1 after a restart.
      const bootId = randomUUID();
      let link: OrchLink | null = null;
      const metrics = linkMetrics(ctx, () => link?.status().queued ?? 0);
      link = new OrchLink({
        url: endpoint,
        queueMaxMessages: config.orchQueueMaxEvents,
        queueMaxBytes: config.orchQueueMaxBytes,
        backoffInitialMs: config.orchBackoffInitialMs,
        backoffMaxMs: config.orchBackoffMaxMs,
        logIntervalMs: config.orchLogIntervalSeconds * 1000,
        logger,
        metrics,
        ...(o.pingIntervalMs !== undefined && { pingIntervalMs: o.pingIntervalMs }),
        ...(o.socketFactory !== undefined && { socketFactory: o.socketFactory }),
        registration: () => {
          const httpPort = ctx.find('http')?.port ?? 0;
          const wsPort = ctx.find('output')?.ws.port ?? 0;
          const grpcPort = ctx.find('agents')?.port ?? 0;
          return {
            name: config.hostId ?? hostname(),
            boot_id: bootId,
            version: AGENT_VERSION,
            http_endpoint: httpPort === 0 ? null : `http://${hostPort(config.httpAddr.host, httpPort)}`,
            ws_endpoint: wsPort === 0 ? null : `ws://${hostPort(config.wsAddr.host, wsPort)}`,
            grpc_endpoint: grpcPort === 0 ? null : hostPort(config.grpcAddr.host, grpcPort),
            capabilities: ['vm', 'pty'],
            last_event_id: events.stats().lastEventId,
            session_count: sessionCount(),
          };
        },
      });
      const running = link;
      // What components listed before this one recorded while the server started (the link starts
      // last) is queued first; read and subscribed in one synchronous step, so nothing falls between.
      for (const event of events.query({ limit: config.orchQueueMaxEvents }).events) running.enqueue(event);
      const unsubscribe = events.subscribe((event) => {
        try {
          running.enqueue(event);
        } catch (err) {
          // enqueue does not throw by design; an append must never fail because of the link.
          logger.error({ err }, 'orchestration link: could not queue an event');
        }
      });
      ctx.provide('orchestration', running);
      running.start();
      return Promise.resolve({
        routes: (router) => registerBridgeRoutes(router, { link: running, sessionCount }),
        stop: async () => {
          unsubscribe();
          await running.stop();
        },
      });
    },
  };
}
