/**
 * Celld (spec 4.13): readiness discovery, the non-mutating commands (validate, preflight, diagnose,
 * plan-upgrade), mutating cell commands through the effect ledger, and reconcile through the
 * fleet. The backend is a port (src/celld/port.ts); the libvirt cell is the one that ships.
 *
 * Gates (README "Celld"): status and validate always answer; every other command needs
 * SVC_CELLD_ENABLED=1 (else 503 celld.disabled) and SVC_CELLD_CELL_ID (else 503
 * celld.not_configured). A ledger entry stays readable whenever a cell id is configured, even with
 * Celld switched off, so an unknown outcome can always be resolved.
 */
import type { Logger } from 'pino';
import { SvcError, isErrorCode } from '../core/errors.js';
import type { Operations, OperationHandle } from '../operations/operation-tracker.js';
import type {
  CellCommandAccepted,
  CellCommandDocument,
  CellCommandRecord,
  CellState,
  CelldCommandName,
  CelldStatus,
  CheckResult,
  DiagnoseFinding,
  DiagnoseReport,
  PreflightReport,
  UpgradePlan,
  ValidateReport,
} from '../wire/celld.js';
import { checkCommand, checkGenerationReconcile, COMMAND_SCHEMA_VERSION, HASH_MISMATCH, type Checked } from './document.js';
import type { EffectLedger } from './effect-ledger.js';
import type { CelldFleetLink } from './fleet-link.js';
import type { CellBackend, VmEffect } from './port.js';

export const CELLD_PROTOCOL = 'sandboxd.celld/v1';
/** How long a Celld reconcile waits for the fleet's reconcile operation. */
const RECONCILE_WAIT_MS = 3_600_000;

export interface CelldSettings {
  readonly enabled: boolean;
  readonly cellId: string | null;
  /** Whether operator calls can arrive over the mTLS admin listener. */
  readonly secureTransport: boolean;
}

export interface CelldServiceOptions {
  readonly settings: CelldSettings;
  readonly backend: CellBackend;
  /** Null when no cell id is configured (nothing to scope a ledger by). */
  readonly ledger: EffectLedger | null;
  readonly operations: Operations;
  /** The fleet inventory, looked up at each call (absent: reconcile through Celld is unavailable). */
  readonly fleet: () => CelldFleetLink | undefined;
  readonly logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Counts each mutating request: accepted (an effect started), replayed, or refused by the ledger. */
  readonly onCommand?: (action: string, outcome: 'accepted' | 'replayed' | 'refused') => void;
}

