/**
 * Managed desktop sessions (spec 4.15, parts 2, 3, 5): the seven operations of the desktop routes
 * and the grant-redeem step the backend port uses. Every method takes the verified caller
 * (subject + workspace of the delegation token) and throws SvcError with a desktop problem code.
 *
 * Ownership: an enrollment belongs to the workspace that made it first; a resource to the
 * (workspace, subject) that created it. Anything else is 403 access_denied, the same answer as an
 * unknown id (existence is not disclosed).
 *
 * All store calls are synchronous: each operation's checks and writes run in one turn of the event
 * loop, so twenty concurrent identical creates find one binding after the first inserted it.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import type { EventStore } from '../events/event-store.js';
import {
  DESKTOP_SCHEMA_VERSION,
  type DesktopCapability,
  type DesktopEnrollment,
  type DesktopGrant,
  type DesktopObserved,
  type DesktopPolicy,
  type DesktopResource,
} from '../wire/desktop.js';
import type { DesktopBackend, DesktopBackendHooks, RedeemedGrant } from './backend.js';
import { CLEANUP_TABLE, DESIRED_TABLE, moveDesktop, OBSERVED_TABLE } from './desktop-state.js';
import type { DesktopStore, GrantAction, ResourceRecord } from './desktop-store.js';
import type { DesktopCaller } from './token-authority.js';
import { parseClose, parseCreate, parseEnrollment } from './requests.js';

/** The authorization epoch of a resource (spec part 8): eight hours from its create. */
export const AUTHORIZATION_EPOCH_MS = 8 * 3600 * 1000;
/** How long a grant may wait for its redeem (never past the resource's absolute expiry). */
export const DEFAULT_GRANT_TTL_MS = 60_000;

/** The policy a new resource gets (and the capability shows): observe and control, nothing else. */
export const DEFAULT_POLICY: DesktopPolicy = Object.freeze({
  observe: true,
  control: true,
  sharing: false,
  clipboard_copy: false,
  clipboard_paste: false,
  file_transfer: false,
  audio: false,
  recording: false,
  isolation_tier: 'vm',
  generation: 1,
});

export interface DesktopServiceOptions {
  readonly store: DesktopStore;
  readonly backend: DesktopBackend;
  readonly logger: Logger;
  readonly grantTtlMs?: number;
  /** Clock, Unix ms. Default Date.now (tests move it past an absolute expiry). */
  readonly now?: () => number;
  /** Where `desktop.*` events go (never a token or a grant). */
  readonly events?: EventStore;
}

const denied = (detail = 'no such resource for this caller'): SvcError => new SvcError('access_denied', detail);

const grantSha256 = (grant: string): string => createHash('sha256').update(grant).digest('hex');

export class DesktopService {
  readonly #store: DesktopStore;
  readonly #backend: DesktopBackend;
  readonly #log: Logger;
  readonly #grantTtlMs: number;
  readonly #now: () => number;
  readonly #events: EventStore | undefined;

  constructor(opts: DesktopServiceOptions) {
    this.#store = opts.store;
    this.#backend = opts.backend;
    this.#log = opts.logger;
    this.#grantTtlMs = opts.grantTtlMs ?? DEFAULT_GRANT_TTL_MS;
    this.#now = opts.now ?? Date.now;
    this.#events = opts.events;
  }

  /** What the backend gets at start: the redeem step and its reports. */
  hooks(): DesktopBackendHooks {
    return {
      redeem: (grant) => this.redeem(grant),
      observe: (id, observed, cause) => this.#observe(id, observed, cause),
      cleanupFinished: (id, ok) => this.#cleanupFinished(id, ok),
    };
  }

  capability(caller: DesktopCaller, instanceId: string): DesktopCapability {
    const enrollment = this.#store.enrollment(instanceId);
    if (enrollment !== undefined && enrollment.workspace !== caller.workspace) throw denied('no such instance for this caller');
    const c = this.#backend.capability(instanceId, enrollment);
    return {
      schema_version: DESKTOP_SCHEMA_VERSION,
      supported: c.supported,
      readiness: c.readiness,
      reason_codes: [...c.reasonCodes],
      instance_id: instanceId,
      incarnation: enrollment?.incarnation ?? null,
      policy: { ...DEFAULT_POLICY },
    };
  }

