/**
 * The last known state of every domain on every host, and the one place lifecycle events are
 * made. Whoever looks at a domain — our own call right after it changed something, the poller,
 * a virsh event — reports what it saw here; the tracker diffs it against what it knew
 * (state-events.ts) and emits only the difference. So one change gives one event, whoever saw
 * it first, and a second look at the same state gives none.
 *
 * Ordering: every look takes a sequence number when it starts (beginLook). A look older than
 * the last update of a domain is stale and ignored for it (a poll that started before our own
 * start call finished must not report the old state and flip it back). While one of our own
 * calls is changing a domain, the domain is pinned and other looks skip it: our call reports the
 * change itself, with its reason.
 */
import type { EventSource, HypervisorEvent, VmState } from './port.js';
import { isActive, transitionEvents, type Observation } from './state-events.js';

/** One domain as a look found it. */
export interface SeenDomain {
  readonly name: string;
  readonly uuid: string;
  readonly state: VmState;
  readonly id: number | null;
}

/** What our own call knows about the change it made. */
export interface ChangeContext {
  /** stop reason (destroyed, shutdown, crashed, ...). */
  readonly stopReason?: string;
  readonly startReason?: string;
  /** An ACPI shutdown was requested: announce vm.shutdown now, once. */
  readonly shutdownRequested?: boolean;
}

interface Rec {
  uuid: string;
  state: VmState;
  id: number | null;
  seq: number;
  startedAtMs: number | null;
  shutdownRequestedAtMs: number | null;
}

/** How long after our ACPI request a stop is attributed to it (reason shutdown rather than unknown). */
const SHUTDOWN_ATTRIBUTION_MS = 10 * 60_000;

export class EventTracker {
  readonly #hosts = new Map<string, Map<string, Rec>>();
  readonly #pins = new Map<string, number>();
  readonly #baselined = new Set<string>();
  /**
   * Domains seen gone (or whose removal we made) → the sequence of that look: a look that started
   * before it is stale and must not bring the domain back (it would report a start that never
   * happened). Dropped by the next full look of the host that started after it.
   */
  readonly #goneAt = new Map<string, number>();
  readonly #emit: (e: HypervisorEvent) => void;
  readonly #now: () => number;
  #seq = 0;

  constructor(emit: (e: HypervisorEvent) => void, now: () => number = Date.now) {
    this.#emit = emit;
    this.#now = now;
  }

  /** A sequence number for a look that starts now. */
  beginLook(): number {
    return ++this.#seq;
  }

  /** True once a full look at the host has been recorded (the silent baseline). */
  hasBaseline(host: string): boolean {
    return this.#baselined.has(host);
  }

  pin(host: string, name: string): void {
    const k = key(host, name);
    this.#pins.set(k, (this.#pins.get(k) ?? 0) + 1);
  }

