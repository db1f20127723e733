/**
 * Metrics of the output fanout, on the shared registry (metrics.registry):
 *
 *   svc_output_sse_subscribers{stream}          gauge    open SSE subscribers (stream: agent_output | chat)
 *   svc_output_ws_connections                   gauge    open dashboard WebSocket connections
 *   svc_output_slow_subscribers_total{transport} counter subscribers cut off for falling behind (sse | ws)
 *   svc_output_gaps_reported_total{where}       counter  output_gap events sent: live (as the agent
 *                                                        reported them, once per gap) or replay (per replay)
 *   svc_output_replay_ring_bytes                gauge    bytes held by the per-command replay rings, all shards
 *   svc_output_replay_rings                     gauge    per-command replay rings alive, all shards
 *   svc_output_frames_published_total{transport} counter events handed to the fanout (once per event, not per subscriber)
 *   svc_output_replays_total{kind}              counter  catch-ups served (command | agent | chat)
 *
 * The replay gauges are read from the shards when /metrics is scraped (an `output-shard` actor
 * call per shard, bounded by a short timeout; the last values stay on failure). Frames published
 * are counted in plain numbers (`countFrame`, on every chunk of every agent) and added to the
 * counter when it is scraped: a prom-client increment per chunk was 2 % of the main thread's
 * time in the ingest bench.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface ShardNumbers {
  ringBytes: number;
  rings: number;
}

export interface FanoutMetricsSources {
  sseSubscribers(stream: 'agent_output' | 'chat'): number;
  wsConnections(): number;
  /** Sums over the shards; rejects or resolves null when they could not be read. */
  replay(): Promise<ShardNumbers | null>;
}

export class FanoutMetrics {
  readonly slowSubscribers: Counter<'transport'>;
  readonly gapsReported: Counter<'where'>;
  readonly framesPublished: Counter<'transport'>;
  readonly replays: Counter<'kind'>;
  /** Frames published since the counter was last collected, per transport. */
  readonly #unscraped = { sse: 0, ws: 0 };

  constructor(registry: Registry, sources: FanoutMetricsSources) {
    const registers = [registry];
    new Gauge({
      name: 'svc_output_sse_subscribers',
      help: 'Open SSE subscribers of agent output and chat streams',
      labelNames: ['stream'],
      registers,
      collect() {
        this.set({ stream: 'agent_output' }, sources.sseSubscribers('agent_output'));
        this.set({ stream: 'chat' }, sources.sseSubscribers('chat'));
      },
    });
    new Gauge({
      name: 'svc_output_ws_connections',
      help: 'Open dashboard WebSocket connections',
      registers,
      collect() {
        this.set(sources.wsConnections());
      },
    });
    let last: ShardNumbers = { ringBytes: 0, rings: 0 };
    let pending: Promise<ShardNumbers> | undefined;
    // One read of the shards per scrape, shared by both gauges.
    const read = (): Promise<ShardNumbers> => {
      pending ??= sources
        .replay()
        .then(
          (n) => (last = n ?? last),
          () => last,
        )
        .finally(() => setImmediate(() => (pending = undefined)));
      return pending;
    };
    new Gauge({
      name: 'svc_output_replay_ring_bytes',
      help: 'Bytes held by per-command replay rings, all shards',
      registers,
      async collect() {
        this.set((await read()).ringBytes);
      },
    });
    new Gauge({
      name: 'svc_output_replay_rings',
      help: 'Per-command replay rings alive, all shards',
      registers,
      async collect() {
        this.set((await read()).rings);
      },
    });
    this.slowSubscribers = new Counter({
      name: 'svc_output_slow_subscribers_total',
      help: 'Subscribers cut off for falling behind',
      labelNames: ['transport'],
      registers,
    });
    this.gapsReported = new Counter({
      name: 'svc_output_gaps_reported_total',
      help: 'Output gap events sent (live once per gap; replay per replay)',
      labelNames: ['where'],
      registers,
    });
    const unscraped = this.#unscraped;
    this.framesPublished = new Counter({
      name: 'svc_output_frames_published_total',
      help: 'Events handed to the fanout, once per event',
      labelNames: ['transport'],
      registers,
      collect() {
        for (const transport of ['sse', 'ws'] as const) {
          if (unscraped[transport] === 0) continue;
          this.inc({ transport }, unscraped[transport]);
          unscraped[transport] = 0;
        }
      },
    });
    this.replays = new Counter({
      name: 'svc_output_replays_total',
      help: 'Catch-ups served to joining or resuming subscribers',
      labelNames: ['kind'],
      registers,
    });
    for (const transport of ['sse', 'ws']) {
      this.slowSubscribers.inc({ transport }, 0);
      this.framesPublished.inc({ transport }, 0);
    }
    for (const where of ['live', 'replay']) this.gapsReported.inc({ where }, 0);
    for (const kind of ['command', 'agent', 'chat']) this.replays.inc({ kind }, 0);
  }

  /** One event handed to the fanout for `transport` (svc_output_frames_published_total, added at scrape). */
  countFrame(transport: 'sse' | 'ws'): void {
    this.#unscraped[transport]++;
  }
}
