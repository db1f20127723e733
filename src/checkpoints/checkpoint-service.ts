/**
 * Pre-enrollment checkpoints and warm pools (spec 4.10): what the admin routes run. Every request
 * answers at once with an operation (src/operations, polled at /api/v2/admin/operations/{id});
 * the work runs here, on the main thread (the hypervisor port lives there).
 *
 * Take (`create`): a running VM created with `enrollment: deferred` whose agent never enrolled is
 * saved by libvirt into `<checkpoint>/domain.save` (memory and device state; the VM stops and its
 * definition goes: the image now holds it) and its disk is copied to `<checkpoint>/disk/`.
 *
 * Restore (`restore`, and each warm-pool handoff): the image comes back under its own name with a
 * fresh identity —
 *   1. a new uuid and instance id written into the image's domain XML (test-driver-save-image.ts);
 *   2. a fresh disk overlay: the VM's work disk is a new copy of `<checkpoint>/disk/`, its old
 *      certificates are gone;
 *   3. a fresh single-use bootstrap token, staged 0600 in the VM's directory (src/bootstrap);
 *      never in the operation, a log line or a command line;
 *   4. libvirt restores the domain; the VM's agent starts with the material, enrolls (CSR → a
 *      certificate for spiffe://<trust domain>/agent/<new instance id>) and connects over mTLS;
 *   5. the operation completes only once that agent is Ready with the new instance id.
 * A failed restore removes what it made (domain, overlay, material, token) and fails the
 * checkpoint. A checkpoint is restored at most once (checkpoint-state.ts says why).
 *
 * qemu hosts (#restoreQemu; README "Checkpoints and warm pools", On qemu hosts): only a deferred
 * VM of the minimal image, whose agent waits for material in a fixed-size fw_cfg file; the take
 * waits for the agent's `waiting for bootstrap material` on the serial console and keeps the
 * saved overlay; the restore makes a fresh overlay over it, writes the material into the fw_cfg
 * file (QEMU reads it anew at the restore), restores with `virsh restore --xml` (fresh instance
 * id; the uuid stays) and waits for Ready: the guest's agent is already running, no deploy.
 *
 * Warm pools: a pool holds ready checkpoints as slots. A handoff claims the oldest slot
 * synchronously (two handoffs never get one slot), restores it as above and answers with the VM
 * named by the slot. An empty pool answers 409 warm_pool.empty with Retry-After. Refill keeps
 * `target_size` slots: it creates a deferred-enrollment VM from the pool's template, waits for it
 * to boot, checkpoints it and adds the slot; failures back off (5 s doubling to 60 s) and count.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { SvcError, toWire } from '../core/errors.js';
import type { DomainInfo, HypervisorPort } from '../hypervisor/port.js';
import { isTestDriverUri } from '../hypervisor/uri.js';
import { testSaveImage, testSaveImageXml, withFreshIdentity } from '../hypervisor/libvirt/test-save-image.js';
import type { OperationHandle, Operations } from '../operations/operation-tracker.js';
import { errorMessage } from '../util/error-message.js';
import type { CreateVmRequest } from '../vms/create-request.js';
import { BOOTSTRAP_FW_CFG, writeBootstrapFwCfg } from '../vms/fw-cfg.js';
import { ENROLLMENT_LABEL } from '../vms/provisioner.js';
import type { Checkpoint, WarmPool } from '../wire/checkpoints.js';
import type { Operation } from '../wire/vms.js';
import type { CheckpointRecord, CheckpointStore, PoolRecord, VmTemplate } from './checkpoint-store.js';

const execFileAsync = promisify(execFile);

/** What a deferred guest's agent logs (on the serial console) once it waits for material (src/guest-agent/bootstrap-wait.ts). */
export const GUEST_WAITING_MARKER = 'waiting for bootstrap material';
/** A qemu checkpoint's saved disk (the VM's overlay as it was saved), in its image folder. */
const QEMU_DISK = 'disk.qcow2';

