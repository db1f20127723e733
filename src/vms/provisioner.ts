/**
 * Provisioning on the main thread: defining a VM with sandboxd's metadata, giving it an agent
 * identity, and running its agent.
 *
 * Test-driver hosts (test:///…, test+unix:///…): the domain has no guest, so the agent runs as a
 * local child process (local-agents.ts) with the VM's certificate in <vm>/certs, agent id = the
 * VM name, instance id = the VM uuid.
 * qemu/kvm hosts (a deferred-enrollment VM of the minimal image gets no certificate: its fw_cfg
 * files say so and hold a bootstrap placeholder its agent polls, fw-cfg.ts, for a checkpoint
 * restore to fill): a qcow2 overlay and a cloud-init seed that installs the certificate and starts
 * the agent inside the guest (qemu-files.ts); deploy-agent rewrites the seed with a fresh
 * cloud-init instance id and power-cycles the VM so cloud-init runs again. When SVC_VM_BASE_IMAGE
 * is the disk of a built image (manifest.json next to it, src/image/), the VM boots its kernel
 * directly, gets a static address on the network's /24 (recorded as metadata ipAddress) and its
 * settings and certificate by fw_cfg instead of a seed (fw-cfg.ts). The files are made
 * on the sandboxd host: a remote qemu+ssh host needs the same paths (shared storage).
 *
 * SSH (README "SSH connector"): a `debian` image VM created while SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH
 * is set gets label `sandboxd/gateway-ssh=ca` and the SSH fw_cfg files (the CA public key, the
 * user, its principals; src/image/guest-ssh.ts starts the guest's sshd from them). Its SSH
 * endpoint (sshEndpoint) is its static address, port 22, while it runs. The minimal image has no
 * sshd: its VMs have no SSH endpoint.
 *
 * Loadouts (src/loadouts/apply.ts): a VM created with a loadout gets label `sandboxd/loadout`; at
 * define, what its loadout and profile give it is kept in <vm>/loadout.json and applied — files
 * and a report in the local agent's work directory, the environment on every start of its agent;
 * in a qemu guest's cloud-init seed; for a built image (fw_cfg) in its fw_cfg file loadout.json,
 * which the guest agent applies at start (--loadout-file).
 *
 * Metadata written at define: profile, disk size, instance id (= uuid) and labels
 * `sandboxd/agentshare` (true|false) and `sandboxd/ssh-keys` (count installed). A VM with an
 * instance id is "managed": its agent is started, stopped and awaited. Others (the test driver's
 * predefined `test`, anything defined by hand) are controlled but get no agent.
 */
import { X509Certificate } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import type { DomainInfo, HypervisorPort } from '../hypervisor/port.js';
import { macFromName } from '../hypervisor/libvirt/domain-xml.js';
import { isInProcessTestUri, isTestDriverUri } from '../hypervisor/uri.js';
import { writeAgentBundle, type CaMaterial } from '../identity/ca.js';
import type { CreateParams, StepResult } from '../../actors/protocol/vm-frames.js';
import { applyLocally, type ProvisioningMaterial } from '../loadouts/apply.js';
import type { AgentLookup } from './agent-lookup.js';
import type { LocalAgentSupervisor } from './local-agents.js';
import type { EndedVmProcesses } from './local-vm-processes.js';
import { createOverlay, qemuSpecFor, writeSeed, type QemuOptions } from './qemu-files.js';
import {
  bootSpec,
  loadBootImage,
  pickAddress,
  qemuUser,
  removeFwCfg,
  writeFwCfg,
  type BootImage,
  type GuestSettings,
  type GuestSsh,
} from './fw-cfg.js';
import { bootstrapMaterialPath, isInside, vmPaths, type VmPaths } from './vm-paths.js';
import { agentshareDirs, agentshareQemuShares, linkAgentshare } from '../storage/agentshare.js';

/** How often provisioning looks whether the agent has connected, ms. */
export const AGENT_POLL_MS = 250;