  /** Ends a pin; looks that started while it was held are stale for this domain. */
  unpin(host: string, name: string): void {
    const k = key(host, name);
    const n = (this.#pins.get(k) ?? 1) - 1;
    if (n <= 0) this.#pins.delete(k);
    else this.#pins.set(k, n);
    const rec = this.#hosts.get(host)?.get(name);
    if (rec !== undefined) rec.seq = this.beginLook();
    else if (this.#goneAt.has(k)) this.#goneAt.set(k, this.beginLook());
  }

  /** Seconds since the domain was seen to start; null when not running or the start was not seen. */
  uptimeSeconds(host: string, name: string): number | null {
    const rec = this.#hosts.get(host)?.get(name);
    if (rec === undefined || rec.startedAtMs === null || !isActive(rec.state)) return null;
    return Math.max(0, Math.floor((this.#now() - rec.startedAtMs) / 1000));
  }

  /** Records a domain's state without events, unless it is already known (before our own change). */
  seed(host: string, seen: SeenDomain, seq: number): void {
    const map = this.#map(host);
    if (!map.has(seen.name)) map.set(seen.name, newRec(seen, seq, null));
  }

  /** A full look at one host (the poller). The first one per host is the silent baseline. */
  observeHost(host: string, seq: number, seen: readonly SeenDomain[], source: EventSource): void {
    const existing = this.#map(host);
    if (!this.#baselined.has(host)) {
      // Domains that were there before we looked are not news (our own calls may have recorded some already).
      this.#baselined.add(host);
      for (const d of seen) if (!existing.has(d.name)) existing.set(d.name, newRec(d, seq, null));
    }
    for (const [k, goneSeq] of this.#goneAt) if (goneSeq < seq && k.startsWith(`${host}\u0000`)) this.#goneAt.delete(k);
    const present = new Set<string>();
    for (const d of seen) {
      present.add(d.name);
      this.#apply(host, d.name, d, seq, source, {});
    }
    for (const name of [...existing.keys()]) if (!present.has(name)) this.#apply(host, name, null, seq, source, {});
  }

  /** One look at one domain (null = it does not exist), e.g. after a virsh event; skipped while pinned. */
  observeOne(host: string, name: string, seen: SeenDomain | null, seq: number, source: EventSource, ctx: ChangeContext = {}): void {
    this.#apply(host, name, seen, seq, source, ctx);
  }

  /** Our own call's look at the domain it just changed (the pin is its own). */
  observeOwn(host: string, name: string, seen: SeenDomain | null, seq: number, ctx: ChangeContext = {}): void {
    this.#apply(host, name, seen, seq, 'sandboxd', ctx, true);
  }

  #apply(host: string, name: string, seen: SeenDomain | null, seq: number, source: EventSource, ctx: ChangeContext, own = false): void {
    if (!own && this.#pins.has(key(host, name))) return;
    const map = this.#map(host);
    const rec = map.get(name);
    if (rec !== undefined && rec.seq > seq) return;
    if (rec === undefined && (this.#goneAt.get(key(host, name)) ?? 0) > seq) return;
    const now = this.#now();
    const events: { type: HypervisorEvent['type']; reason: string }[] = [];
    if (ctx.shutdownRequested === true && rec !== undefined && isActive(rec.state)) {
      events.push({ type: 'vm.shutdown', reason: 'requested' });
      rec.shutdownRequestedAtMs = now;
    }
    const requestedAtMs = rec?.shutdownRequestedAtMs ?? null;
    const attributed = requestedAtMs !== null && now - requestedAtMs < SHUTDOWN_ATTRIBUTION_MS;
    const tctx = {
      ...(ctx.stopReason !== undefined ? { stopReason: ctx.stopReason } : attributed ? { stopReason: 'shutdown' } : {}),
      ...(ctx.startReason !== undefined ? { startReason: ctx.startReason } : {}),
      shutdownAnnounced: attributed,
    };
    const before: Observation | null = rec === undefined ? null : { state: rec.state, id: rec.id };
    const after: Observation | null = seen === null ? null : { state: seen.state, id: seen.id };
    const uptimeBefore = rec !== undefined && rec.startedAtMs !== null ? Math.floor((now - rec.startedAtMs) / 1000) : null;
    if (rec !== undefined && seen !== null && rec.uuid !== seen.uuid) {
      // Same name, new domain: the old one went away and another was defined between two looks.
      events.push(...transitionEvents(before, null, tctx), ...transitionEvents(null, after, tctx));
    } else {
      events.push(...transitionEvents(before, after, tctx));
    }

    if (seen === null) {
      map.delete(name);
      this.#goneAt.set(key(host, name), Math.max(seq, this.#goneAt.get(key(host, name)) ?? 0));
    } else if (rec === undefined || rec.uuid !== seen.uuid) map.set(name, newRec(seen, seq, isActive(seen.state) ? now : null));
    else {
      const restarted = events.some((e) => e.type === 'vm.rebooted' || e.type === 'vm.started');
      if (!isActive(seen.state)) rec.startedAtMs = null;
      else if (restarted) rec.startedAtMs = now;
      if (!isActive(seen.state)) rec.shutdownRequestedAtMs = null;
      rec.state = seen.state;
      rec.id = seen.id;
      rec.seq = Math.max(rec.seq, seq);
    }

    for (const e of events) {
      const stopping = e.type === 'vm.stopped' || e.type === 'vm.crashed' || e.type === 'vm.rebooted' || e.type === 'vm.shutdown';
      this.#emit({
        type: e.type,
        vmName: name,
        uuid: seen?.uuid ?? rec?.uuid ?? null,
        host,
        reason: e.reason,
        source,
        state: seen?.state ?? null,
        previousState: before?.state ?? null,
        uptimeSeconds: stopping ? uptimeBefore : null,
        timestampMs: now,
      });
    }
  }

  #map(host: string): Map<string, Rec> {
    let m = this.#hosts.get(host);
    if (m === undefined) this.#hosts.set(host, (m = new Map<string, Rec>()));
    return m;
  }
}

function key(host: string, name: string): string {
  return `${host}\u0000${name}`;
}

function newRec(d: SeenDomain, seq: number, startedAtMs: number | null): Rec {
  return { uuid: d.uuid, state: d.state, id: d.id, seq, startedAtMs, shutdownRequestedAtMs: null };
}