/** Checkpoint ids and pool names: lower-case letters, digits and `-`, starting with a letter or digit. */
export const CHECKPOINT_ID_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const POOL_NAME_RE = /^[a-z0-9][a-z0-9-]{0,39}$/;
/** Most slots a pool keeps. */
export const MAX_POOL_SIZE = 100;
/** Retry-After of an empty pool, seconds. */
export const EMPTY_POOL_RETRY_AFTER_S = 5;

/** What the service needs of the VM feature. */
export interface CheckpointVms {
  /** Queues a VM create; resolves with its operation id. */
  create(req: CreateVmRequest): Promise<string>;
  /** Queues a deploy-agent (starts the VM's agent with its staged material); resolves with its operation id. */
  deployAgent(name: string): Promise<string>;
  /** Stops the VM's local agent (test driver), if any. */
  stopAgent(name: string): Promise<void>;
  /** The VM's directory, its work disk, its certificates and its bootstrap material path; on qemu its disk, console log and fw_cfg folder. */
  paths(name: string): {
    readonly dir: string;
    readonly work: string;
    readonly certs: string;
    readonly material: string;
    readonly disk: string;
    readonly console: string;
    readonly fwCfg: string;
  };
}

/** What the service needs of the bootstrap feature (src/bootstrap). */
export interface CheckpointBootstrap {
  stage(opts: { instanceId: string; agentId: string; file: string }): Promise<{ tokenId: string; expiresAt: string }>;
  revokeInstance(instanceId: string): number;
}

/** An agent as the registry shows it. */
export interface CheckpointAgentView {
  readonly status: string;
  readonly instance_id: string;
}

export interface CheckpointServiceOptions {
  readonly store: CheckpointStore;
  readonly hypervisor: Pick<HypervisorPort, 'get' | 'saveDomain' | 'restoreDomain' | 'undefine'>;
  readonly operations: Operations;
  readonly vms: CheckpointVms;
  readonly bootstrap: CheckpointBootstrap;
  readonly agent: (vm: string) => CheckpointAgentView | undefined;
  /** Calls `listener` on every change of the agents registry; returns the unsubscribe function. */
  readonly onAgentChange: (listener: () => void) => () => void;
  readonly logger: Logger;
  /** How long a restore waits for the agent to be Ready after its deploy, ms. Default 60 000. */
  readonly readyTimeoutMs?: number;
  /** How long refill waits for a VM create, ms. Default 120 000. */
  readonly createTimeoutMs?: number;
  /**
   * The consume URL bootstrap material names as qemu guests reach it (SVC_BOOTSTRAP_CONSUME_URL);
   * null: qemu VMs cannot be checkpointed (their guest could not enroll after a restore).
   */
  readonly guestConsumeUrl?: string | null;
  /** qemu-img (fresh overlays of restored qemu VMs). Default `qemu-img` on PATH. */
  readonly qemuImgPath?: string;
  /** Called when a handoff ends (metrics). */
  readonly onHandoff?: (pool: string, outcome: 'completed' | 'failed' | 'empty', seconds: number) => void;
  readonly onRefillFailure?: (pool: string) => void;
}

interface RefillState {
  running: boolean;
  failures: number;
  lastError: string | null;
  timer: NodeJS.Timeout | null;
}

/** What a restore does that differs by host (CheckpointService #restore runs them in order). */
interface RestoreSteps {
  /** The VM's fresh disk overlay (its old certificates gone). */
  freshDisk(): Promise<void>;
  /** Stages the single-use token where the VM's agent reads it; only its id and expiry come back. */
  stage(): Promise<{ tokenId: string; expiresAt: string }>;
  /** Brings the domain back (calls `restored` once it exists); the deploy that starts its agent, or null. */
  start(restored: () => void): Promise<string | null>;
  /** After the agent is Ready: what the consumed checkpoint no longer needs. */
  consumed(): Promise<void>;
  /** After a failure (the domain is already gone): removes what the steps made. */
  undo(): Promise<void>;
}

export class CheckpointService {
  readonly #o: CheckpointServiceOptions;
  readonly #busyVms = new Set<string>();
  readonly #refill = new Map<string, RefillState>();
  #stopped = false;

  constructor(o: CheckpointServiceOptions) {
    this.#o = o;
  }

