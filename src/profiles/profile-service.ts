/**
 * Startup profiles (spec 4.13): list, detail, validated create and update, delete, and selection
 * at VM create (the `profile` field of POST /api/v1/vms, through `catalog`).
 *
 * Decisions the spec leaves open (README "Startup profiles and loadouts"):
 * - The built-ins svc-dev and basic are profiles too (listed, readable, selectable) but cannot be
 *   created, changed or deleted: 409 profile.builtin.
 * - Update is a full replacement guarded by the revision: the body's `expected_revision` or an
 *   `If-Match: "<revision>"` header must equal the current one (409 profile.revision_mismatch),
 *   so two editors never silently overwrite each other; one of the two is required. A change
 *   applies to VMs created afterwards; VMs that exist keep what they were created with.
 * - Delete is refused with 409 profile.in_use while the profile is launching a VM (a create that
 *   named it has not finished) or bound to one (a VM created with it exists, whatever its state:
 *   a running VM is bound too). The check and the delete are ordered so a create that looks the
 *   profile up is always seen: its mark is taken in the same turn as the look-up, and marks that
 *   ended are dropped only before the VM list is read.
 */
import { SvcError } from '../core/errors.js';
import type { HypervisorPort } from '../hypervisor/port.js';
import { provisioningMaterial, type ProvisioningMaterial } from '../loadouts/apply.js';
import { loadoutNameOf } from '../loadouts/loadout-record.js';
import type { LoadoutStore } from '../loadouts/loadout-store.js';
import type { StartupCatalog } from '../vms/create-request.js';
import {
  BUILTIN_PROFILES,
  builtinProfile,
  checkProfileName,
  parseProfileBody,
  type ProfileContext,
  type StartupProfile,
} from './profile-record.js';
import type { ProfileStore } from './profile-store.js';

export interface ProfileServiceOptions {
  store: ProfileStore;
  loadouts: LoadoutStore;
  hypervisor: Pick<HypervisorPort, 'list'>;
  /** An operation's status, null when unknown (the operations store). */
  operationStatus: (id: string) => string | null;
  imageRefs: () => readonly string[];
  network: string;
  now?: () => number;
}

interface Hold {
  readonly profile: string;
  readonly vm: string;
  operationId: string | null;
}

const BUILTINS: readonly StartupProfile[] = BUILTIN_PROFILES.map(builtinProfile);

function isBuiltin(name: string): boolean {
  return (BUILTIN_PROFILES as readonly string[]).includes(name);
}

export class ProfileService {
  readonly #o: ProfileServiceOptions;
  readonly #ctx: ProfileContext;
  readonly #holds = new Set<Hold>();
  readonly #now: () => number;

  constructor(o: ProfileServiceOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#ctx = { imageRefs: o.imageRefs, network: o.network, hasLoadout: (n) => o.loadouts.has(n) };
  }