  enroll(caller: DesktopCaller, instanceId: string, body: unknown): DesktopEnrollment {
    const req = parseEnrollment(body);
    const current = this.#store.enrollment(instanceId);
    if (current !== undefined && current.workspace !== caller.workspace) throw denied('no such instance for this caller');
    const revision = current?.revision ?? 0;
    if (req.expectedRevision !== undefined && req.expectedRevision !== revision) {
      throw new SvcError('enrollment_conflict', `expected_revision ${req.expectedRevision} is not the current revision ${revision}`);
    }
    if (
      current !== undefined &&
      current.incarnation === req.incarnation &&
      current.sshAddress === req.sshAddress &&
      current.sshHostKey === req.sshHostKey
    ) {
      // The same enrollment again (a retry): nothing changes, no new revision.
      return { instance_id: instanceId, incarnation: current.incarnation, revision };
    }
    this.#store.putEnrollment({
      instanceId,
      workspace: caller.workspace,
      incarnation: req.incarnation,
      sshAddress: req.sshAddress,
      sshHostKey: req.sshHostKey,
      revision: revision + 1,
      updatedAtMs: this.#now(),
    });
    this.#log.info({ instance: instanceId, revision: revision + 1, workspace: caller.workspace }, 'desktop enrollment recorded');
    this.#emit('desktop.enrolled', instanceId, { incarnation: req.incarnation, revision: revision + 1, workspace: caller.workspace });
    return { instance_id: instanceId, incarnation: req.incarnation, revision: revision + 1 };
  }

  create(caller: DesktopCaller, instanceId: string, body: unknown): DesktopResource {
    const { idempotencyKey } = parseCreate(body);
    const enrollment = this.#store.enrollment(instanceId);
    if (enrollment !== undefined && enrollment.workspace !== caller.workspace) throw denied('no such instance for this caller');
    if (enrollment === undefined) throw new SvcError('resource_conflict', 'the instance has no desktop enrollment');
    const bound = this.#store.binding(caller.workspace, caller.subject, idempotencyKey);
    if (bound !== undefined) {
      if (
        bound.instanceId !== instanceId ||
        bound.incarnation !== enrollment.incarnation ||
        bound.enrollmentRevision !== enrollment.revision
      ) {
        throw new SvcError('resource_conflict', 'this idempotency_key is bound to another instance, incarnation or enrollment revision');
      }
      // The same resource as first created, whatever happened to it since: a closed (revoked)
      // resource stays closed, its epoch is the original one.
      const existing = this.#store.resource(bound.desktopId);
      if (existing === undefined) throw new SvcError('server.internal', 'a desktop binding names a missing resource');
      return view(existing);
    }
    const nowMs = this.#now();
    const resource: ResourceRecord = {
      desktopId: `desktop_${randomBytes(16).toString('hex')}`,
      workspace: caller.workspace,
      subject: caller.subject,
      instanceId,
      incarnation: enrollment.incarnation,
      enrollmentRevision: enrollment.revision,
      epochMs: nowMs,
      absoluteExpiresMs: nowMs + AUTHORIZATION_EPOCH_MS,
      generation: 1,
      desired: 'active',
      observed: 'unknown',
      cleanup: 'none',
      fenced: false,
      updatedAtMs: nowMs,
    };
    this.#store.insertResource(resource, DEFAULT_POLICY, idempotencyKey);
    this.#log.info({ desktop: resource.desktopId, instance: instanceId, workspace: caller.workspace }, 'desktop resource created');
    this.#emit('desktop.created', instanceId, { desktop_id: resource.desktopId, workspace: caller.workspace, subject: caller.subject });
    return view(resource);
  }

  get(caller: DesktopCaller, desktopId: string): DesktopResource {
    return view(this.#owned(caller, desktopId));
  }

  /** Attach or reconnect (the action is the route's): a one-use grant. */
  grant(caller: DesktopCaller, desktopId: string, action: GrantAction): DesktopGrant {
    const r = this.#owned(caller, desktopId);
    if (r.desired !== 'active' || r.fenced) throw new SvcError('resource_conflict', 'the desktop session is closed');
    const nowMs = this.#now();
    if (nowMs >= r.absoluteExpiresMs) throw denied('the authorization epoch of this desktop session has ended');
    const grant = `dgr_${randomBytes(32).toString('base64url')}`;
    // Reconnect never extends the absolute expiry: neither does a grant's own lifetime.
    const expiresAtMs = Math.min(nowMs + this.#grantTtlMs, r.absoluteExpiresMs);
    this.#store.insertGrant(grantSha256(grant), { desktopId, action, generation: r.generation, expiresAtMs });
    this.#log.info({ desktop: desktopId, action }, 'desktop grant issued');
    this.#emit('desktop.grant_issued', r.instanceId, { desktop_id: desktopId, action, expires_at: new Date(expiresAtMs).toISOString() });
    return { schema_version: DESKTOP_SCHEMA_VERSION, grant, expires_at: new Date(expiresAtMs).toISOString() };
  }

  close(caller: DesktopCaller, desktopId: string, body: unknown): { status: 200 | 202; resource: DesktopResource } {
    const req = parseClose(body);
    const before = this.#owned(caller, desktopId);
    let r = before;
    if (req.expectedGeneration !== r.generation) {
      throw new SvcError(
        'resource_conflict',
        `expected_generation ${req.expectedGeneration} is not the current generation ${r.generation}`,
      );
    }
    let desired = r.desired;
    let generation = r.generation;
    let cleanup = r.cleanup;
    if (moveDesktop('desired', DESIRED_TABLE, desktopId, r.desired, ['active'], 'closed', 'close', this.#log) !== null) {
      desired = 'closed';
      generation += 1;
    }
    const signOut =
      req.signOut && moveDesktop('cleanup', CLEANUP_TABLE, desktopId, r.cleanup, ['none'], 'pending', 'sign_out', this.#log) !== null;
    if (signOut) cleanup = 'pending';
    r = { ...r, desired, generation, cleanup, fenced: true, updatedAtMs: this.#now() };
    this.#store.updateResource(r);
    if (desired !== before.desired || signOut) {
      this.#emit('desktop.closed', r.instanceId, { desktop_id: desktopId, generation, sign_out: req.signOut, cleanup });
    }
    if (signOut) this.#backend.requestSignOut(desktopId);
    return { status: r.cleanup === 'pending' ? 202 : 200, resource: view(r) };
  }

  /** The grant-redeem step (backend port): usable once, see DesktopBackendHooks.redeem. */
  redeem(grant: string): RedeemedGrant | null {
    if (typeof grant !== 'string' || grant.length === 0 || grant.length > 256) return null;
    const nowMs = this.#now();
    const g = this.#store.consumeGrant(grantSha256(grant), nowMs);
    if (g === undefined) return null;
    const r = this.#store.resource(g.desktopId);
    if (r === undefined || r.desired !== 'active' || r.fenced || r.generation !== g.generation || nowMs >= r.absoluteExpiresMs) return null;
    const enrollment = this.#store.enrollment(r.instanceId);
    if (enrollment === undefined || enrollment.incarnation !== r.incarnation) return null;
    this.#log.info({ desktop: r.desktopId, action: g.action }, 'desktop grant redeemed');
    this.#emit('desktop.grant_redeemed', r.instanceId, { desktop_id: r.desktopId, action: g.action });
    return {
      desktopId: r.desktopId,
      action: g.action,
      instanceId: r.instanceId,
      incarnation: r.incarnation,
      generation: r.generation,
      sshAddress: enrollment.sshAddress,
      sshHostKey: enrollment.sshHostKey,
    };
  }

  /** Drops grants expired for a minute (nothing can redeem them). */
  pruneGrants(): void {
    this.#store.pruneGrants(this.#now() - 60_000);
  }

  #emit(type: string, instanceId: string, details: Record<string, unknown>): void {
    this.#events?.append({ event_type: type, vm_name: instanceId, details });
  }

  #owned(caller: DesktopCaller, desktopId: string): ResourceRecord {
    const r = /^desktop_[0-9a-f]{32}$/.test(desktopId) ? this.#store.resource(desktopId) : undefined;
    if (r === undefined || r.workspace !== caller.workspace || r.subject !== caller.subject) throw denied();
    return r;
  }

  #observe(desktopId: string, observed: DesktopObserved, cause: string): void {
    const r = this.#store.resource(desktopId);
    if (r === undefined) return;
    const from = (Object.keys(OBSERVED_TABLE) as DesktopObserved[]).filter((s) => s !== observed);
    if (moveDesktop('observed', OBSERVED_TABLE, desktopId, r.observed, from, observed, cause, this.#log) !== null) {
      this.#store.updateResource({ ...r, observed, updatedAtMs: this.#now() });
      this.#emit('desktop.observed', r.instanceId, { desktop_id: desktopId, observed, cause });
    }
  }

  #cleanupFinished(desktopId: string, ok: boolean): void {
    const r = this.#store.resource(desktopId);
    if (r === undefined) return;
    const to = ok ? 'done' : 'failed';
    if (moveDesktop('cleanup', CLEANUP_TABLE, desktopId, r.cleanup, ['pending'], to, 'sign_out_finished', this.#log) !== null) {
      this.#store.updateResource({ ...r, cleanup: to, updatedAtMs: this.#now() });
      this.#emit('desktop.cleanup', r.instanceId, { desktop_id: desktopId, cleanup: to });
    }
  }
}

function view(r: ResourceRecord): DesktopResource {
  return {
    schema_version: DESKTOP_SCHEMA_VERSION,
    desktop_id: r.desktopId,
    instance_id: r.instanceId,
    incarnation: r.incarnation,
    authorization_epoch: new Date(r.epochMs).toISOString(),
    absolute_expires_at: new Date(r.absoluteExpiresMs).toISOString(),
    generation: r.generation,
    desired: r.desired,
    observed: r.observed,
    cleanup: r.cleanup,
    fenced: r.fenced,
  };
}