  /** Starts refilling every pool below its target (at start of the server). */
  start(): void {
    for (const p of this.#o.store.pools()) this.#kickRefill(p.name);
  }

  stop(): void {
    this.#stopped = true;
    for (const r of this.#refill.values()) if (r.timer !== null) clearTimeout(r.timer);
  }

  checkpoint(id: string): Checkpoint {
    return checkpointJson(this.#found(id));
  }

  checkpoints(): Checkpoint[] {
    return this.#o.store.list().map(checkpointJson);
  }

  pool(name: string): WarmPool {
    const p = this.#o.store.pool(name);
    if (p === undefined) throw new SvcError('warm_pool.not_found', `no warm pool ${JSON.stringify(name.slice(0, 64))}`);
    return this.#poolJson(p);
  }

  pools(): WarmPool[] {
    return this.#o.store.pools().map((p) => this.#poolJson(p));
  }

  /** POST /api/v2/admin/hypervisor/checkpoints. */
  async create(body: unknown): Promise<Operation> {
    const req = parseCreate(body);
    if (this.#o.store.get(req.checkpointId) !== undefined) {
      throw new SvcError('checkpoint.exists', `checkpoint ${req.checkpointId} exists`);
    }
    if (this.#busyVms.has(req.vm)) throw new SvcError('checkpoint.vm_busy', `a checkpoint of VM '${req.vm}' is being taken`);
    this.#busyVms.add(req.vm);
    let info: DomainInfo;
    try {
      info = await this.#checkpointable(req.vm);
    } catch (err) {
      this.#busyVms.delete(req.vm);
      throw err;
    }
    const op = this.#o.operations.begin('checkpoint_create', req.vm);
    void this.#take(info, req.checkpointId, op)
      .catch(() => undefined)
      .finally(() => this.#busyVms.delete(req.vm));
    return op.json();
  }

  /** POST /api/v2/admin/hypervisor/checkpoints/{id}/restore. */
  restore(id: string, body: unknown): Operation {
    const name = parseRestore(body);
    const ck = this.#found(id);
    if (name !== undefined && name !== ck.vm) {
      throw new SvcError(
        'checkpoint.name_mismatch',
        `a direct restore keeps the checkpoint's VM name '${ck.vm}'; name '${name.slice(0, 64)}' differs`,
      );
    }
    if (ck.status !== 'ready') {
      const why = ck.status === 'reserved' ? `it is a slot of warm pool '${ck.pool ?? '?'}' (use its handoff)` : `it is ${ck.status}`;
      throw new SvcError('checkpoint.not_ready', `checkpoint ${id} cannot be restored: ${why}`);
    }
    this.#o.store.move(id, ['ready'], 'restoring', 'restore_requested');
    const op = this.#o.operations.begin('checkpoint_restore', ck.vm);
    void this.#restore(ck, op).catch(() => undefined);
    return op.json();
  }

  /** POST /api/v2/admin/hypervisor/warm-pools. */
  createPool(body: unknown): Operation {
    const req = parsePool(body);
    if (this.#o.store.pool(req.pool) !== undefined) throw new SvcError('warm_pool.exists', `warm pool ${req.pool} exists`);
    const slots = req.checkpointIds.map((id) => this.#found(id));
    for (const c of slots) {
      if (c.status !== 'ready')
        throw new SvcError('checkpoint.not_ready', `checkpoint ${c.id} is ${c.status}${c.pool !== null ? ` (pool ${c.pool})` : ''}`);
    }
    const first = slots[0];
    if (first === undefined) throw new SvcError('request.invalid', 'checkpoint_ids must name at least one checkpoint');
    const op = this.#o.operations.begin('warm_pool_create', req.pool);
    op.start();
    this.#o.store.addPool({ name: req.pool, targetSize: req.targetSize ?? slots.length, template: first.template }, req.checkpointIds);
    op.complete({ pool: this.pool(req.pool) });
    this.#kickRefill(req.pool);
    return op.json();
  }

  /** POST /api/v2/admin/hypervisor/warm-pools/{pool}/handoff. */
  handoff(pool: string, body: unknown): Operation {
    if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body) || Object.keys(body).length > 0)) {
      throw new SvcError('request.invalid', 'a handoff takes an empty JSON object {}');
    }
    const p = this.#o.store.pool(pool);
    if (p === undefined) throw new SvcError('warm_pool.not_found', `no warm pool ${JSON.stringify(pool.slice(0, 64))}`);
    const slot = this.#o.store.claim(pool);
    if (slot === undefined) {
      this.#o.onHandoff?.(pool, 'empty', 0);
      const refill = this.#refill.get(pool);
      const when =
        p.targetSize === 0 ? 'refill is off (target_size 0)' : refill?.running === true ? 'a refill is running' : 'refill will retry';
      throw new SvcError('warm_pool.empty', `warm pool ${pool} has no ready slot now; ${when}`, {
        retryAfterSeconds: EMPTY_POOL_RETRY_AFTER_S,
      });
    }
    const startedMs = Date.now();
    const op = this.#o.operations.begin('warm_pool_handoff', slot.vm);
    void this.#restore(slot, op, (ok) => this.#o.onHandoff?.(pool, ok ? 'completed' : 'failed', (Date.now() - startedMs) / 1000)).catch(
      () => undefined,
    );
    this.#kickRefill(pool);
    return op.json();
  }

  #found(id: string): CheckpointRecord {
    const ck = id.length <= 64 ? this.#o.store.get(id) : undefined;
    if (ck === undefined) throw new SvcError('checkpoint.not_found', `no checkpoint ${JSON.stringify(id.slice(0, 64))}`);
    return ck;
  }

  /** The VM, if it can be checkpointed before enrollment; the reason's error otherwise. */
  async #checkpointable(vm: string): Promise<DomainInfo> {
    const info = await this.#o.hypervisor.get(vm);
    if (info === null) throw new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
    if (!isTestDriverUri(info.host)) {
      // qemu: only a guest whose agent waits for material in fw_cfg (the minimal image, deferred).
      if (!existsSync(join(this.#o.vms.paths(vm).fwCfg, BOOTSTRAP_FW_CFG))) {
        throw new SvcError(
          'checkpoint.unsupported_host',
          `VM '${vm}' on ${info.host} has no bootstrap fw_cfg file: only deferred-enrollment VMs of the minimal image are checkpointed on qemu hosts`,
        );
      }
      if ((this.#o.guestConsumeUrl ?? null) === null) {
        throw new SvcError(
          'checkpoint.unsupported_host',
          `a restored guest on ${info.host} could not reach the bootstrap consume URL: set SVC_BOOTSTRAP_CONSUME_URL to an address guests reach`,
        );
      }
    }
    if (info.state !== 'running') throw new SvcError('VM_NOT_RUNNING', `VM '${vm}' is ${info.state}; a checkpoint saves a running VM`);
    if (info.metadata.instanceId === undefined || info.metadata.labels?.[ENROLLMENT_LABEL] !== 'deferred') {
      throw new SvcError(
        'checkpoint.vm_enrolled',
        `VM '${vm}' was provisioned with an agent identity; create it with enrollment: deferred`,
      );
    }
    const agent = this.#o.agent(vm);
    if (agent !== undefined && agent.status !== 'Disconnected') {
      throw new SvcError('checkpoint.vm_enrolled', `the agent of VM '${vm}' has enrolled; its state holds an identity`);
    }
    return info;
  }

  /** Saves the VM into a new checkpoint (op: checkpoint_create). */
  async #take(info: DomainInfo, id: string, op: OperationHandle, pool: string | null = null): Promise<void> {
    const { store } = this.#o;
    const template: VmTemplate = {
      profile: info.metadata.profile ?? 'basic',
      vcpus: info.vcpus,
      memoryMiB: info.memoryMiB,
      diskGiB: info.metadata.diskGiB ?? 1,
    };
    if (!store.add({ id, vm: info.name, host: info.host, template })) {
      op.fail(new SvcError('checkpoint.exists', `checkpoint ${id} exists`));
      return;
    }
    op.start();
    const dir = store.imageDir(id);
    const qemu = !isTestDriverUri(info.host);
    try {
      await mkdir(dir, { recursive: true, mode: qemu ? 0o711 : 0o700 });
      const paths = this.#o.vms.paths(info.name);
      if (qemu) {
        // QEMU opens the saved disk as the backing file of restored overlays (user libvirt-qemu).
        await chmod(dirname(dir), 0o711);
        await chmod(dir, 0o711);
        await this.#guestWaiting(info.name, paths.console);
      }
      op.progress(10);
      const { host } = await this.#o.hypervisor.saveDomain(info.name, join(dir, 'domain.save'));
      op.progress(70);
      if (qemu) {
        // The overlay as saved (the guest's page cache matches it): the restore's new overlay sits on it.
        await rename(paths.disk, join(dir, QEMU_DISK));
      } else {
        await cp(paths.work, join(dir, 'disk'), { recursive: true }).catch((err: unknown) => {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          return mkdir(join(dir, 'disk'), { recursive: true });
        });
      }
      store.move(id, ['creating'], 'ready', 'saved', { host });
      if (pool !== null) store.move(id, ['ready'], 'reserved', 'refilled', { pool });
      op.complete({ checkpoint: checkpointJson(store.get(id) ?? this.#found(id)) });
    } catch (err) {
      store.move(id, ['creating'], 'failed', 'save_failed', { error: errorMessage(err) });
      this.#o.logger.warn({ checkpoint: id, vm: info.name, err: errorMessage(err) }, 'checkpoint failed');
      op.fail(err);
      throw err;
    }
  }

  /**
   * Resolves once a deferred qemu guest's agent says on the serial console that it waits for
   * bootstrap material (booted, node and the agent loaded: what a restore should resume from).
   */
  async #guestWaiting(vm: string, consoleLog: string): Promise<void> {
    const deadline = Date.now() + (this.#o.createTimeoutMs ?? 120_000);
    for (;;) {
      const text = await readFile(consoleLog, 'utf8').catch(() => '');
      if (text.includes(GUEST_WAITING_MARKER)) return;
      if (Date.now() >= deadline) {
        throw new SvcError('PROVISIONING_ERROR', `the agent of VM '${vm}' did not start waiting for bootstrap material in time`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /**
   * Restores a claimed checkpoint (status restoring) with a fresh identity; see the file comment.
   * The host's steps (restoreSteps) make the fresh disk, stage the token and bring the domain back;
   * around them, the same order on every host: the name must be free before anything of it is
   * touched, the outcome reaches `onEnd` and the checkpoint before the operation shows it (a
   * client that saw it finish sees everything it did), and a failure removes what was made.
   */
  async #restore(ck: CheckpointRecord, op: OperationHandle, onEnd?: (ok: boolean) => void): Promise<void> {
    const { store, hypervisor, bootstrap } = this.#o;
    const instanceId = randomUUID();
    const steps = isTestDriverUri(ck.host) ? this.#testDriverRestore(ck, instanceId) : this.#qemuRestore(ck, instanceId);
    let touched = false;
    let restored = false;
    op.start();
    try {
      // A VM created under the name since the checkpoint keeps its files and its agent.
      if ((await hypervisor.get(ck.vm)) !== null) {
        throw new SvcError('VM_ALREADY_EXISTS', `VM '${ck.vm}' exists again; the checkpoint restores under that name`);
      }
      touched = true;
      await steps.freshDisk();
      op.progress(10);
      const token = await steps.stage();
      op.progress(20);
      const deployId = await steps.start(() => (restored = true));
      op.progress(40);
      const agent = await this.#ready(ck.vm, instanceId, deployId);
      store.move(ck.id, ['restoring'], 'consumed', 'enrolled', { restoredInstanceId: instanceId });
      await steps.consumed();
      onEnd?.(true);
      op.complete({
        vm: { name: ck.vm, state: 'running' },
        checkpoint_id: ck.id,
        pool: ck.pool,
        instance_id: instanceId,
        agent: { id: ck.vm, status: agent.status, instance_id: agent.instance_id },
        bootstrap: { token_id: token.tokenId, expires_at: token.expiresAt },
      });
    } catch (err) {
      this.#o.logger.warn({ checkpoint: ck.id, vm: ck.vm, err: errorMessage(err) }, 'restore failed; removing what it made');
      bootstrap.revokeInstance(instanceId);
      if (touched) {
        if (restored) await hypervisor.undefine(ck.vm, { force: true }).catch(() => undefined);
        await steps.undo().catch(() => undefined);
      }
      store.move(ck.id, ['restoring'], 'failed', 'restore_failed', { error: toWire(err).message });
      onEnd?.(false);
      op.fail(err);
      throw err;
    }
  }

  /**
   * Test driver: the image's XML rewritten with the fresh uuid and instance id, the work disk a new
   * copy of the saved one, the material staged for the local agent, which a deploy starts.
   */
  #testDriverRestore(ck: CheckpointRecord, instanceId: string): RestoreSteps {
    const { store, hypervisor, vms, bootstrap } = this.#o;
    const paths = vms.paths(ck.vm);
    const saved = store.imageDir(ck.id);
    const image = join(saved, `restore-${instanceId}.save`);
    return {
      freshDisk: async () => {
        const xml = withFreshIdentity(testSaveImageXml(await readFile(join(saved, 'domain.save'))), instanceId, instanceId);
        await writeFile(image, testSaveImage(xml), { mode: 0o600 });
        await rm(paths.work, { recursive: true, force: true });
        await rm(paths.certs, { recursive: true, force: true });
        await mkdir(paths.dir, { recursive: true, mode: 0o700 });
        await cp(join(saved, 'disk'), paths.work, { recursive: true });
      },
      stage: () => bootstrap.stage({ instanceId, agentId: ck.vm, file: paths.material }),
      start: async (restored) => {
        await hypervisor.restoreDomain(image, ck.vm, { host: ck.host });
        restored();
        await rm(image, { force: true });
        return vms.deployAgent(ck.vm);
      },
      consumed: () => Promise.resolve(),
      undo: async () => {
        await vms.stopAgent(ck.vm).catch(() => undefined);
        await rm(paths.material, { force: true });
        await rm(paths.work, { recursive: true, force: true });
        await rm(paths.certs, { recursive: true, force: true });
        await rm(image, { force: true });
      },
    };
  }

  /**
   * qemu: a fresh overlay over the saved disk, the material in the VM's bootstrap fw_cfg file,
   * `virsh restore` with the fresh instance id in the XML. The guest's agent is already running
   * (it waited for the material when it was saved): no deploy, just wait for Ready.
   */
  #qemuRestore(ck: CheckpointRecord, instanceId: string): RestoreSteps {
    const { store, hypervisor, vms, bootstrap } = this.#o;
    const paths = vms.paths(ck.vm);
    const dir = store.imageDir(ck.id);
    const base = join(paths.dir, `checkpoint-${ck.id}.qcow2`);
    const removeImage = async (): Promise<void> => {
      await rm(join(dir, 'domain.save'), { force: true });
      await rm(join(dir, 'domain.save.xml'), { force: true });
    };
    return {
      freshDisk: async () => {
        await mkdir(paths.dir, { recursive: true, mode: 0o711 });
        await rm(paths.disk, { force: true });
        // The checkpoint is restored at most once: its saved disk moves to the VM, under a new overlay.
        await rename(join(dir, QEMU_DISK), base);
        await execFileAsync(this.#o.qemuImgPath ?? 'qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', base, paths.disk], {
          timeout: 60_000,
        });
      },
      stage: async () => {
        const token = await bootstrap.stage({ instanceId, agentId: ck.vm, file: paths.material });
        try {
          await writeBootstrapFwCfg(paths.fwCfg, await readFile(paths.material, 'utf8'));
        } finally {
          await rm(dirname(paths.material), { recursive: true, force: true });
        }
        return token;
      },
      start: async (restored) => {
        await hypervisor.restoreDomain(join(dir, 'domain.save'), ck.vm, { host: ck.host, instanceId });
        restored();
        return null;
      },
      // Consumed: the memory image is never started again.
      consumed: () => removeImage().catch(() => undefined),
      undo: async () => {
        await rm(paths.dir, { recursive: true, force: true });
        await removeImage();
      },
    };
  }

  /**
   * Resolves once the VM's agent is Ready with `instanceId` (woken by the registry's changes, not
   * polled); rejects when the deploy operation `deployId` (none on qemu: the guest's agent is
   * already running) fails first, or PROVISIONING_ERROR after the timeout.
   */
  #ready(vm: string, instanceId: string, deployId: string | null): Promise<CheckpointAgentView> {
    const timeoutMs = this.#o.readyTimeoutMs ?? 60_000;
    return new Promise<CheckpointAgentView>((resolve, reject) => {
      let settled = false;
      const finish = (err: unknown, agent?: CheckpointAgentView): void => {
        if (settled) return;
        settled = true;
        unsubscribe();
        clearTimeout(timer);
        if (agent !== undefined) resolve(agent);
        else reject(err instanceof Error ? err : new Error(String(err)));
      };
      const check = (): void => {
        const a = this.#o.agent(vm);
        if (a !== undefined && a.instance_id === instanceId && a.status === 'Ready') finish(null, a);
      };
      const unsubscribe = this.#o.onAgentChange(check);
      const timer = setTimeout(() => {
        const a = this.#o.agent(vm);
        finish(
          new SvcError(
            'PROVISIONING_ERROR',
            `the restored agent of VM '${vm}' was not Ready with its fresh identity within ${Math.round(timeoutMs / 1000)} s (${a?.status ?? 'not connected'})`,
          ),
        );
      }, timeoutMs);
      timer.unref();
      if (deployId !== null)
        this.#o.operations.waitFor(deployId, { timeoutMs: timeoutMs + 30_000 }).then(
          (op) => {
            if (op.status === 'failed')
              finish(new SvcError('PROVISIONING_ERROR', `the restored agent did not start: ${op.error ?? 'unknown'}`));
          },
          (err: unknown) => finish(err),
        );
      check();
    });
  }

  #poolJson(p: PoolRecord): WarmPool {
    const all = this.#o.store.list().filter((c) => c.pool === p.name);
    const r = this.#refill.get(p.name);
    return {
      pool: p.name,
      target_size: p.targetSize,
      ready_slots: all.filter((c) => c.status === 'reserved').length,
      restoring: all.filter((c) => c.status === 'restoring').length,
      checkpoint_ids: all.filter((c) => c.status === 'reserved').map((c) => c.id),
      handoffs_total: p.handoffsTotal,
      refill: { running: r?.running === true, failures_total: r?.failures ?? 0, last_error: r?.lastError ?? null },
      created_at: new Date(p.createdAtMs).toISOString(),
    };
  }

  #kickRefill(pool: string): void {
    let r = this.#refill.get(pool);
    if (r === undefined) this.#refill.set(pool, (r = { running: false, failures: 0, lastError: null, timer: null }));
    if (r.running || r.timer !== null || this.#stopped) return;
    const state = r;
    state.running = true;
    void this.#refillLoop(pool, state).finally(() => {
      state.running = false;
    });
  }

  async #refillLoop(pool: string, r: RefillState): Promise<void> {
    let delayMs = 5000;
    for (;;) {
      const p = this.#o.store.pool(pool);
      if (p === undefined || this.#stopped || this.#o.store.slots(pool).length >= p.targetSize) return;
      try {
        await this.#refillOne(p);
        delayMs = 5000;
      } catch (err) {
        r.failures++;
        r.lastError = errorMessage(err);
        this.#o.onRefillFailure?.(pool);
        this.#o.logger.warn({ pool, err: r.lastError }, 'warm pool refill failed; retrying');
        r.timer = setTimeout(() => {
          r.timer = null;
          this.#kickRefill(pool);
        }, delayMs);
        r.timer.unref();
        return;
      }
    }
  }

  /** One new slot: a deferred-enrollment VM from the pool's template, booted and checkpointed. */
  async #refillOne(p: PoolRecord): Promise<void> {
    const suffix = randomBytes(4).toString('hex');
    const name = `agent-${p.name}-${suffix}`.slice(0, 63);
    const createId = await this.#o.vms.create({
      name,
      profile: p.template.profile,
      vcpus: p.template.vcpus,
      memoryMiB: p.template.memoryMiB,
      diskGiB: p.template.diskGiB,
      agentshare: false,
      start: true,
      enrollment: 'deferred',
      sshKeys: [],
      warnings: [],
    });
    const created = await this.#o.operations.waitFor(createId, { timeoutMs: this.#o.createTimeoutMs ?? 120_000 });
    if (created.status !== 'completed')
      throw new SvcError('PROVISIONING_ERROR', `refill VM ${name} was not created: ${created.error ?? 'unknown'}`);
    this.#busyVms.add(name);
    try {
      const info = await this.#checkpointable(name);
      const op = this.#o.operations.begin('checkpoint_create', name);
      await this.#take(info, `${p.name}-${suffix}`, op, p.name);
    } finally {
      this.#busyVms.delete(name);
    }
  }
}

