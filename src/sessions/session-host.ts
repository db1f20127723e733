/**
 * What an agent's session host can run (the `session_host` of pty-ws.v1's binding_hello, spec
 * 4.2): one one-shot probe per agent registration (`command -v` of the programs the backend plans
 * need), cached until the agent disconnects or registers again.
 *
 * Decisions (README, "Session backends"):
 * - Pairs advertised: tmux/managed, screen/managed, native/direct, zellij/managed. A managed pair
 *   is available when its program is on the agent's PATH. zellij/managed is never available:
 *   Debian 12 has no zellij package, so sandboxd neither installs nor tests it, and the reason
 *   says whether the agent has one all the same. Kills read /proc (tmux-argv.ts's
 *   TERMINAL_SESSION_FUNCS_SH), so no pair needs procps.
 * - A probe that fails (agent not connected, no answer within {@link kProbeTimeoutMs}, an odd
 *   answer) is not cached: native/direct stays available (it needs nothing but the agent, which
 *   runs PTY commands itself), every managed pair is unavailable with the failure as its reason,
 *   and the next call probes again, at most once per {@link kProbeRetryMs}. A probe that answers
 *   late still fills the cache.
 * - Defaults: tmux/managed, else the first available of screen/managed and native/direct.
 * - observe and drive are always supported; reattach_supported says whether an available pair
 *   survives a lost PTY command.
 */
import { randomUUID } from 'node:crypto';
import { SvcError } from '../core/errors.js';
import type { SessionBackend, SessionClass } from './binding/codes.js';
import type { SessionHostCapabilities, SessionHostPair } from './binding/frames.js';
import type { SessionAgentPort } from './agent-port.js';
import { ADVERTISED_PAIRS, REATTACHABLE_BACKENDS, sessionBackendPlan } from './session-backends.js';

/** Wait for a probe's answer at most this long (ms) before answering with the fallback. */
export const kProbeTimeoutMs = 5_000;
/** After a failed probe, the fallback is reused this long (ms) before the next probe. */
export const kProbeRetryMs = 15_000;

/** Programs the probe looks for. */
export const PROBED_PROGRAMS = ['tmux', 'screen', 'zellij'] as const;

const PROBE_SCRIPT = `for p in "$@"; do
  if command -v "$p" >/dev/null 2>&1; then echo "$p yes"; else echo "$p no"; fi
done`;

/** argv of the one-shot probe: one line `<program> yes|no` per program. */
export function hostProbeArgv(): string[] {
  return ['/bin/sh', '-c', PROBE_SCRIPT, 'sandboxd-probe', ...PROBED_PROGRAMS];
}

/** The probe's output → the programs found, or undefined when it is not the probe's answer. */
export function parseHostProbe(output: string): Set<string> | undefined {
  const found = new Set<string>();
  let lines = 0;
  for (const line of output.split('\n')) {
    const m = /^([a-z]+) (yes|no)$/.exec(line.trim());
    if (m === null || !(PROBED_PROGRAMS as readonly string[]).includes(m[1] ?? '')) continue;
    lines++;
    if (m[2] === 'yes') found.add(m[1] ?? '');
  }
  return lines === PROBED_PROGRAMS.length ? found : undefined;
}

function pair(backend: SessionBackend, sessionClass: SessionClass, reason: string | undefined): SessionHostPair {
  return {
    session_backend: backend,
    session_class: sessionClass,
    available: reason === undefined,
    ...(reason !== undefined && { reason }),
  };
}

function capabilitiesOf(pairs: SessionHostPair[]): SessionHostCapabilities {
  const up = pairs.filter((p) => p.available);
  const preferred = up.find((p) => p.session_backend === 'tmux') ?? up.find((p) => p.session_backend === 'screen') ?? up[0] ?? pairs[0];
  return {
    default_backend: preferred?.session_backend ?? 'tmux',
    default_class: preferred?.session_class ?? 'managed',
    supported_backends: [...new Set(up.map((p) => p.session_backend))],
    supported_classes: [...new Set(up.map((p) => p.session_class))],
    pairs,
    observe_supported: true,
    drive_supported: true,
    reattach_supported: up.some((p) => REATTACHABLE_BACKENDS.has(p.session_backend)),
  };
}

/** Capabilities from the programs an agent has. */
export function capabilitiesFromProbe(found: ReadonlySet<string>): SessionHostCapabilities {
  return capabilitiesOf(
    ADVERTISED_PAIRS.map(({ backend, sessionClass }) => {
      if (backend === 'zellij') {
        return pair(
          backend,
          sessionClass,
          found.has('zellij')
            ? 'sandboxd does not drive zellij: Debian 12 has no zellij package, so it is neither installed nor tested (the agent has one)'
            : 'zellij is not installed on the agent, and sandboxd does not drive it: Debian 12 has no zellij package',
        );
      }
      const missing = (sessionBackendPlan(backend, sessionClass)?.requires ?? []).filter((p) => !found.has(p));
      return pair(backend, sessionClass, missing.length > 0 ? `${missing.join(', ')} is not installed on the agent` : undefined);
    }),
  );
}

/** Capabilities when the probe failed: native/direct only (see the file comment). */
export function capabilitiesWithoutProbe(why: string): SessionHostCapabilities {
  return capabilitiesOf(
    ADVERTISED_PAIRS.map(({ backend, sessionClass }) =>
      pair(backend, sessionClass, backend === 'native' ? undefined : `could not probe the agent: ${why}`),
    ),
  );
}