  /** Built-ins first, then the stored profiles by name. */
  list(): StartupProfile[] {
    return [...BUILTINS, ...this.#o.store.list()];
  }

  find(name: string): StartupProfile | undefined {
    return BUILTINS.find((p) => p.name === name) ?? this.#o.store.get(name);
  }

  get(name: string): StartupProfile {
    const p = this.find(name);
    if (p === undefined) throw new SvcError('profile.not_found', `no startup profile named ${JSON.stringify(name.slice(0, 64))}`);
    return p;
  }

  create(body: unknown): StartupProfile {
    const { name, spec } = parseProfileBody(body, this.#ctx, 'create');
    const key = name as string;
    if (isBuiltin(key)) throw new SvcError('profile.builtin', `${key} is a built-in profile`);
    if (this.#o.store.get(key) !== undefined) throw new SvcError('profile.exists', `a startup profile named ${key} exists`);
    const now = this.#now();
    const p: StartupProfile = { ...spec, name: key, builtin: false, revision: 1, createdAtMs: now, updatedAtMs: now };
    this.#o.store.put(p);
    return p;
  }

  /** `ifMatch`: the If-Match header, when sent. */
  update(name: string, body: unknown, ifMatch: string | undefined): StartupProfile {
    checkProfileName(name, 'the path name');
    if (isBuiltin(name)) throw new SvcError('profile.builtin', `${name} is a built-in profile; it cannot be changed`);
    const current = this.get(name);
    const { name: bodyName, spec } = parseProfileBody(body, this.#ctx, 'update');
    if (bodyName !== null && bodyName !== name)
      throw new SvcError('profile.invalid', `name ${bodyName} differs from the path's ${name}; profiles are not renamed`);
    const expected = expectedRevision(body, ifMatch);
    if (expected !== current.revision)
      throw new SvcError(
        'profile.revision_mismatch',
        `${name} is at revision ${current.revision}, not ${expected}: read it again and retry`,
        {
          revision: current.revision,
        },
      );
    const p: StartupProfile = { ...current, ...spec, revision: current.revision + 1, updatedAtMs: this.#now() };
    this.#o.store.put(p);
    return p;
  }

  async delete(name: string): Promise<void> {
    checkProfileName(name, 'the path name');
    if (isBuiltin(name)) throw new SvcError('profile.builtin', `${name} is a built-in profile; it cannot be deleted`);
    this.get(name);
    this.#pruneHolds();
    this.#refuseIfLaunching(name);
    const bound = (await this.#o.hypervisor.list()).filter((d) => d.metadata.profile === name).map((d) => d.name);
    if (bound.length > 0)
      throw new SvcError('profile.in_use', `${name} is bound to VM(s) ${bound.slice(0, 5).join(', ')}${bound.length > 5 ? ', …' : ''}`, {
        vms: bound.slice(0, 20),
      });
    // Creates that looked the profile up while the list was read.
    this.#refuseIfLaunching(name);
    this.get(name);
    this.#o.store.delete(name);
  }

  /** What POST /api/v1/vms selects by (src/vms/create-request.ts). */
  readonly catalog: StartupCatalog = {
    profile: (name) => {
      const p = this.find(name);
      return p === undefined
        ? undefined
        : {
            vcpus: p.vcpus,
            memoryMiB: p.memoryMiB,
            diskGiB: p.diskGiB,
            agentshare: p.agent.agentshare,
            enrollment: p.agent.enrollment,
            loadout: p.loadout,
          };
    },
    loadout: (value) => {
      const name = loadoutNameOf(value);
      return this.#o.loadouts.has(name) ? name : undefined;
    },
    hold: (profile, vm) => {
      const h: Hold = { profile, vm, operationId: null };
      this.#holds.add(h);
      return {
        bind: (id) => {
          h.operationId = id;
        },
        release: () => {
          this.#holds.delete(h);
        },
      };
    },
  };

  /** What a VM created with `loadout` and `profile` gets (src/loadouts/apply.ts); null: nothing. */
  material(loadout: string | null, profile: string): ProvisioningMaterial | null {
    const l = loadout === null ? null : (this.#o.loadouts.get(loadout) ?? null);
    if (loadout !== null && l === null) return null;
    return provisioningMaterial(l, this.find(profile)?.agent.env ?? {});
  }

  /** The VMs being launched with each profile (diagnostics). */
  launching(): { profile: string; vm: string; operation_id: string | null }[] {
    this.#pruneHolds();
    return [...this.#holds].map((h) => ({ profile: h.profile, vm: h.vm, operation_id: h.operationId }));
  }

  #pruneHolds(): void {
    for (const h of this.#holds) {
      if (h.operationId === null) continue;
      const status = this.#o.operationStatus(h.operationId);
      if (status === null || status === 'completed' || status === 'failed') this.#holds.delete(h);
    }
  }

  #refuseIfLaunching(name: string): void {
    const vms = [...this.#holds].filter((h) => h.profile === name).map((h) => h.vm);
    if (vms.length > 0)
      throw new SvcError('profile.in_use', `${name} is launching VM(s) ${vms.slice(0, 5).join(', ')}`, { vms: vms.slice(0, 20) });
  }
}

/** The revision an update expects: the body's expected_revision, else If-Match ("3", 3, W/"3"). */
function expectedRevision(body: unknown, ifMatch: string | undefined): number {
  const fromBody = (body as Record<string, unknown>)['expected_revision'];
  if (fromBody !== undefined) {
    if (typeof fromBody !== 'number' || !Number.isSafeInteger(fromBody) || fromBody < 1)
      throw new SvcError('profile.invalid', 'expected_revision must be a positive integer');
    return fromBody;
  }
  if (ifMatch !== undefined) {
    const m = /^(?:W\/)?"?(\d{1,15})"?$/.exec(ifMatch.trim());
    if (m?.[1] === undefined) throw new SvcError('profile.invalid', 'If-Match must be the profile\'s ETag, e.g. "3"');
    return Number(m[1]);
  }
  throw new SvcError(
    'profile.invalid',
    'expected_revision (or an If-Match header) is required: the revision you read, so no change is lost',
  );
}