function checkpointJson(c: CheckpointRecord): Checkpoint {
  return {
    checkpoint_id: c.id,
    vm: c.vm,
    host: c.host,
    status: c.status,
    pre_enrollment: true,
    pool: c.pool,
    profile: c.template.profile,
    created_at: new Date(c.createdAtMs).toISOString(),
    updated_at: new Date(c.updatedAtMs).toISOString(),
    restored_instance_id: c.restoredInstanceId,
    ...(c.error !== null && { error: c.error }),
  };
}

function objectOf(body: unknown, allowed: readonly string[], what: string): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new SvcError('request.invalid', `${what} must be a JSON object`);
  const rec = body as Record<string, unknown>;
  const unknown = Object.keys(rec).filter((k) => !allowed.includes(k));
  if (unknown.length > 0)
    throw new SvcError(
      'request.invalid',
      `unknown field(s): ${unknown
        .slice(0, 5)
        .map((k) => k.slice(0, 40))
        .join(', ')}`,
    );
  return rec;
}

function parseCreate(body: unknown): { vm: string; checkpointId: string } {
  const rec = objectOf(body, ['vm', 'checkpoint_id', 'pre_enrollment'], 'the body');
  if (rec['pre_enrollment'] !== true) {
    throw new SvcError(
      'checkpoint.pre_enrollment_required',
      'pre_enrollment must be true: only checkpoints taken before the agent enrolled exist',
    );
  }
  const vm = rec['vm'];
  if (typeof vm !== 'string' || vm === '' || vm.length > 63) throw new SvcError('request.invalid', 'vm must be a VM name');
  const id = rec['checkpoint_id'];
  if (typeof id !== 'string' || !CHECKPOINT_ID_RE.test(id)) {
    throw new SvcError('request.invalid', 'checkpoint_id must match ^[a-z0-9][a-z0-9-]{0,62}$');
  }
  return { vm, checkpointId: id };
}