/** A command's answer: 202 while it runs, 200 for a replay of a finished one. */
export interface CommandAnswer {
  readonly status: 200 | 202;
  readonly body: CellCommandAccepted;
  /** The operation carrying the effect (Location). */
  readonly operationId: string | null;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class CelldService {
  readonly #o: CelldServiceOptions;
  readonly #running = new Set<Promise<void>>();

  constructor(o: CelldServiceOptions) {
    this.#o = o;
  }

  /** Waits for effects still running (stop). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#running]);
  }

  // ------------------------------------------------------------------ readiness

  async status(): Promise<CelldStatus> {
    const { settings, backend } = this.#o;
    const configured = settings.cellId !== null;
    const health: { status: 'ok' | 'degraded' | 'down'; hosts: number } = await backend
      .health()
      .catch(() => ({ status: 'down' as const, hosts: 0 }));
    const listening = backend.agentListening();
    const fleet = this.#o.fleet();
    let readiness: CelldStatus['readiness'];
    let reasonCode: string | null = null;
    let reason: string | null = null;
    if (!settings.enabled) {
      readiness = 'disabled';
      reasonCode = 'celld.disabled';
      reason = 'Celld is off (SVC_CELLD_ENABLED=0): only status and validate answer';
    } else if (!configured) {
      readiness = 'degraded';
      reasonCode = 'celld.not_configured';
      reason = 'SVC_CELLD_CELL_ID is not set: cell commands and reconcile are refused';
    } else if (health.status === 'down') {
      readiness = 'degraded';
      reasonCode = 'celld.hypervisor_unavailable';
      reason = 'no hypervisor host of the cell answers';
    } else if (!listening) {
      readiness = 'degraded';
      reasonCode = 'celld.agent_listener_down';
      reason = 'the agent listener is not listening: new VMs cannot enroll';
    } else if (health.status === 'degraded') {
      readiness = 'degraded';
      reasonCode = 'celld.hypervisor_degraded';
      reason = 'some hypervisor hosts of the cell do not answer';
    } else {
      readiness = settings.secureTransport ? 'secure' : 'ready';
    }
    const open = settings.enabled && configured;
    const commands: Record<CelldCommandName, boolean> = {
      validate: true,
      preflight: open,
      diagnose: open,
      plan_upgrade: open,
      cell_read: configured,
      command: open,
      reconcile: open && fleet !== undefined,
    };
    const revision = revisionOf(fleet);
    return {
      schema_version: 'sandboxd.celld-status/v1',
      enabled: settings.enabled,
      configured,
      cell_id: settings.cellId,
      backend: settings.enabled ? backend.backendClass : null,
      readiness,
      reason_code: reasonCode,
      reason,
      commands,
      versions: { sandboxd: backend.runningVersion(), protocol: CELLD_PROTOCOL, command_schema: COMMAND_SCHEMA_VERSION },
      hypervisor: { status: health.status, hosts: health.hosts, providers: backend.providers() },
      agent_listener: { listening },
      fleet: { linked: fleet !== undefined, inventory_revision: revision },
      secure_transport: settings.secureTransport,
    };
  }

  // ------------------------------------------------------------------ non-mutating commands

  /** Checks a command document; reads nothing but it and the cell id. */
  validate(body: unknown): ValidateReport {
    const c = checkCommand(body, this.#o.settings.cellId);
    if (c.ok) return { valid: true, mutating: false, request_hash: c.hash, problems: [] };
    return { valid: false, mutating: false, request_hash: null, problems: c.problems };
  }

  /** Body `{}` or `{document}`: is the cell ready for it? Reads only. */
  async preflight(body: unknown): Promise<PreflightReport> {
    const cellId = this.#gate();
    if (body !== undefined && body !== null && !isObj(body)) throw new SvcError('request.invalid', 'the body must be a JSON object');
    const doc = isObj(body) ? body['document'] : undefined;
    const extra = isObj(body) ? Object.keys(body).filter((k) => k !== 'document') : [];
    if (extra.length > 0) throw new SvcError('request.invalid', `unknown field ${extra[0] ?? ''}: the body is {} or {document}`);
    const checks: CheckResult[] = [];
    let targets: readonly string[] = [];
    if (doc !== undefined) {
      const c = checkCommand(doc, cellId);
      checks.push({
        name: 'document',
        status: c.ok ? 'pass' : 'fail',
        detail: c.ok ? `valid ${c.value.action} document` : c.problems.map((p) => `${p.path || '/'} ${p.message}`).join('; '),
      });
      if (c.ok) {
        targets = c.value.targets ?? [];
        if (c.value.action === 'reconcile') checks.push(this.#fleetCheck(c.value.generation ?? -1));
      }
    }
    checks.push(...(await this.#o.backend.preflight(targets)));
    return { ok: checks.every((c) => c.status !== 'fail'), mutating: false, cell_id: cellId, checks };
  }

  /** VM/agent mismatches of the cell now. Reads only. */
  async diagnose(): Promise<DiagnoseReport> {
    const cellId = this.#gate();
    const obs = await this.#o.backend.observe();
    const findings: DiagnoseFinding[] = [];
    for (const vm of obs.vms) {
      const agentUp = vm.agentStatus !== null && vm.agentStatus !== 'Disconnected';
      if (vm.state === 'running' && !agentUp) {
        findings.push({
          kind: 'vm_running_without_agent',
          vm: vm.name,
          detail: vm.agentStatus === null ? 'running, no agent of it ever connected' : 'running, its agent is disconnected',
        });
      } else if (vm.state !== 'running' && agentUp) {
        findings.push({
          kind: 'agent_connected_vm_not_running',
          vm: vm.name,
          detail: `VM is ${vm.state}, its agent reports ${vm.agentStatus ?? ''}`,
        });
      } else if (agentUp && (vm.agentStatus === 'Error' || vm.agentStatus === 'Stale')) {
        findings.push({ kind: 'agent_unhealthy', vm: vm.name, detail: `agent status ${vm.agentStatus}` });
      }
    }
    for (const a of obs.strayAgents) {
      if (a.status !== 'Disconnected')
        findings.push({ kind: 'agent_without_vm', vm: a.id, detail: `agent ${a.status}, no VM of this cell has its name` });
    }
    return {
      healthy: findings.length === 0 && obs.hypervisor.status === 'ok',
      mutating: false,
      cell_id: cellId,
      observed_at: new Date(obs.observedAtMs).toISOString(),
      vms: obs.vms.length,
      agents: obs.vms.filter((v) => v.agentStatus !== null).length + obs.strayAgents.length,
      findings,
    };
  }

  /** Body {to}: what moving the cell from the running version to `to` takes. Reads only. */
  async planUpgrade(body: unknown): Promise<UpgradePlan> {
    const cellId = this.#gate();
    if (!isObj(body) || typeof body['to'] !== 'string' || Object.keys(body).some((k) => k !== 'to')) {
      throw new SvcError('request.invalid', 'the body is {to: "<version>"}, e.g. {"to": "0.2.0"}');
    }
    const toText = body['to'];
    const from = this.#o.backend.runningVersion();
    const to = parseVersion(toText);
    if (to === null)
      throw new SvcError('request.invalid', `to: ${JSON.stringify(toText.slice(0, 64))} is not a version (MAJOR.MINOR.PATCH)`);
    const cur = parseVersion(from) ?? [0, 0, 0];
    const obs = await this.#o.backend.observe();
    const running = obs.vms.filter((v) => v.state === 'running').length;
    const agents = obs.vms.filter((v) => v.agentStatus !== null && v.agentStatus !== 'Disconnected').length;
    const base = {
      mutating: false as const,
      cell_id: cellId,
      from,
      to: toText.replace(/^v/, ''),
      running_vms: running,
      connected_agents: agents,
    };
    const cmp = compareVersions(to, cur);
    if (cmp === 0) return { ...base, kind: 'none', qualified: true, reason: null, steps: [] };
    if (to[0] !== cur[0] || (cur[0] === 0 && to[1] !== cur[1] && cmp < 0)) {
      return {
        ...base,
        kind: 'refused',
        qualified: false,
        reason:
          to[0] !== cur[0]
            ? 'a major version change may change the durable stores and the wire: it needs its release notes, not a generated plan'
            : 'a downgrade across 0.x minor versions: stores written by the newer version refuse to open in the older',
        steps: [],
      };
    }
    if (cmp < 0) {
      return {
        ...base,
        kind: 'downgrade',
        qualified: false,
        reason: 'a store whose schema the newer version raised refuses to open in the older one: check the release notes first',
        steps: this.#steps(cellId, toText, running, agents),
      };
    }
    return { ...base, kind: 'upgrade', qualified: true, reason: null, steps: this.#steps(cellId, toText, running, agents) };
  }

  // ------------------------------------------------------------------ scoped reads

  /** GET /cells/{cell}: what the cell holds now. */
  async cell(cellId: string): Promise<CellState> {
    this.#gate();
    this.#scope(cellId);
    const obs = await this.#o.backend.observe();
    const counts = this.#ledger().counts();
    const revision = revisionOf(this.#o.fleet());
    return {
      cell_id: cellId,
      backend: this.#o.backend.backendClass,
      observed_at: new Date(obs.observedAtMs).toISOString(),
      vms: obs.vms.map((v) => ({ name: v.name, state: v.state, agent: v.agentStatus })),
      inventory_revision: revision,
      commands: {
        total: Object.values(counts).reduce((a, b) => a + b, 0),
        unknown: counts.unknown,
        running: counts.accepted + counts.running,
      },
    };
  }

  /**
   * GET /cells/{cell}/commands/{operation_id}: the ledger entry, how a client learns whether a
   * command whose answer it lost took effect. Needs only a configured cell id.
   */
  record(cellId: string, operationId: string): CellCommandRecord {
    this.#scope(cellId);
    const r = operationId.length <= 128 ? this.#ledger().get(operationId) : undefined;
    if (r === undefined) {
      throw new SvcError(
        'celld.command_not_found',
        `no command ${JSON.stringify(operationId.slice(0, 128))} was accepted in cell ${cellId}: it had no effect, and sending it is safe`,
      );
    }
    return r;
  }

  // ------------------------------------------------------------------ mutating commands

  command(cellId: string, body: unknown, actor: string): CommandAnswer {
    this.#gate();
    this.#scope(cellId);
    const c = checkCommand(body, cellId);
    if (!c.ok) throw invalid(c);
    const doc = c.value;
    if (doc.action === 'reconcile') this.#needFleet();
    const { request_hash: _h, ...request } = doc;
    const claim = this.#ledger().claim({
      operationId: doc.operation_id,
      cellId,
      action: doc.action,
      kind: 'document',
      requestHash: c.hash,
      request,
      actor,
    });
    if (!claim.claimed) {
      try {
        const replay = this.#replay(claim.record, c.hash);
        this.#o.onCommand?.(doc.action, 'replayed');
        return replay;
      } catch (err) {
        this.#o.onCommand?.(doc.action, 'refused');
        throw err;
      }
    }
    this.#o.onCommand?.(doc.action, 'accepted');
    return this.#launch(doc.operation_id, cellId, (op) =>
      doc.action === 'reconcile'
        ? this.#reconcile(doc.generation ?? 0, doc.dry_run ?? false, actor, op)
        : this.#vmEffects(doc.action, doc.targets ?? [], op),
    );
  }

  /** POST /cells/{cell}/reconcile {operation_id, generation}: runs once, is never replayed. */
  reconcileGeneration(cellId: string, body: unknown, actor: string): CommandAnswer {
    this.#gate();
    this.#scope(cellId);
    const c = checkGenerationReconcile(body);
    if (!c.ok) throw invalid(c);
    const { operation_id: operationId, generation } = c.value;
    const earlier = this.#ledger().get(operationId);
    if (earlier !== undefined) {
      this.#o.onCommand?.('reconcile', 'refused');
      throw refusal(earlier);
    }
    this.#needFleet();
    const claim = this.#ledger().claim({
      operationId,
      cellId,
      action: 'reconcile',
      kind: 'generation_only',
      requestHash: c.hash,
      request: { operation_id: operationId, generation },
      actor,
    });
    if (!claim.claimed) throw refusal(claim.record);
    this.#o.onCommand?.('reconcile', 'accepted');
    return this.#launch(operationId, cellId, (op) => this.#reconcile(generation, false, actor, op));
  }

  #replay(record: CellCommandRecord, hash: string): CommandAnswer {
    if (!record.replayable || record.request_hash !== hash) throw refusal(record);
    const finished = record.status === 'succeeded' || record.status === 'failed' || record.status === 'unknown';
    return { status: finished ? 200 : 202, body: { replayed: true, command: record }, operationId: record.management_operation_id };
  }

  #launch(
    operationId: string,
    cellId: string,
    effect: (op: OperationHandle) => Promise<{ ok: boolean; outcome: Record<string, unknown>; error?: { code: string; message: string } }>,
  ): CommandAnswer {
    const ledger = this.#ledger();
    const op = this.#o.operations.begin('celld_command', cellId);
    ledger.started(operationId, op.id);
    op.start();
    const run = (async () => {
      try {
        const r = await effect(op);
        ledger.finished(operationId, r.ok, r.outcome, r.error);
        if (r.ok) op.complete({ operation_id: operationId, ...r.outcome });
        else op.fail(asSvcError(r.error));
      } catch (err) {
        const error = wireOf(err);
        try {
          ledger.finished(operationId, false, null, error);
        } catch (ledgerErr) {
          this.#o.logger?.error({ operationId, err: ledgerErr }, 'the effect ledger could not record a failed command');
        }
        op.fail(asSvcError(error));
        this.#o.logger?.warn({ operationId, code: error.code }, 'celld command failed');
      }
    })();
    this.#running.add(run);
    void run.finally(() => this.#running.delete(run));
    const record = ledger.get(operationId);
    if (record === undefined) throw new Error(`effect ledger lost ${operationId}`);
    return { status: 202, body: { replayed: false, command: record }, operationId: op.id };
  }

  async #vmEffects(
    action: VmEffect,
    targets: readonly string[],
    op: OperationHandle,
  ): Promise<{ ok: boolean; outcome: Record<string, unknown>; error?: { code: string; message: string } }> {
    const effects: Record<string, unknown>[] = [];
    let firstError: { code: string; message: string } | undefined;
    for (const [i, vm] of targets.entries()) {
      try {
        const r = await this.#o.backend.apply(action, vm);
        effects.push({ vm, outcome: r.outcome, state: r.state });
      } catch (err) {
        const error = wireOf(err);
        firstError ??= error;
        effects.push({ vm, outcome: 'failed', error });
      }
      op.progress(Math.floor(((i + 1) * 99) / targets.length));
    }
    return {
      ok: firstError === undefined,
      outcome: { action, effects },
      ...(firstError !== undefined && { error: firstError }),
    };
  }