/** The label of a VM whose guest got the SSH fw_cfg files at define (its domain lists them). */
export const GATEWAY_SSH_LABEL = 'sandboxd/gateway-ssh';
/** The port of a qemu guest's sshd. */
export const GUEST_SSH_PORT = 22;

/**
 * Label of a VM created with `enrollment: deferred`: it gets no certificate at provisioning; its
 * agent starts only once bootstrap material is staged for it (a restored checkpoint), and enrolls
 * with it (src/bootstrap).
 */
export const ENROLLMENT_LABEL = 'sandboxd/enrollment';

/** A VM's SSH endpoint, or why it has none (the connector refuses with ssh.no_endpoint and this text). */
export type SshEndpoint = { readonly host: string; readonly port: number } | { readonly none: string };

/** What guests' sshd trusts (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH and the user and principals). */
export interface GatewaySshOptions {
  readonly caPublicKeyPath: string;
  readonly user: string;
  readonly principals: readonly string[];
}

export interface ProvisionerOptions {
  hypervisor: HypervisorPort;
  stateDir: string;
  caProvider: () => Promise<CaMaterial>;
  localAgents: LocalAgentSupervisor;
  agents: AgentLookup;
  qemu: QemuOptions;
  /** Bound of qemu-img and similar host work, ms. */
  writeBudgetMs: number;
  /** Set: `debian` image guests get an sshd trusting this CA. */
  gatewaySsh?: GatewaySshOptions | null;
  /** Revokes the unconsumed bootstrap tokens of an instance (src/bootstrap), when a VM's staged material is purged. */
  revokeBootstrap?: (instanceId: string) => void;
  /** SVC_STORAGE_DIR: a VM created with agentshare gets its inbox and outbox from here (src/storage/agentshare.ts). */
  storageDir?: string;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /**
   * What a VM created with `loadout` (or none) and `profile` gets at provisioning (src/loadouts);
   * null: nothing. Undefined (no loadouts component): a create naming a loadout fails.
   */
  loadoutMaterial?: (loadout: string | null, profile: string) => ProvisioningMaterial | null;
}

/** The label naming a VM's loadout. */
export const LOADOUT_LABEL = 'sandboxd/loadout';
/** The copy of what a VM's loadout gave it, in its directory. */
const LOADOUT_FILE = 'loadout.json';

export class Provisioner {
  readonly #o: ProvisionerOptions;
  readonly #ssh: GatewaySshOptions | null;
  #image: Promise<BootImage | null> | undefined;
  /** Addresses this process handed out, by VM name (see #reserveAddress). */
  readonly #addresses = new Map<string, string>();

  constructor(opts: ProvisionerOptions) {
    this.#o = opts;
    this.#ssh = opts.gatewaySsh ?? null;
  }

