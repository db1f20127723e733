/**
 * The `dashboard` scenario's simulated agents, seen from the bench: a child process
 * (dashboard-agents-process.ts, started by path) so that their CPU is not the server's and their
 * timers do not share the server's main thread.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SimAgentTls } from './sim-agent.js';

const kScript = fileURLToPath(new URL('./dashboard-agents-process.js', import.meta.url));

export interface AgentFleetOptions {
  /** gRPC target, host:port. */
  readonly target: string;
  readonly tls: SimAgentTls;
  readonly instanceId: string;
  /** Agent ids are prefix + a 3-digit index. */
  readonly prefix: string;
  readonly count: number;
  /** Registrations in flight at once. */
  readonly concurrency: number;
  /** Every agent sends a Heartbeat and a Metrics message this often, ms. */
  readonly intervalMs: number;
  /** Agents not registered by then are counted as failed, ms. */
  readonly connectTimeoutMs: number;
}

export interface FleetStarted {
  readonly registered: number;
  readonly failed: number;
  /** Time to register them all, ms. */
  readonly connectMs: number;
}

export interface FleetStopped {
  /** Per agent id: the Unix ms each metrics update was written (update n at index n − 1). */
  readonly sends: Map<string, number[]>;
  /** Agents whose stream the server ended while they ran. */
  readonly ended: number;
  /** CPU time of the agent process since it started, ms. */
  readonly cpuMs: number;
}

type Reply =
  | ({ op: 'started' } & FleetStarted)
  | { op: 'stopped'; sends: Record<string, number[]>; ended: number; cpuMs: number }
  | { op: 'error'; message: string };

export class AgentFleetProcess {
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  #waiter: ((r: Reply) => void) | undefined;
  #exitReason: string | undefined;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (m: Reply) => this.#waiter?.(m));
    this.#exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.#exitReason = `agent process exited (${signal ?? code})`;
        this.#waiter?.({ op: 'error', message: this.#exitReason });
        resolve();
      });
    });
  }

  /** Forks the agent process (with this process's node flags, so --cpu-prof profiles it too). */
  static fork(): AgentFleetProcess {
    return new AgentFleetProcess(fork(kScript, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: process.execArgv }));
  }

  #request<K extends Reply['op']>(message: Record<string, unknown>, want: K): Promise<Extract<Reply, { op: K }>> {
    if (this.#exitReason !== undefined) return Promise.reject(new Error(this.#exitReason));
    return new Promise((resolve, reject) => {
      this.#waiter = (r) => {
        this.#waiter = undefined;
        if (r.op === want) resolve(r as Extract<Reply, { op: K }>);
        else reject(new Error(r.op === 'error' ? `agent process: ${r.message}` : `agent process answered ${r.op}, not ${want}`));
      };
      this.#child.send(message);
    });
  }

  /** Connects and registers the agents, then they beat until stop(). */
  async start(opts: AgentFleetOptions): Promise<FleetStarted> {
    const r = await this.#request({ op: 'start', args: { ...opts } }, 'started');
    return { registered: r.registered, failed: r.failed, connectMs: r.connectMs };
  }

  /** Stops beating, closes the agents and returns what was sent. */
  async stop(): Promise<FleetStopped> {
    const r = await this.#request({ op: 'stop' }, 'stopped');
    return { sends: new Map(Object.entries(r.sends)), ended: r.ended, cpuMs: r.cpuMs };
  }

  /** Ends the process (idempotent); resolves once it exited. */
  async kill(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
    await this.#exited;
  }
}