/**
 * Throws SvcError when the pair cannot start on this host: `session_backend.not_implemented` when
 * no available pair has the backend, `session_class.not_implemented` when the backend is available
 * with another class. The message carries the pair's reason and the available pairs.
 */
export function checkSelection(caps: SessionHostCapabilities, backend: string, sessionClass: string): void {
  const p = caps.pairs.find((x) => x.session_backend === backend && x.session_class === sessionClass);
  if (p?.available === true) return;
  const offer = caps.pairs
    .filter((x) => x.available)
    .map((x) => `${x.session_backend}/${x.session_class}`)
    .join(', ');
  const why = p?.reason ?? `${backend}/${sessionClass} is not a pair sandboxd runs`;
  const details = { session_backend: backend, session_class: sessionClass, available_pairs: offer };
  if (caps.pairs.some((x) => x.available && x.session_backend === backend))
    throw new SvcError(
      'session_class.not_implemented',
      `session_class ${sessionClass} with ${backend}: ${why}; available: ${offer}`,
      details,
    );
  throw new SvcError('session_backend.not_implemented', `session_backend ${backend}: ${why}; available: ${offer || 'none'}`, details);
}

/** One agent's registration; replaced when it (dis)connects, so an older probe's answer is dropped. */
interface Entry {
  caps?: SessionHostCapabilities;
  /** Fallback after a failure, and until when it stands. */
  fallback?: { caps: SessionHostCapabilities; untilMs: number };
  inflight?: Promise<SessionHostCapabilities>;
}

export interface SessionHostProbeOptions {
  readonly port: Pick<SessionAgentPort, 'runCommand'>;
  /** Default {@link kProbeTimeoutMs}. */
  readonly timeoutMs?: number;
  /** Default {@link kProbeRetryMs}. */
  readonly retryMs?: number;
  readonly now?: () => number;
  readonly onProbeFailed?: (agentId: string, why: string) => void;
}

/** The per-agent cache of probe results. */
export class SessionHostProbe {
  readonly #o: SessionHostProbeOptions;
  readonly #agents = new Map<string, Entry>();

  constructor(opts: SessionHostProbeOptions) {
    this.#o = opts;
  }

  /** The agent's capabilities: cached, or probed now (never rejects). */
  capabilities(agentId: string): Promise<SessionHostCapabilities> {
    const e = this.#entry(agentId);
    if (e.caps !== undefined) return Promise.resolve(e.caps);
    const now = (this.#o.now ?? Date.now)();
    if (e.fallback !== undefined && now < e.fallback.untilMs) return Promise.resolve(e.fallback.caps);
    e.inflight ??= this.#probe(agentId, e);
    const timeoutMs = this.#o.timeoutMs ?? kProbeTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<SessionHostCapabilities>((resolve) => {
      timer = setTimeout(() => resolve(this.#failed(agentId, e, `no answer within ${timeoutMs} ms`)), timeoutMs);
      timer.unref();
    });
    return Promise.race([e.inflight, late]).finally(() => clearTimeout(timer));
  }

  /** The cached capabilities, or undefined (then a probe starts unless one is running or a fallback stands). */
  cached(agentId: string): SessionHostCapabilities | undefined {
    const e = this.#entry(agentId);
    if (e.caps !== undefined) return e.caps;
    const now = (this.#o.now ?? Date.now)();
    if (e.fallback !== undefined && now < e.fallback.untilMs) return e.fallback.caps;
    void this.capabilities(agentId);
    return undefined;
  }

  /** The agent registered again or went away: probe anew next time. */
  forget(agentId: string): void {
    this.#agents.delete(agentId);
  }

  #entry(agentId: string): Entry {
    let e = this.#agents.get(agentId);
    if (e === undefined) this.#agents.set(agentId, (e = {}));
    return e;
  }

  async #probe(agentId: string, e: Entry): Promise<SessionHostCapabilities> {
    try {
      const r = await this.#o.port.runCommand(agentId, {
        commandId: randomUUID(),
        argv: hostProbeArgv(),
        timeoutSeconds: Math.max(1, Math.ceil((this.#o.timeoutMs ?? kProbeTimeoutMs) / 1000)),
      });
      const found = r.exitCode === 0 ? parseHostProbe(r.output) : undefined;
      if (found === undefined) return this.#failed(agentId, e, `the probe answered exit ${r.exitCode} with an unexpected output`);
      const caps = capabilitiesFromProbe(found);
      if (this.#agents.get(agentId) === e) {
        e.caps = caps;
        delete e.fallback;
      }
      return caps;
    } catch (err) {
      return this.#failed(agentId, e, err instanceof Error ? err.message : String(err));
    } finally {
      if (this.#agents.get(agentId) === e) delete e.inflight;
    }
  }

  #failed(agentId: string, e: Entry, why: string): SessionHostCapabilities {
    const caps = capabilitiesWithoutProbe(why);
    if (this.#agents.get(agentId) === e && e.caps === undefined) {
      e.fallback = { caps, untilMs: (this.#o.now ?? Date.now)() + (this.#o.retryMs ?? kProbeRetryMs) };
    }
    this.#o.onProbeFailed?.(agentId, why);
    return caps;
  }
}