  paths(vm: string): VmPaths {
    return vmPaths(this.#o.stateDir, vm);
  }

  /** Defines the domain; on qemu hosts also makes its certificate, overlay and seed (the definition is removed again if that fails). */
  async define(vm: string, c: CreateParams, signal: AbortSignal): Promise<StepResult> {
    const paths = this.paths(vm);
    const image = await this.#bootImage();
    const ipAddress = image === null ? null : await this.#reserveAddress(vm);
    try {
      return await this.#define(vm, c, paths, image, ipAddress, signal);
    } catch (err) {
      this.#addresses.delete(vm);
      throw err;
    }
  }

  async #define(
    vm: string,
    c: CreateParams,
    paths: VmPaths,
    image: BootImage | null,
    ipAddress: string | null,
    signal: AbortSignal,
  ): Promise<StepResult> {
    const ssh = image?.kind === 'debian' && this.#ssh !== null;
    // Only the minimal image's guest waits for bootstrap material in fw_cfg (guest-init.ts); a
    // deferred VM of another image is provisioned with an identity (it cannot be checkpointed then).
    const waits = c.enrollment === 'deferred' && image?.kind === 'minimal';
    const info = await this.#o.hypervisor.define(
      {
        name: vm,
        uuid: c.uuid,
        vcpus: c.vcpus,
        memoryMiB: c.memoryMiB,
        metadata: {
          profile: c.profile,
          diskGiB: c.diskGiB,
          instanceId: c.uuid,
          labels: {
            'sandboxd/agentshare': String(c.agentshare),
            'sandboxd/ssh-keys': String(c.sshKeys.length),
            ...(c.enrollment === 'deferred' ? { [ENROLLMENT_LABEL]: 'deferred' } : {}),
            ...(ssh ? { [GATEWAY_SSH_LABEL]: 'ca' } : {}),
            ...(c.loadout !== undefined ? { [LOADOUT_LABEL]: c.loadout } : {}),
          },
          ...(ipAddress !== null ? { ipAddress } : {}),
        },
        qemu: {
          ...(image !== null
            ? bootSpec(image, paths.disk, paths.fwCfg, this.#o.qemu.network, paths.console, ssh, waits)
            : qemuSpecFor(paths, c.uuid, this.#o.qemu)),
          ...(await this.#shares(vm, c.agentshare)),
        },
      },
      { signal },
    );
    try {
      await this.#keepLoadout(vm, c, paths, isTestDriverUri(info.host));
    } catch (err) {
      await this.#o.hypervisor.undefine(vm, { force: true }).catch(() => undefined);
      throw err instanceof SvcError
        ? err
        : new SvcError('PROVISIONING_ERROR', `applying the loadout of VM '${vm}' failed: ${(err as Error).message}`);
    }
    if (!isTestDriverUri(info.host)) {
      try {
        await this.#qemuFiles(vm, info, c.diskGiB, c.sshKeys, c.uuid, waits);
      } catch (err) {
        await this.#o.hypervisor.undefine(vm, { force: true }).catch(() => undefined);
        throw err instanceof SvcError
          ? err
          : new SvcError('PROVISIONING_ERROR', `preparing the disk and seed of VM '${vm}' failed: ${(err as Error).message}`);
      }
    }
    return { state: info.state, managed: true };
  }

  /**
   * Keeps what the VM's loadout and profile give it in <vm>/loadout.json (removed when there is
   * nothing); on a test-driver host applies the files now (the agent gets the environment at each
   * start). See the file comment for built images.
   */
  async #keepLoadout(vm: string, c: CreateParams, paths: VmPaths, local: boolean): Promise<void> {
    const lookup = this.#o.loadoutMaterial;
    if (lookup === undefined && c.loadout !== undefined)
      throw new SvcError('PROVISIONING_ERROR', `VM '${vm}' names loadout ${c.loadout}, but this server has no loadouts component`);
    const material = lookup?.(c.loadout ?? null, c.profile) ?? null;
    if (material === null && c.loadout !== undefined)
      throw new SvcError('PROVISIONING_ERROR', `loadout ${c.loadout} of VM '${vm}' does not exist`);
    const file = join(paths.dir, LOADOUT_FILE);
    if (material === null) {
      await rm(file, { force: true });
      return;
    }
    await mkdir(paths.dir, { recursive: true, mode: 0o711 });
    await writeFile(file, JSON.stringify(material), { mode: 0o600 });
    if (!local) return;
    // eslint-disable-next-line no-restricted-properties -- the host plays the guest: its PATH is the one the local agent gets
    const report = await applyLocally(material, paths.work, { pathEnv: process.env['PATH'] ?? '' });
    if (report.packages.missing.length > 0 || report.tools.missing.length > 0)
      this.#o.logger.warn(
        { vm, loadout: material.loadout, missing_packages: report.packages.missing, missing_tools: report.tools.missing },
        'loadout: packages are never installed on the host for a local VM; these are not present',
      );
  }

  /** The kept loadout of a VM, null when it has none. */
  async #keptLoadout(vm: string): Promise<ProvisioningMaterial | null> {
    const text = await readFile(join(this.paths(vm).dir, LOADOUT_FILE), 'utf8').catch(() => null);
    return text === null ? null : (JSON.parse(text) as ProvisioningMaterial);
  }

