/**
 * The hypervisor port over libvirt (@unraid/libvirt), for one or several hosts.
 *
 * Hosts: SVC_HYPERVISOR_URI may list several URIs. A VM lives on exactly one host; list and get
 * cover all of them; define places a VM on the reachable host with the fewest domains unless one
 * is named; names are unique across hosts (define checks every host, and refuses with
 * HYPERVISOR_UNAVAILABLE while a host cannot be asked, rather than risk a duplicate). Each host
 * has its own connection, circuit breaker and lanes (host-link.ts); one dead host does not slow
 * the others: list answers with the hosts that answered.
 *
 * Events: see events.ts (own calls + poller + optional virsh event source).
 */
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { Domain } from '@unraid/libvirt';
import type { Logger } from 'pino';
import { SvcError } from '../../core/errors.js';
import { EventTracker } from '../event-tracker.js';
import type {
  CallOptions,
  DomainInfo,
  DomainSpec,
  HypervisorCapabilities,
  HypervisorEvent,
  HypervisorEventListener,
  HypervisorHealth,
  HypervisorPort,
  ListOptions,
} from '../port.js';
import type { ChangeContext } from '../event-tracker.js';
import { isInProcessTestUri, isTestDriverUri } from '../uri.js';
import { qemuDomainXml, parseDiskPaths, parseMacAddresses, parseMetadata, testDomainXml, validateSpec } from './domain-xml.js';
import { lookupDomain, readDomainOrNull, type RawDomain } from './domains.js';
import { DomainPoller, VirshEventSource, type VirshEventLine } from './events.js';
import { detectAccelerator } from '../accelerator.js';
import { probeHealth } from './health.js';
import { HostLink, type ConnectionFactory } from './host-link.js';
import { Inventory } from './inventory.js';
import { vmStateOf } from './state-map.js';
import { withFreshInstanceId } from './test-save-image.js';

const execFileAsync = promisify(execFile);

/** Where saveDomain keeps a qemu save image's domain XML: beside the image (a restore reads it). */
export function savedXmlPath(image: string): string {
  return `${image}.xml`;
}

export interface LibvirtHypervisorOptions {
  /** Host URIs (SVC_HYPERVISOR_URI). At least one; duplicates are refused. */
  uris: readonly string[];
  /** Read budget (list, get, health), ms. Default 2000. */
  readBudgetMs?: number;
  /** Write budget (define, lifecycle, undefine), ms. Default 30 000. */
  writeBudgetMs?: number;
  /** Budget of opening a connection, ms. Default: writeBudgetMs. */
  connectBudgetMs?: number;
  /** Consecutive failures that open a host's circuit. Default 3. */
  failureThreshold?: number;
  /** First cool-down of an open circuit, ms. Default 30 000 (then doubling, jittered, to maxCoolDownMs). */
  coolDownMs?: number;
  /** Default 300 000. */
  maxCoolDownMs?: number;
  /** Concurrent native reads / writes per host. Default 2 / 2. */
  readConcurrency?: number;
  writeConcurrency?: number;
  /** Poll interval for changes made outside sandboxd, ms. Default 1000. */
  pollIntervalMs?: number;
  /** `auto` (default): a `virsh event` child per daemon URI; `off`: polling only. */
  virshEvents?: 'auto' | 'off';
  virshPath?: string;
  /** Domain type on qemu hosts. `auto` (default) = kvm when this machine runs stock guests with KVM, else qemu (TCG). */
  domainType?: 'auto' | 'qemu' | 'kvm';
  /** Tests: make connections (e.g. redirect a URI). */
  connectionFactory?: ConnectionFactory;
  logger?: Pick<Logger, 'info' | 'warn' | 'debug'>;
}

type Phase = 'new' | 'started' | 'stopped';

export class LibvirtHypervisor implements HypervisorPort {
  readonly #opts: LibvirtHypervisorOptions;
  readonly #links: HostLink[];
  readonly #listeners = new Set<HypervisorEventListener>();
  readonly #tracker: EventTracker;
  readonly #poller: DomainPoller;
  readonly #virsh: VirshEventSource[] = [];
  readonly #inv: Inventory;
  /** Serialises define/undefine of one name across hosts. */
  readonly #nameLocks = new Map<string, Promise<unknown>>();
  #health: Promise<HypervisorHealth> | null = null;
  #phase: Phase = 'new';

