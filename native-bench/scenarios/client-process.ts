/**
 * The bench client process, seen from the bench: a child process (bench-client.ts, started by
 * path, never imported) that hosts simulated agents and subscribers, so that their CPU is not the
 * server's. Requests and answers go over the IPC channel: `call(op, args)` resolves with the
 * child's answer; `onEvent` receives the messages it sends on its own (flow-control acks).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const kScript = fileURLToPath(new URL('./bench-client.js', import.meta.url));

interface Answer {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}

export class BenchClient {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #exited: Promise<void>;
  #nextId = 1;
  #onEvent: ((m: Record<string, unknown>) => void) | undefined;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (m: Record<string, unknown>) => {
      if (typeof m['id'] === 'number') {
        const a = m as unknown as Answer;
        const p = this.#pending.get(a.id);
        this.#pending.delete(a.id);
        if (a.ok) p?.resolve(a.result);
        else p?.reject(new Error(`bench client: ${a.error ?? 'failed'}`));
      } else this.#onEvent?.(m);
    });
    this.#exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        for (const p of this.#pending.values()) p.reject(new Error(`bench client exited (${signal ?? code})`));
        this.#pending.clear();
        resolve();
      });
    });
  }

  /** Starts a client process (with this process's node flags, so --cpu-prof profiles it too). */
  static start(): BenchClient {
    return new BenchClient(fork(kScript, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: process.execArgv }));
  }

  call<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#child.send({ id, op, args });
    });
  }

  onEvent(cb: ((m: Record<string, unknown>) => void) | undefined): void {
    this.#onEvent = cb;
  }

  /** A one-way message to the child (no answer), e.g. forwarded flow-control acks. */
  notify(m: Record<string, unknown>): void {
    if (this.#child.connected) this.#child.send(m);
  }

  /**
   * Lets the child exit by itself (it exits when the IPC channel closes, and then writes its
   * --cpu-prof profile), killing it when it has not within 2 s (hung, or busy past the harness's limit).
   */
  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      const kill = setTimeout(() => this.#child.kill('SIGKILL'), 2000);
      if (this.#child.connected) this.#child.disconnect();
      else this.#child.kill('SIGKILL');
      await this.#exited;
      clearTimeout(kill);
    }
    await this.#exited;
  }
}

/** Stops `client` when `signal` aborts (the harness's hard limit). */
export function stopOnAbort(client: BenchClient, signal: AbortSignal): void {
  signal.addEventListener('abort', () => void client.stop(), { once: true });
}
