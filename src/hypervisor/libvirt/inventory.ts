/**
 * Where domains are: sweeps of every host (what the poller and list() read), finding the host of
 * a VM by name, placement of new VMs, and the cache of our metadata (read once per domain from
 * its XML, keyed by host and uuid).
 */
import type { Hypervisor } from '@unraid/libvirt';
import { SvcError } from '../../core/errors.js';
import type { EventTracker } from '../event-tracker.js';
import type { CallOptions, DomainInfo, DomainMetadata } from '../port.js';
import { lookupDomain, readDomainOrNull, sweepHost, type RawDomain } from './domains.js';
import { toSvcError } from './errors.js';
import type { HostLink } from './host-link.js';

export class Inventory {
  readonly #links: readonly HostLink[];
  readonly #tracker: EventTracker;
  /**
   * Parsed metadata by `${host} ${uuid}`, with the {@link #clock} tick it was remembered at: a
   * sweep forgets only entries older than its listing (see sweep()).
   */
  readonly #metadata = new Map<string, { readonly m: DomainMetadata; readonly at: number }>();
  /** Counts rememberMetadata calls. */
  #clock = 0;
  /** Domains per host at the last sweep (for placement). */
  readonly #counts = new Map<string, number>();

  constructor(links: readonly HostLink[], tracker: EventTracker) {
    this.#links = links;
    this.#tracker = tracker;
  }

  rememberMetadata(link: HostLink, uuid: string, m: DomainMetadata): void {
    this.#metadata.set(`${link.label} ${uuid}`, { m, at: ++this.#clock });
  }

  forgetMetadata(link: HostLink, uuid: string): void {
    this.#metadata.delete(`${link.label} ${uuid}`);
  }

  noteDefined(link: HostLink): void {
    this.#counts.set(link.label, (this.#counts.get(link.label) ?? 0) + 1);
  }

  /** The host holding `name` and its state, or null. HYPERVISOR_UNAVAILABLE when a host that might hold it did not answer. */
  async locate(name: string, opts: CallOptions): Promise<{ link: HostLink; raw: RawDomain; seq: number } | null> {
    const results = await Promise.all(
      this.#links.map(async (link) => {
        const seq = this.#tracker.beginLook();
        try {
          const raw = await this.call(link, 'read', 'get', name, opts, async (conn) => {
            const d = await lookupDomain(conn, name);
            return d === null ? null : readDomainOrNull(d);
          });
          return { link, raw, seq };
        } catch (err) {
          return { link, raw: null, seq, err };
        }
      }),
    );
    const hit = results.find((r) => r.raw !== null);
    if (hit !== undefined && hit.raw !== null) return { link: hit.link, raw: hit.raw, seq: hit.seq };
    const failed = results.find((r) => r.err !== undefined);
    if (failed !== undefined) throw failed.err;
    return null;
  }

  /** One call on a host, with binding failures mapped to the error table (VM name in the message). */
  async call<T>(
    link: HostLink,
    kind: 'read' | 'write',
    op: string,
    name: string | undefined,
    opts: CallOptions,
    fn: (conn: Hypervisor) => Promise<T>,
  ): Promise<T> {
    try {
      return await link.call(
        kind,
        `${op}${name === undefined ? '' : ` ${name}`}`,
        fn,
        opts.signal === undefined ? {} : { signal: opts.signal },
      );
    } catch (err) {
      throw toSvcError(err, { ...(name !== undefined ? { name } : {}), host: link.label, op, retryAfterSeconds: link.retryAfterSeconds() });
    }
  }

  /**
   * Lists every domain of `links`, reading the metadata of those not cached yet, and forgets the
   * metadata of domains that are gone. "Gone" means absent from this listing AND remembered before
   * it began: a domain defined while the listing ran is missing from it, yet exists. (Forgetting
   * it made the VM look unmanaged — no instance id — so its create skipped starting the agent and
   * completed with no agent ever coming; the poller and every GET /api/v1/vms sweep, so under
   * load a create overlapped one often.)
   */
  async sweep(links: readonly HostLink[]): Promise<{ link: HostLink; domains: RawDomain[] | Error }[]> {
    return Promise.all(
      links.map(async (link) => {
        const seq = this.#tracker.beginLook();
        const listedAt = this.#clock;
        try {
          const seen = new Set<string>();
          const domains = await this.call(link, 'read', 'list', undefined, {}, (conn) =>
            sweepHost(
              conn,
              (uuid) => {
                seen.add(uuid);
                return !this.#metadata.has(`${link.label} ${uuid}`);
              },
              (uuid, m) => this.rememberMetadata(link, uuid, m),
            ),
          );
          this.#tracker.observeHost(link.label, seq, domains, 'poller');
          this.#counts.set(link.label, domains.length);
          for (const [k, v] of this.#metadata) {
            if (k.startsWith(`${link.label} `) && !seen.has(k.slice(link.label.length + 1)) && v.at <= listedAt) this.#metadata.delete(k);
          }
          return { link, domains };
        } catch (err) {
          return { link, domains: err instanceof Error ? err : new Error(String(err)) };
        }
      }),
    );
  }

  async placement(): Promise<HostLink> {
    const candidates = this.#links.filter((l) => l.circuit !== 'open');
    if (candidates.length === 0) {
      const soonest = Math.min(...this.#links.map((l) => l.retryAfterSeconds()));
      throw new SvcError('HYPERVISOR_UNAVAILABLE', 'no hypervisor host is available', { retryAfterSeconds: soonest });
    }
    if (candidates.some((l) => !this.#counts.has(l.label))) await this.sweep(candidates);
    let best = candidates[0]!;
    for (const l of candidates) if ((this.#counts.get(l.label) ?? Infinity) < (this.#counts.get(best.label) ?? Infinity)) best = l;
    return best;
  }

  link(host: string): HostLink {
    const link = this.#links.find((l) => l.label === host || l.uri === host);
    if (link === undefined) throw new SvcError('request.invalid', `unknown hypervisor host ${host}`);
    return link;
  }

  info(link: HostLink, raw: RawDomain): DomainInfo {
    const metadata = this.#metadata.get(`${link.label} ${raw.uuid}`)?.m ?? {};
    return {
      name: raw.name,
      uuid: raw.uuid,
      state: raw.state,
      vcpus: raw.vcpus,
      memoryMiB: raw.memoryMiB,
      host: link.label,
      uptimeSeconds: this.#tracker.uptimeSeconds(link.label, raw.name),
      ipAddress: metadata.ipAddress ?? null,
      metadata,
    };
  }
}