  async #reconcile(
    generation: number,
    dryRun: boolean,
    actor: string,
    op: OperationHandle,
  ): Promise<{ ok: boolean; outcome: Record<string, unknown>; error?: { code: string; message: string } }> {
    const fleet = this.#needFleet();
    const started = await fleet.startReconcile({ beforeRevision: generation, dryRun, actor });
    if ('plan' in started) return { ok: true, outcome: { action: 'reconcile', generation, dry_run: true, plan: started.plan } };
    op.progress(10);
    const done = await this.#o.operations.waitFor(started.operationId, { timeoutMs: RECONCILE_WAIT_MS });
    const outcome = {
      action: 'reconcile',
      generation,
      dry_run: false,
      fleet_operation_id: started.operationId,
      fleet_status: done.status,
      result: done.result ?? null,
    };
    if (done.status === 'completed') return { ok: true, outcome };
    return {
      ok: false,
      outcome,
      error: { code: done.error_code ?? 'server.internal', message: done.error ?? 'the fleet reconcile failed' },
    };
  }

  #fleetCheck(generation: number): CheckResult {
    const fleet = this.#o.fleet();
    if (fleet === undefined)
      return { name: 'fleet', status: 'fail', detail: 'the fleet inventory is not running: reconcile is unavailable' };
    const current = fleet.inventoryRevision();
    return current === generation
      ? { name: 'fleet', status: 'pass', detail: `generation ${generation} is the current inventory revision` }
      : { name: 'fleet', status: 'fail', detail: `generation ${generation} is stale: the inventory is at revision ${current}` };
  }

  #steps(cellId: string, to: string, running: number, agents: number): string[] {
    return [
      `POST /api/v2/celld/preflight: every check passes`,
      `wait until no command runs in cell ${cellId} (GET /api/v2/celld/cells/${cellId}: commands.running is 0)`,
      `stop sandboxd (SIGTERM): its ${running} running VM(s) keep running; ${agents} connected agent(s) buffer their output and reconnect`,
      `install sandboxd ${to.replace(/^v/, '')} and start it with the same SVC_STATE_DIR`,
      `GET /api/v2/celld/status: readiness ready or secure, versions.sandboxd ${to.replace(/^v/, '')}`,
      `POST /api/v2/celld/diagnose: no finding that was not there before`,
    ];
  }

  #gate(): string {
    const { enabled, cellId } = this.#o.settings;
    if (!enabled)
      throw new SvcError('celld.disabled', 'Celld is off: set SVC_CELLD_ENABLED=1 (and SVC_CELLD_CELL_ID) to use cell commands');
    if (cellId === null) throw new SvcError('celld.not_configured', 'Celld is enabled but SVC_CELLD_CELL_ID is not set');
    return cellId;
  }

  #scope(cellId: string): void {
    const own = this.#o.settings.cellId;
    if (own === null) throw new SvcError('celld.not_configured', 'SVC_CELLD_CELL_ID is not set: there is no cell to read');
    if (cellId !== own)
      throw new SvcError('celld.cell_not_found', `this server is cell ${own}, not ${JSON.stringify(cellId.slice(0, 64))}`);
  }

  #ledger(): EffectLedger {
    const l = this.#o.ledger;
    if (l === null) throw new SvcError('celld.not_configured', 'SVC_CELLD_CELL_ID is not set: there is no effect ledger');
    return l;
  }

  #needFleet(): CelldFleetLink {
    const f = this.#o.fleet();
    if (f === undefined)
      throw new SvcError('celld.fleet_unavailable', 'reconcile through Celld needs the fleet inventory, which this server does not run');
    return f;
  }
}