function parseRestore(body: unknown): string | undefined {
  if (body === undefined) return undefined;
  const name = objectOf(body, ['name'], 'the body')['name'];
  if (name === undefined) return undefined;
  if (typeof name !== 'string') throw new SvcError('request.invalid', 'name must be a string');
  return name;
}

function parsePool(body: unknown): { pool: string; checkpointIds: string[]; targetSize?: number } {
  const rec = objectOf(body, ['pool', 'checkpoint_ids', 'target_size'], 'the body');
  const pool = rec['pool'];
  if (typeof pool !== 'string' || !POOL_NAME_RE.test(pool))
    throw new SvcError('request.invalid', 'pool must match ^[a-z0-9][a-z0-9-]{0,39}$');
  const ids = rec['checkpoint_ids'];
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_POOL_SIZE || !ids.every((i) => typeof i === 'string')) {
    throw new SvcError('request.invalid', `checkpoint_ids must be 1 to ${MAX_POOL_SIZE} checkpoint ids`);
  }
  if (new Set(ids).size !== ids.length) throw new SvcError('request.invalid', 'checkpoint_ids must be distinct');
  const size = rec['target_size'];
  if (size !== undefined && (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0 || size > MAX_POOL_SIZE)) {
    throw new SvcError('request.invalid', `target_size must be an integer from 0 to ${MAX_POOL_SIZE}`);
  }
  return { pool, checkpointIds: ids, ...(size !== undefined && { targetSize: size }) };
}