  constructor(opts: LibvirtHypervisorOptions) {
    if (opts.uris.length === 0) throw new Error('at least one hypervisor URI is needed');
    if (new Set(opts.uris).size !== opts.uris.length) throw new Error('hypervisor URIs must be distinct');
    this.#opts = opts;
    this.#links = opts.uris.map(
      (uri) =>
        new HostLink(uri, {
          ...(opts.readBudgetMs !== undefined ? { readBudgetMs: opts.readBudgetMs } : {}),
          ...(opts.writeBudgetMs !== undefined ? { writeBudgetMs: opts.writeBudgetMs } : {}),
          ...(opts.connectBudgetMs !== undefined ? { connectBudgetMs: opts.connectBudgetMs } : {}),
          ...(opts.readConcurrency !== undefined ? { readConcurrency: opts.readConcurrency } : {}),
          ...(opts.writeConcurrency !== undefined ? { writeConcurrency: opts.writeConcurrency } : {}),
          ...(opts.connectionFactory !== undefined ? { connectionFactory: opts.connectionFactory } : {}),
          ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
          breaker: {
            ...(opts.failureThreshold !== undefined ? { failureThreshold: opts.failureThreshold } : {}),
            ...(opts.coolDownMs !== undefined ? { coolDownMs: opts.coolDownMs } : {}),
            ...(opts.maxCoolDownMs !== undefined ? { maxCoolDownMs: opts.maxCoolDownMs } : {}),
          },
        }),
    );
    if (new Set(this.#links.map((l) => l.label)).size !== this.#links.length)
      throw new Error('hypervisor URIs must differ after redaction');
    this.#tracker = new EventTracker((e) => this.#emit(e));
    this.#inv = new Inventory(this.#links, this.#tracker);
    this.#poller = new DomainPoller(opts.pollIntervalMs ?? 1000, () => this.#sweepAll().then(() => undefined));
    if ((opts.virshEvents ?? 'auto') === 'auto') {
      for (const link of this.#links.filter((l) => !isInProcessTestUri(l.uri))) {
        this.#virsh.push(
          new VirshEventSource({
            uri: link.uri,
            label: link.label,
            logger: opts.logger,
            ...(opts.virshPath !== undefined ? { virshPath: opts.virshPath } : {}),
            onLine: (line) => this.#onVirshLine(link, line),
          }),
        );
      }
    }
  }