/** The fleet's revision, null without a fleet or when it cannot answer. */
function revisionOf(fleet: CelldFleetLink | undefined): number | null {
  try {
    return fleet?.inventoryRevision() ?? null;
  } catch {
    return null;
  }
}

function invalid(c: Extract<Checked<unknown>, { ok: false }>): SvcError {
  if (c.problems.length === 1 && c.problems[0]?.message === HASH_MISMATCH) {
    return new SvcError('celld.request_hash_mismatch', `request_hash ${HASH_MISMATCH}`);
  }
  const first = c.problems[0];
  return new SvcError(
    'celld.document_invalid',
    `${first === undefined ? '' : `${first.path || '/'}: ${first.message}`}${c.problems.length > 1 ? ` (and ${c.problems.length - 1} more)` : ''}`,
    { problems: c.problems },
  );
}

/** The refusal of a request whose operation_id the ledger already holds. */
function refusal(record: CellCommandRecord): SvcError {
  const where = `GET /api/v2/celld/cells/${record.cell_id}/commands/${record.operation_id}`;
  if (!record.replayable) {
    return new SvcError(
      'celld.replay_refused',
      `operation ${record.operation_id} is a generation-only reconcile: it is never replayed (a generation names an inventory state, not an effect); read ${where} for its outcome`,
      { operation_id: record.operation_id, status: record.status },
    );
  }
  return new SvcError(
    'celld.operation_conflict',
    `operation ${record.operation_id} is bound to another document (request_hash ${record.request_hash}); read ${where}`,
    { operation_id: record.operation_id, request_hash: record.request_hash },
  );
}

function wireOf(err: unknown): { code: string; message: string } {
  if (err instanceof SvcError) return { code: err.code, message: err.message };
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e !== null && typeof e === 'object' && typeof e.code === 'string' && typeof e.message === 'string')
    return { code: e.code, message: e.message };
  return { code: 'server.internal', message: 'internal error' };
}

function asSvcError(e: { code: string; message: string } | undefined): SvcError {
  if (e === undefined) return new SvcError('server.internal', 'the command failed');
  return new SvcError(isErrorCode(e.code) ? e.code : 'server.internal', e.message);
}

/** MAJOR.MINOR.PATCH with an optional leading v and pre-release/build suffix; null otherwise. */
export function parseVersion(v: string): [number, number, number] | null {
  const m = /^v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})(?:[-+][0-9A-Za-z.+-]{1,64})?$/.exec(v.trim());
  return m === null ? null : [Number(m[1]), Number(m[2]), Number(m[3])];
}

function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

export type { CellCommandDocument };