  /**
   * Starts the VM's agent (test driver: the local process; qemu: nothing to do unless `restart`,
   * which re-seeds and power-cycles). `agentMode` none for an unmanaged VM.
   */
  async agentUp(vm: string, restart: boolean, signal: AbortSignal): Promise<StepResult> {
    const info = await this.#o.hypervisor.get(vm, { signal });
    if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
    const instanceId = info.metadata.instanceId;
    if (instanceId === undefined) return { agentMode: 'none', managed: false, state: info.state };
    if (info.state !== 'running') throw new SvcError('VM_NOT_RUNNING', `VM '${vm}' is ${info.state}; its agent runs only while it runs`);
    if (!isTestDriverUri(info.host)) {
      // A deferred-enrollment guest's agent waits for bootstrap material (a checkpoint restore brings it).
      if (!restart && info.metadata.labels?.[ENROLLMENT_LABEL] === 'deferred' && (await this.#bootImage())?.kind === 'minimal') {
        return { agentMode: 'deferred', managed: true, state: info.state };
      }
      if (!restart) return { agentMode: 'cloud-init', agentSinceMs: 0, managed: true, state: info.state };
      const sinceMs = Date.now();
      await this.#qemuSeed(vm, info, instanceId, `${instanceId}-${sinceMs}`);
      await this.#o.hypervisor.destroyDomain(vm, { signal });
      const after = await this.#o.hypervisor.startDomain(vm, { signal });
      return { agentMode: 'cloud-init', agentSinceMs: sinceMs, managed: true, state: after.state };
    }
    const paths = this.paths(vm);
    const enrolled = await hasBundle(paths, instanceId);
    // Staged bootstrap material and no certificate of this instance: the agent enrolls itself.
    const material = bootstrapMaterialPath(paths.dir);
    const enrolls = !enrolled && (await stat(material).catch(() => null)) !== null;
    // A deferred-enrollment VM gets no pre-issued identity: without material its agent waits (is not started).
    if (!enrolled && !enrolls && info.metadata.labels?.[ENROLLMENT_LABEL] === 'deferred') {
      return { agentMode: 'deferred', managed: true, state: info.state };
    }
    if (!enrolls && (restart || !enrolled)) await writeAgentBundle(paths.certs, await this.#o.caProvider(), { instanceId });
    await this.#linkShare(vm, paths.work, info.metadata.labels?.['sandboxd/agentshare'] === 'true');
    const started = await this.#o.localAgents.start(
      {
        vm,
        vmDir: paths.dir,
        endsWithServer: isInProcessTestUri(info.host),
        instanceId,
        profile: info.metadata.profile ?? 'basic',
        labels: info.metadata.labels ?? {},
        env: (await this.#keptLoadout(vm))?.environment ?? {},
        certsDir: paths.certs,
        ...(enrolls && { bootstrapTokenFile: material }),
        workDir: paths.work,
        logPath: paths.agentLog,
        pidPath: paths.agentPid,
      },
      { restart },
    );
    return { agentMode: 'local', agentSinceMs: started.startedAtMs, managed: true, state: info.state };
  }

  /** The agent share of a qemu guest: two 9p shares, when the VM has agentshare and a storage root is set. */
  async #shares(vm: string, agentshare: boolean): Promise<{ shares?: ReturnType<typeof agentshareQemuShares> }> {
    if (!agentshare || this.#o.storageDir === undefined) return {};
    return { shares: agentshareQemuShares(await agentshareDirs(this.#o.storageDir, vm, await qemuUser())) };
  }

  /** The agent share of a local agent: `inbox` and `outbox` links in its work dir. */
  async #linkShare(vm: string, workDir: string, agentshare: boolean): Promise<void> {
    if (!agentshare || this.#o.storageDir === undefined) return;
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    try {
      await linkAgentshare(workDir, await agentshareDirs(this.#o.storageDir, vm));
    } catch (err) {
      // A share that cannot be linked (the agent made a real inbox/ there) must not stop the agent.
      this.#o.logger.warn({ vm, err }, 'linking the agent share into the work dir failed');
    }
  }

  /** Stops the VM's local agent (none on qemu hosts: the guest's agent goes down with the guest). */
  async agentDown(vm: string): Promise<StepResult> {
    await this.#o.localAgents.stop(vm);
    return {};
  }

  /**
   * Waits until the VM's agent has connected at or after `sinceMs`. PROVISIONING_ERROR naming
   * what timed out (and the local process's fate) after `timeoutMs`.
   */
  async agentWait(vm: string, sinceMs: number, timeoutMs: number, signal: AbortSignal): Promise<StepResult> {
    const info = await this.#o.hypervisor.get(vm, { signal });
    const instanceId = info?.metadata.instanceId ?? null;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const a = this.#o.agents.byVm(vm, instanceId);
      if (a?.connected === true && (a.connected_at ?? 0) >= sinceMs) return { hostname: a.hostname };
      const local = this.#o.localAgents.info(vm);
      if (local !== null && !local.running && local.lastExit?.code === 2) {
        throw new SvcError('PROVISIONING_ERROR', `the agent of VM '${vm}' refused its configuration (exit code 2); see ${local.logPath}`);
      }
      if (Date.now() >= deadline) {
        const proc =
          local === null
            ? 'no local agent process'
            : local.running
              ? `agent process ${local.pid} is running`
              : `agent process exited (${local.lastExit?.code ?? local.lastExit?.signal ?? 'unknown'})`;
        const where = local === null ? '' : `; see ${local.logPath}`;
        throw new SvcError(
          'PROVISIONING_ERROR',
          `timed out after ${Math.round(timeoutMs / 1000)} s waiting for the agent of VM '${vm}' to connect (${proc}${where})`,
          { vm, timeout_ms: timeoutMs },
        );
      }
      await sleep(AGENT_POLL_MS, signal, this.#o.agents.onChange?.bind(this.#o.agents));
    }
  }

  /** Removes the VM's certificates (and their fw_cfg copies), and with deleteDisk its whole directory and disks inside it. */
  async purge(vm: string, deleteDisk: boolean, disks: readonly string[]): Promise<StepResult> {
    const paths = this.paths(vm);
    this.#addresses.delete(vm); // the domain is undefined by now: list() no longer names its address
    await rm(paths.certs, { recursive: true, force: true });
    await removeFwCfg(paths.fwCfg);
    await this.#purgeBootstrap(paths);
    if (!deleteDisk) return { diskDeleted: false };
    let removed = false;
    for (const d of disks) {
      if (!isInside(paths.dir, d)) continue; // never a file outside the VM's own directory
      await rm(d, { force: true });
      removed = true;
    }
    const hadDir = await dirExists(paths.dir);
    await rm(paths.dir, { recursive: true, force: true });
    return { diskDeleted: removed || hadDir };
  }

  /** A deleted VM's staged bootstrap material goes, and its token is revoked (it would stay live until it expired). */
  async #purgeBootstrap(paths: VmPaths): Promise<void> {
    const material = bootstrapMaterialPath(paths.dir);
    const text = await readFile(material, 'utf8').catch(() => null);
    await rm(dirname(material), { recursive: true, force: true });
    if (text === null) return;
    try {
      const instanceId = (JSON.parse(text) as { instance_id?: unknown }).instance_id;
      if (typeof instanceId === 'string') this.#o.revokeBootstrap?.(instanceId);
    } catch {
      // Not JSON: nothing to revoke by; the file is gone, and the token expires.
    }
  }

  /**
   * At service start, before resumeRunningAgents: ends whatever a sandboxd that died without
   * stopping left running for the VMs under the state dir — except VMs still running on a
   * test-driver host (a daemon-served driver outlives sandboxd): their agent is replaced by
   * resumeRunningAgents and their sessions are kept. When a test-driver host does not answer,
   * nothing is ended (it might be a running VM's): HYPERVISOR_UNAVAILABLE.
   */
  async reapLeftovers(): Promise<EndedVmProcesses> {
    const names = await readdir(join(this.#o.stateDir, 'vms')).catch(() => [] as string[]);
    if (names.length === 0) return { ended: [], survivors: [] };
    const down = (await this.#o.hypervisor.health()).hosts.filter((h) => isTestDriverUri(h.host) && h.status !== 'ok');
    if (down.length > 0)
      throw new SvcError(
        'HYPERVISOR_UNAVAILABLE',
        `test-driver host ${down.map((h) => h.host).join(', ')} did not answer: its running VMs are unknown`,
      );
    const running = await this.#o.hypervisor.list({ states: ['running'] });
    const keep = new Set(running.filter((d) => isTestDriverUri(d.host) && d.metadata.instanceId !== undefined).map((d) => d.name));
    const vms = names
      .filter((n) => !keep.has(n) && /^[A-Za-z0-9_.+-]{1,64}$/.test(n) && n !== '.' && n !== '..')
      .map((vm) => {
        const paths = this.paths(vm);
        return { vm, vmDir: paths.dir, pidPath: paths.agentPid };
      });
    return await this.#o.localAgents.reapLeftovers(vms);
  }

  /** At service start: starts the local agents of managed VMs already running on test-driver hosts. */
  async resumeRunningAgents(signal: AbortSignal): Promise<string[]> {
    const running = (await this.#o.hypervisor.list({ states: ['running'] })).filter(
      (d) => isTestDriverUri(d.host) && d.metadata.instanceId !== undefined,
    );
    const started: string[] = [];
    for (const d of running) {
      try {
        await this.agentUp(d.name, false, signal);
        started.push(d.name);
      } catch (err) {
        this.#o.logger.warn({ vm: d.name, err }, 'could not start the agent of a running VM');
      }
    }
    return started;
  }

  /**
   * The SSH endpoint of a VM by name or instance id: null when no VM has that name or id; else
   * its address and port 22, or why it has none. Local (test-driver) VMs' sshd is the local
   * sshd supervisor's; this answers for them only that none runs.
   */
  async sshEndpoint(instance: string): Promise<SshEndpoint | null> {
    const d =
      (await this.#o.hypervisor.get(instance).catch(() => null)) ??
      (await this.#o.hypervisor.list()).find((x) => x.metadata.instanceId === instance) ??
      null;
    if (d === null) return null;
    const vm = `VM '${d.name}'`;
    if (isTestDriverUri(d.host))
      return {
        none:
          this.#ssh === null
            ? `${vm} has no sshd: SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH is unset`
            : `${vm} has no sshd running (a local VM's sshd runs while its agent does)`,
      };
    if (d.state !== 'running') return { none: `${vm} is ${d.state}` };
    if (d.metadata.labels?.[GATEWAY_SSH_LABEL] !== 'ca') {
      const image = await this.#bootImage();
      return {
        none:
          image?.kind === 'minimal'
            ? `${vm} runs the minimal image, which has no sshd (use the debian image)`
            : `${vm} was not given an sshd: only a debian-image VM created while SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH is set gets one`,
      };
    }
    const ca = await readFile(join(this.paths(d.name).fwCfg, 'ssh-ca.pub'), 'utf8').catch(() => '');
    if (ca === '') return { none: `${vm} was last started without SSH (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH unset then)` };
    const ip = d.metadata.ipAddress ?? d.ipAddress;
    if (ip === null || ip === undefined) return { none: `${vm} has no known address` };
    return { host: ip, port: GUEST_SSH_PORT };
  }

  /** The SSH settings for a VM's fw_cfg: none unless its domain lists the files; empty files when SSH is off now. */
  async #guestSsh(info: DomainInfo): Promise<GuestSsh | 'empty' | null> {
    if (info.metadata.labels?.[GATEWAY_SSH_LABEL] !== 'ca') return null;
    const s = this.#ssh;
    if (s === null) return 'empty';
    return { caPublicKey: await readFile(s.caPublicKeyPath, 'utf8'), user: s.user, principals: s.principals };
  }

  /** The built image next to the base disk, looked up once (null: a plain qcow2 with cloud-init). */
  #bootImage(): Promise<BootImage | null> {
    this.#image ??= loadBootImage(this.#o.qemu.baseImage);
    return this.#image;
  }

  /** A free static address on the VM network (addresses of defined VMs and of defines in flight are taken). */
  /**
   * A free address on the network: not in any domain's metadata and not held by this process.
   * The set of held addresses is read after the (awaited) list, and picking plus holding is
   * synchronous, so concurrent creates never get the same one (they all got .10 before, and the
   * guests stole each other's TCP connections through ARP). Held until the VM is purged, so a
   * list that was taken before another VM's define finished cannot hand out its address either.
   */
  async #reserveAddress(vm: string): Promise<string> {
    const listed = await this.#o.hypervisor.list();
    const saved = await this.#savedGuestAddresses(new Set(listed.map((d) => d.name)));
    const used = new Set(this.#addresses.values());
    for (const d of listed) if (d.metadata.ipAddress !== undefined) used.add(d.metadata.ipAddress);
    for (const ip of saved) used.add(ip);
    const ip = pickAddress(hostOf(this.#o.qemu.agentServer), used);
    if (ip === null) throw new SvcError('PROVISIONING_ERROR', `no free address left on network ${this.#o.qemu.network} for VM '${vm}'`);
    this.#addresses.set(vm, ip);
    return ip;
  }

  /**
   * Addresses of guests that exist without a domain: a checkpointed VM (its memory image holds
   * the address, and its restore brings it back), found by the fw_cfg settings its folder keeps.
   * The in-process reservation covers them too, but not across a restart of sandboxd.
   */
  async #savedGuestAddresses(defined: ReadonlySet<string>): Promise<string[]> {
    const names = await readdir(join(this.#o.stateDir, 'vms')).catch(() => [] as string[]);
    const out: string[] = [];
    for (const name of names) {
      if (defined.has(name) || !/^[A-Za-z0-9_.+-]{1,64}$/.test(name)) continue;
      const env = await readFile(join(this.paths(name).fwCfg, 'agent.env'), 'utf8').catch(() => '');
      const ip = /^SBX_IP=(\d+\.\d+\.\d+\.\d+)\//m.exec(env)?.[1];
      if (ip !== undefined) out.push(ip);
    }
    return out;
  }

  async #qemuFiles(
    vm: string,
    info: DomainInfo,
    diskGiB: number,
    sshKeys: readonly string[],
    instanceId: string,
    deferred: boolean,
  ): Promise<void> {
    const paths = this.paths(vm);
    await mkdir(paths.dir, { recursive: true, mode: 0o711 });
    await mkdir(paths.cloudInit, { recursive: true, mode: 0o700 });
    // Kept so deploy-agent can write the same keys into a new seed.
    await writeFile(join(paths.cloudInit, 'ssh-keys'), sshKeys.join('\n'), { mode: 0o600 });
    await createOverlay(paths, diskGiB, this.#o.qemu, this.#o.writeBudgetMs);
    if (deferred) await this.#deferredFwCfg(vm, info, instanceId);
    else await this.#qemuSeed(vm, info, instanceId, instanceId);
  }

  /** A deferred-enrollment VM's fw_cfg files: its settings, no certificate, the bootstrap placeholder. */
  async #deferredFwCfg(vm: string, info: DomainInfo, instanceId: string): Promise<void> {
    await writeFwCfg(
      this.paths(vm).fwCfg,
      this.#guestSettings(vm, info, instanceId, 'deferred'),
      null,
      await this.#guestSsh(info),
      await this.#keptLoadout(vm),
    );
  }

  #guestSettings(vm: string, info: DomainInfo, instanceId: string, enrollment?: 'deferred'): GuestSettings {
    const ip = info.metadata.ipAddress ?? info.ipAddress;
    if (ip === null || ip === undefined) throw new SvcError('PROVISIONING_ERROR', `VM '${vm}' has no assigned address`);
    return {
      server: this.#o.qemu.agentServer,
      agentId: vm,
      instanceId,
      profile: info.metadata.profile ?? 'basic',
      hostname: vm,
      ipCidr: `${ip}/24`,
      gateway: hostOf(this.#o.qemu.agentServer),
      ...(enrollment !== undefined && { enrollment }),
    };
  }

  /** Issues a new certificate and writes the seed with it (fw_cfg files for a built image). */
  async #qemuSeed(vm: string, info: DomainInfo, instanceId: string, cloudInitInstanceId: string): Promise<void> {
    const paths = this.paths(vm);
    const files = await writeAgentBundle(paths.certs, await this.#o.caProvider(), { instanceId });
    const [caPem, certPem, keyPem] = await Promise.all([
      readFile(files.ca, 'utf8'),
      readFile(files.cert, 'utf8'),
      readFile(files.key, 'utf8'),
    ]);
    if ((await this.#bootImage()) !== null) {
      await writeFwCfg(
        paths.fwCfg,
        this.#guestSettings(vm, info, instanceId),
        { caPem, certPem, keyPem },
        await this.#guestSsh(info),
        await this.#keptLoadout(vm),
      );
      return;
    }
    const sshKeys = await readFile(join(paths.cloudInit, 'ssh-keys'), 'utf8').then(
      (t) => t.split('\n').filter((l) => l !== ''),
      () => [],
    );
    await writeSeed(paths, {
      vm,
      instanceId,
      cloudInitInstanceId,
      profile: info.metadata.profile ?? 'basic',
      server: this.#o.qemu.agentServer,
      certs: { caPem, certPem, keyPem },
      sshKeys,
      macAddress: macFromName(vm),
      loadout: await this.#keptLoadout(vm),
      agentshare: info.metadata.labels?.['sandboxd/agentshare'] === 'true' && this.#o.storageDir !== undefined,
    });
  }
}

/** Renew an agent certificate at an agent (re)start when less than this is left, ms (7 days). */
const RENEW_BEFORE_MS = 7 * 86_400_000;

/** True when the VM has an agent certificate for `instanceId` that is valid for another week. */
async function hasBundle(paths: VmPaths, instanceId: string): Promise<boolean> {
  try {
    const cert = new X509Certificate(await readFile(join(paths.certs, 'agent.pem')));
    return Date.parse(cert.validTo) - Date.now() > RENEW_BEFORE_MS && (cert.subjectAltName ?? '').endsWith(`/agent/${instanceId}`);
  } catch {
    return false;
  }
}

/** The host part of host:port ([v6]:port too). */
function hostOf(addr: string): string {
  const m = /^\[(.*)\]:\d+$/.exec(addr) ?? /^(.*):\d+$/.exec(addr);
  return m?.[1] ?? addr;
}

async function dirExists(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** Waits `ms`, or less when `wake` reports a change first (an agent registered). */
function sleep(ms: number, signal: AbortSignal, wake?: (listener: () => void) => () => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new SvcError('server.timeout', 'aborted'));
      return;
    }
    const done = (): void => {
      clearTimeout(t);
      unwake();
      signal.removeEventListener('abort', onAbort);
    };
    const t = setTimeout(() => {
      done();
      resolve();
    }, ms);
    t.unref();
    const unwake =
      wake?.(() => {
        done();
        resolve();
      }) ?? (() => undefined);
    const onAbort = (): void => {
      done();
      reject(signal.reason instanceof Error ? signal.reason : new SvcError('server.timeout', 'aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