  async start(): Promise<void> {
    if (this.#phase === 'started') return;
    if (this.#phase === 'stopped') throw new SvcError('server.unavailable', 'the hypervisor port was stopped and cannot be restarted');
    this.#phase = 'started';
    for (const link of this.#links) {
      const acc = this.#acceleratorFor(link.uri);
      if (acc.accelerator !== null)
        this.#opts.logger?.info(
          { host: link.label, accelerator: acc.accelerator, reason: acc.reason },
          `new VMs on ${link.label} use ${acc.accelerator === 'kvm' ? 'KVM' : 'TCG (no usable KVM)'}`,
        );
    }
    for (const v of this.#virsh) v.start();
    await this.#poller.start(); // first sweep: opens the connections and takes the silent baseline
  }

  async stop(): Promise<void> {
    if (this.#phase === 'stopped') return;
    this.#phase = 'stopped';
    await Promise.all([this.#poller.stop(), ...this.#virsh.map((v) => v.stop())]);
    await Promise.all(this.#links.map((l) => l.close(Math.min(5000, l.writeBudgetMs))));
  }

  hosts(): readonly string[] {
    return this.#links.map((l) => l.label);
  }

  capabilities(): HypervisorCapabilities {
    return { snapshots: false, managedSave: false, events: this.#virsh.length > 0 ? 'polling+virsh-event' : 'polling' };
  }

  onEvent(listener: HypervisorEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Sweeps every host now and reports changes (tests; the poller does this every interval). */
  async pollNow(): Promise<void> {
    await this.#poller.pollNow();
    await this.#poller.pollNow();
  }

  async list(opts: ListOptions = {}): Promise<DomainInfo[]> {
    const links = opts.host === undefined ? this.#links : [this.#inv.link(opts.host)];
    const results = await this.#inv.sweep(links);
    const ok = results.filter((r): r is { link: HostLink; domains: RawDomain[] } => !(r.domains instanceof Error));
    if (ok.length === 0) throw results[0]?.domains as Error;
    const states = opts.states === undefined ? null : new Set(opts.states);
    const prefix = opts.prefix ?? '';
    return ok
      .flatMap(({ link, domains }) => domains.map((d) => this.#inv.info(link, d)))
      .filter((d) => d.name.startsWith(prefix) && (states === null || states.has(d.state)))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async get(name: string, opts: CallOptions = {}): Promise<DomainInfo | null> {
    const found = await this.#inv.locate(name, opts);
    return found === null ? null : this.#inv.info(found.link, found.raw);
  }

  async describe(name: string, opts: CallOptions = {}): Promise<{ info: DomainInfo; disks: string[]; macAddresses: string[] }> {
    const found = await this.#inv.locate(name, opts);
    if (found === null) throw new SvcError('VM_NOT_FOUND', `VM '${name}' not found`);
    const xml = await this.#inv.call(found.link, 'read', 'describe', name, opts, async (conn) => {
      const d = await lookupDomain(conn, name);
      if (d === null) throw new SvcError('VM_NOT_FOUND', `VM '${name}' not found`);
      return d.getXMLDesc();
    });
    this.#inv.rememberMetadata(found.link, found.raw.uuid, parseMetadata(xml));
    return { info: this.#inv.info(found.link, found.raw), disks: parseDiskPaths(xml), macAddresses: parseMacAddresses(xml) };
  }

  define(spec: DomainSpec, opts: CallOptions & { host?: string } = {}): Promise<DomainInfo> {
    return this.#withNameLock(spec.name, async () => {
      const uuid = validateSpec(spec);
      const withUuid = { ...spec, uuid };
      if ((await this.#inv.locate(spec.name, opts)) !== null) throw new SvcError('VM_ALREADY_EXISTS', `VM '${spec.name}' already exists`);
      const link = opts.host !== undefined ? this.#inv.link(opts.host) : await this.#inv.placement();
      // qemu domains record what they were defined to run on (shown as the VM's accelerator).
      const { accelerator } = this.#acceleratorFor(link.uri);
      const metadata = accelerator === null ? (spec.metadata ?? {}) : { ...spec.metadata, accelerator };
      const xml =
        accelerator === null ? testDomainXml(withUuid) : qemuDomainXml({ ...withUuid, metadata }, accelerator === 'kvm' ? 'kvm' : 'qemu');
      this.#tracker.pin(link.label, spec.name);
      try {
        const { raw, seq } = await this.#inv.call(link, 'write', 'define', spec.name, opts, async (conn) => {
          const d = await conn.domainDefineXML(xml);
          const seq = this.#tracker.beginLook();
          return { raw: await readDomainOrNull(d), seq };
        });
        if (raw === null) throw new SvcError('LIBVIRT_ERROR', `define ${spec.name}: the domain vanished right after it was defined`);
        this.#inv.rememberMetadata(link, raw.uuid, metadata);
        this.#tracker.observeOwn(link.label, spec.name, raw, seq);
        this.#inv.noteDefined(link);
        return this.#inv.info(link, raw);
      } finally {
        this.#tracker.unpin(link.label, spec.name);
      }
    });
  }

  startDomain(name: string, opts: CallOptions = {}): Promise<DomainInfo> {
    return this.#change(name, 'start', opts, { startReason: 'booted' }, async (d) => {
      // A crashed domain (on_crash=preserve) must be reset before it can boot again.
      if (vmStateOf((await d.getInfo()).state) === 'crashed') await d.destroy();
      await d.create();
    });
  }

  shutdownDomain(name: string, opts: CallOptions = {}): Promise<DomainInfo> {
    return this.#change(name, 'shutdown', opts, { shutdownRequested: true }, (d) => d.shutdown());
  }

  destroyDomain(name: string, opts: CallOptions = {}): Promise<DomainInfo> {
    return this.#change(name, 'destroy', opts, { stopReason: 'destroyed' }, (d) => d.destroy());
  }

  suspendDomain(name: string, opts: CallOptions = {}): Promise<DomainInfo> {
    return this.#change(name, 'suspend', opts, {}, (d) => d.suspend());
  }

  resumeDomain(name: string, opts: CallOptions = {}): Promise<DomainInfo> {
    return this.#change(name, 'resume', opts, {}, (d) => d.resume());
  }

  undefine(name: string, opts: CallOptions & { force?: boolean } = {}): Promise<void> {
    return this.#withNameLock(name, async () => {
      await this.#changeRaw(name, 'undefine', opts, { stopReason: 'destroyed' }, async (d) => {
        const state = vmStateOf((await d.getInfo()).state);
        // libvirt would turn an active domain transient rather than refuse; the API wants a 409 instead.
        // A crashed (preserved) domain is not running: it is reset without force.
        if (state !== 'stopped' && state !== 'crashed' && opts.force !== true) {
          throw new SvcError('VM_RUNNING', `VM '${name}' is running; stop it first or force the delete`);
        }
        if (state !== 'stopped') await d.destroy();
        await d.undefine();
      });
    });
  }

  saveDomain(name: string, file: string, opts: CallOptions = {}): Promise<{ host: string }> {
    return this.#withNameLock(name, async () => {
      const { link } = await this.#changeRaw(name, 'save', opts, { stopReason: 'saved' }, async (d) => {
        if (vmStateOf((await d.getInfo()).state) !== 'running') throw new SvcError('VM_NOT_RUNNING', `VM '${name}' is not running`);
        await d.save(file);
        await d.undefine();
      });
      // qemu: the image's XML now, so a restore (the time users wait) spawns one virsh less
      // (best effort: without the file the restore dumps it itself).
      if (!isTestDriverUri(link.uri)) {
        await this.#runVirsh(link.uri, ['save-image-dumpxml', file])
          .then((xml) => writeFile(savedXmlPath(file), xml, { mode: 0o600 }))
          .catch(() => undefined);
      }
      return { host: link.label };
    });
  }

  restoreDomain(file: string, name: string, opts: CallOptions & { host?: string; instanceId?: string } = {}): Promise<DomainInfo> {
    return this.#withNameLock(name, async () => {
      if ((await this.#inv.locate(name, opts)) !== null) throw new SvcError('VM_ALREADY_EXISTS', `VM '${name}' already exists`);
      const link = opts.host !== undefined ? this.#inv.link(opts.host) : await this.#inv.placement();
      this.#tracker.pin(link.label, name);
      try {
        // qemu hosts: the binding lacks virDomainRestoreFlags, so virsh restores with the edited XML.
        const qemuXml = isTestDriverUri(link.uri) ? null : await this.#virshRestore(link.uri, file, opts.instanceId);
        const { raw, seq, xml } = await this.#inv.call(link, 'write', 'restore', name, opts, async (conn) => {
          if (qemuXml === null) await conn.domainRestore(file);
          const d = await lookupDomain(conn, name);
          if (d === null) throw new SvcError('LIBVIRT_ERROR', `restore of '${name}': no domain of that name came back from the image`);
          const xml = qemuXml ?? (await d.getXMLDesc());
          await conn.domainDefineXML(xml);
          const seq = this.#tracker.beginLook();
          return { raw: await readDomainOrNull(d), seq, xml };
        });
        if (raw === null) throw new SvcError('LIBVIRT_ERROR', `restore of '${name}': the domain vanished right after it was restored`);
        this.#inv.rememberMetadata(link, raw.uuid, parseMetadata(xml));
        this.#tracker.observeOwn(link.label, name, raw, seq, { startReason: 'restored' });
        this.#inv.noteDefined(link);
        return this.#inv.info(link, raw);
      } finally {
        this.#tracker.unpin(link.label, name);
      }
    });
  }

  /**
   * `virsh restore FILE --xml NEW` on a qemu host, NEW being the image's XML with `instanceId` in
   * sandboxd's metadata (the uuid stays: withFreshInstanceId says why). Returns NEW.
   */
  async #virshRestore(uri: string, file: string, instanceId: string | undefined): Promise<string> {
    const saved = await readFile(savedXmlPath(file), 'utf8').catch(() => this.#runVirsh(uri, ['save-image-dumpxml', file]));
    const xml = instanceId === undefined ? saved : withFreshInstanceId(saved, instanceId);
    const xmlFile = `${file}.restore.xml`;
    await writeFile(xmlFile, xml, { mode: 0o600 });
    try {
      await this.#runVirsh(uri, ['restore', file, '--xml', xmlFile]);
    } finally {
      await rm(xmlFile, { force: true });
    }
    return xml;
  }

  /** virsh's stdout; LIBVIRT_ERROR with its stderr. Spawned with paths only, never secrets. */
  async #runVirsh(uri: string, args: string[]): Promise<string> {
    try {
      const out = await execFileAsync(this.#opts.virshPath ?? 'virsh', ['-q', '-c', uri, ...args], {
        timeout: this.#opts.writeBudgetMs ?? 30_000,
        maxBuffer: 4 * 1024 * 1024,
      });
      return out.stdout;
    } catch (err) {
      const e = err as { stderr?: string; message?: string };
      throw new SvcError('LIBVIRT_ERROR', `virsh ${args[0] ?? ''}: ${(e.stderr ?? e.message ?? String(err)).trim().slice(0, 500)}`);
    }
  }

  health(): Promise<HypervisorHealth> {
    // Concurrent health checks share one probe per host.
    this.#health ??= probeHealth(this.#links, (uri) => this.#acceleratorFor(uri)).finally(() => {
      this.#health = null;
    });
    return this.#health;
  }

  async #change(
    name: string,
    op: string,
    opts: CallOptions,
    ctx: ChangeContext,
    action: (d: Domain) => Promise<void>,
  ): Promise<DomainInfo> {
    const { link, raw } = await this.#changeRaw(name, op, opts, ctx, action);
    if (raw === null) throw new SvcError('VM_NOT_FOUND', `VM '${name}' disappeared during ${op}`);
    return this.#inv.info(link, raw);
  }

  /** Finds the VM, pins it, runs `action` on it, reads it back and reports the change. */
  async #changeRaw(
    name: string,
    op: string,
    opts: CallOptions,
    ctx: ChangeContext,
    action: (d: Domain) => Promise<void>,
  ): Promise<{ link: HostLink; raw: RawDomain | null }> {
    const found = await this.#inv.locate(name, opts);
    if (found === null) throw new SvcError('VM_NOT_FOUND', `VM '${name}' not found`);
    const { link } = found;
    this.#tracker.pin(link.label, name);
    try {
      this.#tracker.seed(link.label, found.raw, found.seq);
      const { raw, seq } = await this.#inv.call(link, 'write', op, name, opts, async (conn) => {
        const d = await lookupDomain(conn, name);
        if (d === null) throw new SvcError('VM_NOT_FOUND', `VM '${name}' not found`);
        await action(d);
        const seq = this.#tracker.beginLook();
        return { raw: await readDomainOrNull(d), seq };
      });
      this.#tracker.observeOwn(link.label, name, raw, seq, ctx);
      if (raw === null) this.#inv.forgetMetadata(link, found.raw.uuid);
      return { link, raw };
    } finally {
      this.#tracker.unpin(link.label, name);
    }
  }

  #sweepAll(): Promise<unknown> {
    return this.#inv.sweep(this.#links);
  }

  #onVirshLine(link: HostLink, line: VirshEventLine): void {
    if (line.kind === 'reboot') {
      this.#emit({
        type: 'vm.rebooted',
        vmName: line.name,
        uuid: null,
        host: link.label,
        reason: 'guest',
        source: 'virsh-event',
        state: 'running',
        previousState: 'running',
        uptimeSeconds: this.#tracker.uptimeSeconds(link.label, line.name),
        timestampMs: Date.now(),
      });
      return;
    }
    const ctx: ChangeContext =
      line.event === 'stopped'
        ? { stopReason: line.detail || 'unknown' }
        : line.event === 'started'
          ? { startReason: line.detail || 'booted' }
          : {};
    const seq = this.#tracker.beginLook();
    void this.#inv
      .call(link, 'read', 'event refresh', line.name, {}, async (conn) => {
        const d = await lookupDomain(conn, line.name);
        return d === null ? null : readDomainOrNull(d);
      })
      .then(
        (raw) => {
          // libvirt reports a crash as Stopped Crashed when on_crash destroys the domain.
          const seen = raw !== null && line.event === 'stopped' && line.detail === 'crashed' ? { ...raw, state: 'crashed' as const } : raw;
          this.#tracker.observeOne(link.label, line.name, seen, seq, 'virsh-event', ctx);
        },
        () => undefined, // the poller will catch up
      );
  }

  /** What new qemu VMs get, and why (null on test-driver hosts). */
  #acceleratorFor(uri: string): { accelerator: 'kvm' | 'tcg' | null; reason: string | null } {
    if (isTestDriverUri(uri)) return { accelerator: null, reason: null };
    const t = this.#opts.domainType ?? 'auto';
    if (t !== 'auto') return { accelerator: t === 'kvm' ? 'kvm' : 'tcg', reason: `configured domain type ${t}` };
    const d = detectAccelerator();
    return { accelerator: d.accelerator, reason: d.reason };
  }

  #emit(e: HypervisorEvent): void {
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        this.#opts.logger?.warn({ err, event: e.type }, 'hypervisor event listener threw');
      }
    }
  }

  async #withNameLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#nameLocks.get(name) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#nameLocks.set(name, tail);
    try {
      return await run;
    } finally {
      if (this.#nameLocks.get(name) === tail) this.#nameLocks.delete(name);
    }
  }
}
