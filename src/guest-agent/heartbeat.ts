/**
 * Heartbeat + Metrics at the acknowledged interval, both from one metrics sample. A beat is
 * skipped while the previous sample is still being taken (a slow /proc never piles up work).
 */
import type { v1 } from '../../proto/index.js';
import type { Logger } from './log.js';
import type { MetricsSampler } from './metrics.js';
import { heartbeatMessage, metricsMessage } from './wire.js';

export interface HeartbeatOptions {
  readonly agentId: string;
  readonly sampler: MetricsSampler;
  /** Sends on the current stream; false/undefined when there is none (the beat is dropped). */
  readonly send: (msg: v1.IAgentMessage) => unknown;
  /** Status and running-command count at the moment of the beat. */
  readonly state: () => { status: v1.AgentStatus; running: number };
  readonly log: Logger;
}

export class HeartbeatLoop {
  readonly #opts: HeartbeatOptions;
  #timer: NodeJS.Timeout | undefined;
  #sampling = false;

  constructor(opts: HeartbeatOptions) {
    this.#opts = opts;
  }

  get running(): boolean {
    return this.#timer !== undefined;
  }

  /** (Re)starts beating every intervalS seconds, with one beat now. */
  start(intervalS: number): void {
    clearInterval(this.#timer);
    this.#timer = setInterval(() => this.beat(), intervalS * 1000);
    this.#timer.unref();
    this.beat();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One Heartbeat then Metrics (skipped while a sample is in progress). */
  beat(): void {
    if (this.#sampling) return;
    this.#sampling = true;
    this.#opts.sampler
      .sample()
      .then((m) => {
        const { status, running } = this.#opts.state();
        this.#opts.send(heartbeatMessage(this.#opts.agentId, status, m, running));
        this.#opts.send(metricsMessage(this.#opts.agentId, m));
      })
      .catch((err: unknown) => this.#opts.log.error({ err }, 'metrics sample failed'))
      .finally(() => {
        this.#sampling = false;
      });
  }
}
