/**
 * Domain lifecycle events without event callbacks.
 *
 * The binding (@unraid/libvirt 2.2) exposes no virConnectDomainEventRegisterAny, so libvirt cannot
 * call us. The gap is closed behind the port by three sources feeding one EventTracker
 * (src/hypervisor/event-tracker.ts), which diffs states and emits each change once:
 *
 * 1. Our own calls. Every state change sandboxd makes (define, start, shutdown, destroy, suspend,
 *    resume, undefine) reads the domain right after and reports it with its reason (booted,
 *    destroyed, requested ...). The domain is pinned meanwhile, so no other source reports the
 *    change first or twice. Latency: none.
 * 2. The poller (this file, always on, also on the in-process test driver). Every intervalMs
 *    (default 1000) it sweeps each host: one list call, then name/uuid/info(/id) per domain, as
 *    one read in the host's read lane. Changes made behind our back (virsh, another libvirt
 *    client, the guest powering off, a crash) show up within one interval. A domain that went
 *    down and up between two sweeps is seen by its new runtime id (vm.rebooted, reason
 *    restarted); a guest reboot inside a running qemu keeps its id and is not seen by polling.
 *    The binding has no virDomainGetState, so the poller cannot tell a shutdown from a destroy
 *    (reason unknown, or shutdown when we asked for one in the last 10 minutes).
 * 3. `virsh event --all --loop` (optional; on by default for daemon URIs such as
 *    qemu:///system, qemu+ssh://host/system or test+unix:///default?socket=...). virsh opening
 *    the in-process `test:///default` would get a hypervisor of its own, so it is never used
 *    there. Through a daemon it sees the same domains as we do; each lifecycle line triggers an
 *    immediate read of that domain (so the tracker still decides what is news) with libvirt's
 *    exact detail as the reason (Stopped Destroyed → destroyed, Stopped Crashed → vm.crashed),
 *    and reboot lines (guest reboots, invisible to polling) become vm.rebooted. If virsh is
 *    missing or keeps dying, it is restarted with jittered backoff (1 s doubling to 60 s) and the
 *    poller still covers everything, only slower.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';

/** One parsed line of `virsh event --all --loop`. */
export type VirshEventLine =
  | { readonly kind: 'lifecycle'; readonly name: string; readonly event: string; readonly detail: string }
  | { readonly kind: 'reboot'; readonly name: string };

const LIFECYCLE_RE = /event 'lifecycle' for domain '((?:[^']|'(?!:))*)': (\S+)(?: (\S+))?\s*$/;
const REBOOT_RE = /event 'reboot' for domain '((?:[^']|'(?!:))*)'\s*$/;

/** Parses a virsh event line (null for other event kinds and noise). */
export function parseVirshEventLine(line: string): VirshEventLine | null {
  const lc = LIFECYCLE_RE.exec(line);
  if (lc !== null) return { kind: 'lifecycle', name: lc[1] ?? '', event: (lc[2] ?? '').toLowerCase(), detail: (lc[3] ?? '').toLowerCase() };
  const rb = REBOOT_RE.exec(line);
  if (rb !== null) return { kind: 'reboot', name: rb[1] ?? '' };
  return null;
}

/** Repeats `tick` every intervalMs (never overlapping itself) until stopped. */
export class DomainPoller {
  readonly #intervalMs: number;
  readonly #tick: () => Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;
  #stopped = true;

  constructor(intervalMs: number, tick: () => Promise<void>) {
    this.#intervalMs = Math.max(50, intervalMs);
    this.#tick = tick;
  }

  /** Starts polling; resolves after the first sweep (the silent baseline). */
  start(): Promise<void> {
    if (!this.#stopped) return this.#running ?? Promise.resolve();
    this.#stopped = false;
    return this.#run();
  }

  /** Sweeps now (or waits for the sweep in progress). */
  pollNow(): Promise<void> {
    return this.#running ?? this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #run(): Promise<void> {
    clearTimeout(this.#timer);
    this.#running = this.#tick()
      .catch(() => undefined)
      .finally(() => {
        this.#running = null;
        if (!this.#stopped) {
          this.#timer = setTimeout(() => void this.#run(), this.#intervalMs);
          this.#timer.unref();
        }
      });
    return this.#running;
  }
}

export interface VirshEventSourceOptions {
  uri: string;
  /** Default `virsh`. */
  virshPath?: string;
  onLine: (line: VirshEventLine) => void;
  logger?: Pick<Logger, 'info' | 'warn' | 'debug'> | undefined;
  /** Label for logs (redacted URI). */
  label: string;
}

/** A supervised `virsh -c URI event --all --loop` child. */
export class VirshEventSource {
  readonly #opts: VirshEventSourceOptions;
  #child: ChildProcess | null = null;
  #restartTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  #stopped = true;

  constructor(opts: VirshEventSourceOptions) {
    this.#opts = opts;
  }

  get running(): boolean {
    return this.#child !== null;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#spawn();
  }

  /** Kills the child it started (by its handle) and waits up to timeoutMs for it to exit. */
  async stop(timeoutMs = 2000): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    const child = this.#child;
    if (child === null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs).unref()))]);
    clearTimeout(timer);
    if (this.#child === child) child.kill('SIGKILL');
  }

  #spawn(): void {
    const { uri, virshPath = 'virsh', label } = this.#opts;
    const startedAt = Date.now();
    const child = spawn(virshPath, ['-q', '-c', uri, 'event', '--all', '--loop'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    let lastStderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (s: string) => {
      lastStderr = (lastStderr + s).slice(-500);
    });
    if (child.stdout !== null) {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const parsed = parseVirshEventLine(line);
        if (parsed !== null) this.#opts.onLine(parsed);
      });
    }
    let exited = false;
    const onExit = (why: string): void => {
      if (exited) return;
      exited = true;
      if (this.#child === child) this.#child = null;
      if (this.#stopped) return;
      // A child that ran for a while was healthy: start the backoff over.
      if (Date.now() - startedAt > 60_000) this.#failures = 0;
      const delayMs = Math.min(60_000, 1000 * 2 ** this.#failures) * (0.5 + Math.random());
      this.#failures++;
      this.#opts.logger?.warn(
        { hypervisor: label, why, stderr: lastStderr.trim(), retry_ms: Math.round(delayMs) },
        'virsh event source exited',
      );
      this.#restartTimer = setTimeout(() => this.#spawn(), delayMs);
      this.#restartTimer.unref();
    };
    child.once('error', (err) => onExit(err.message));
    child.once('exit', (code, signal) => onExit(`exit ${code ?? signal ?? '?'}`));
  }
}
