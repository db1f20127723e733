/**
 * Validation of VM request bodies (spec 4.3). Every failure is a 400 naming the field.
 *
 * POST /api/v1/vms
 * | field      | rule                                                                  | default |
 * |------------|-----------------------------------------------------------------------|---------|
 * | name       | required; ^agent-[a-z0-9-]+$, at most 63 characters (INVALID_VM_NAME)  |         |
 * | profile    | svc-dev or basic                                                      | svc-dev |
 * | vcpus      | integer 1-64                                                          | 4       |
 * | memory_mb  | integer 256-262144 (256 MiB - 256 GiB)                                | 8192    |
 * | disk_gb    | integer 1-2048                                                        | 50      |
 * | agentshare | boolean                                                               | true    |
 * | start      | boolean                                                               | true    |
 * | ssh_key    | one OpenSSH public key line (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa ≥ 2048 bits), ≤ 8 KiB | none |
 * | enrollment | `mtls` (the agent gets its certificate at provisioning and connects) or `deferred` (ours: the VM boots but its agent waits for bootstrap material, so it can be checkpointed before enrollment, spec 4.10) | mtls |
 * Unknown fields are refused (request.invalid), so a typo never silently becomes a default.
 *
 * The reference implementation's dashboard also sends `loadout` and `composition` (AI tooling it
 * provisions) and `profile: ""`. `profile: ""` is the default profile; an empty or null value of
 * the others is nothing asked for. A non-empty `composition` is refused with a 400 that says so,
 * never silently dropped.
 *
 * Startup profiles and loadouts (README "Startup profiles and loadouts"), when the server runs the
 * profiles component (a `catalog` is given): `profile` names a startup profile (the built-ins or
 * one of /api/v2/startup-profiles; 400 profile.unknown otherwise) whose vcpus, memory_mb, disk_gb,
 * agentshare, enrollment and loadout are the defaults of this request; fields the request sets
 * override them. `loadout` names a loadout (400 loadout.unknown otherwise) and overrides the
 * profile's. Without a catalog (a server started without that component) only the built-ins
 * exist and a non-empty loadout is refused.
 *
 * ssh_key policy (spec: "managed svc-dev provisioning omits such keys unless
 * SVC_ENABLE_DIRECT_RUNTIME_SSH=1"): the key is always validated; for profile basic, or svc-dev
 * with the flag, it is installed; for svc-dev without the flag it is omitted and the 202 answer
 * carries a `warnings` entry saying so (the request still succeeds, as the spec says "omits").
 *
 * POST /api/v1/vms/{name}/restart: mode graceful|hard (default graceful); timeout_seconds
 * integer 0-3600 (default 60: how long a graceful restart waits for the guest before forcing).
 */
import sshpk from 'sshpk';
import { SvcError } from '../core/errors.js';

export const VM_NAME_RE = /^agent-[a-z0-9-]+$/;
export const VM_NAME_MAX = 63;
export const PROFILES = ['svc-dev', 'basic'] as const;
/** A profile name: a built-in or a startup profile's. */
export type Profile = string;

/** What a startup profile sets for a create (src/profiles). */
export interface ResolvedProfile {
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
  readonly agentshare: boolean;
  readonly enrollment: 'mtls' | 'deferred';
  readonly loadout: string | null;
}

/** The startup profiles and loadouts a create may name (the profiles component). */
export interface StartupCatalog {
  /** The profile of this name (built-ins included), undefined when there is none. */
  profile(name: string): ResolvedProfile | undefined;
  /** The name of the loadout `value` names (a name, or the reference dashboard's path of one); undefined when none. */
  loadout(value: string): string | undefined;
  /**
   * Marks profile `profile` as launching VM `vm` (deleting it is refused meanwhile): `bind` names
   * the create's operation once accepted (the mark ends with it), `release` ends the mark when the
   * create was refused.
   */
  hold(profile: string, vm: string): { bind(operationId: string): void; release(): void };
}
export const LIMITS = {
  vcpus: { min: 1, max: 64, default: 4 },
  memory_mb: { min: 256, max: 262_144, default: 8192 },
  disk_gb: { min: 1, max: 2048, default: 50 },
} as const;
export const SSH_KEY_MAX_BYTES = 8192;
export const RESTART_TIMEOUT_MAX_SECONDS = 3600;

export interface CreateVmRequest {
  name: string;
  profile: Profile;
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  agentshare: boolean;
  start: boolean;
  /** `deferred`: the agent is not given an identity at provisioning (see the file comment). */
  enrollment: 'mtls' | 'deferred';
  /** Keys to install after the policy. */
  sshKeys: string[];
  /** Things the caller should know (an omitted ssh_key). */
  warnings: string[];
  /** The loadout to apply at provisioning (the request's, else the profile's). */
  loadout?: string;
}

const CREATE_FIELDS = new Set([
  'name',
  'profile',
  'vcpus',
  'memory_mb',
  'disk_gb',
  'agentshare',
  'start',
  'ssh_key',
  'enrollment',
  'loadout',
  'composition',
]);
/** Fields of the reference's create body that sandboxd accepts only empty (see the file comment); `loadout` too without a catalog. */
const EMPTY_ONLY_FIELDS = ['loadout', 'composition'] as const;
const RESTART_FIELDS = new Set(['mode', 'timeout_seconds']);

function invalid(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

function objectBody(body: unknown, allowed: Set<string>, what: string): Record<string, unknown> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid(`${what} must be a JSON object`);
  const rec = body as Record<string, unknown>;
  const unknown = Object.keys(rec).filter((k) => !allowed.has(k));
  if (unknown.length > 0)
    throw invalid(
      `unknown field(s): ${unknown
        .slice(0, 5)
        .map((k) => k.slice(0, 40))
        .join(', ')}`,
    );
  return rec;
}

function intField(rec: Record<string, unknown>, field: keyof typeof LIMITS, dflt: number = LIMITS[field].default): number {
  const v = rec[field];
  const lim = LIMITS[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < lim.min || v > lim.max)
    throw invalid(`${field} must be an integer from ${lim.min} to ${lim.max}`);
  return v;
}

function boolField(rec: Record<string, unknown>, field: string, dflt: boolean): boolean {
  const v = rec[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw invalid(`${field} must be true or false`);
  return v;
}

function enrollmentField(v: unknown, dflt: 'mtls' | 'deferred' = 'mtls'): 'mtls' | 'deferred' {
  if (v === undefined) return dflt;
  if (v === 'mtls') return 'mtls';
  if (v === 'deferred') return 'deferred';
  throw invalid('enrollment must be mtls or deferred');
}

/** Checks a VM name for create: INVALID_VM_NAME with the rule. */
export function checkVmName(name: unknown): string {
  if (name === undefined) throw invalid('name is required');
  if (typeof name !== 'string') throw invalid('name must be a string');
  if (name.length > VM_NAME_MAX || !VM_NAME_RE.test(name)) {
    throw new SvcError('INVALID_VM_NAME', `name must match ^agent-[a-z0-9-]+$ and be at most ${VM_NAME_MAX} characters`);
  }
  return name;
}

const KEY_LINE_RE =
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521) ([A-Za-z0-9+/]+={0,2})(?: ([^\r\n]*))?$/;

/** An OpenSSH public key line, normalised to `type base64 [comment]`; request.invalid otherwise. */
export function parseSshPublicKey(raw: unknown): string {
  if (typeof raw !== 'string') throw invalid('ssh_key must be a string');
  const line = raw.trim();
  if (Buffer.byteLength(line) > SSH_KEY_MAX_BYTES) throw invalid(`ssh_key must be at most ${SSH_KEY_MAX_BYTES} bytes`);
  const m = KEY_LINE_RE.exec(line);
  if (m === null) throw invalid('ssh_key must be one OpenSSH public key line (ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa)');
  let key: sshpk.Key;
  try {
    key = sshpk.parseKey(`${m[1]} ${m[2]}`, 'ssh');
  } catch {
    throw invalid('ssh_key is not a valid OpenSSH public key');
  }
  if (key.type === 'rsa' && key.size < 2048) throw invalid('ssh_key: RSA keys must have at least 2048 bits');
  const comment = (m[3] ?? '').trim();
  return comment === '' ? `${m[1]} ${m[2]}` : `${m[1]} ${m[2]} ${comment}`;
}

/**
 * Parses a create body; `directRuntimeSsh` is SVC_ENABLE_DIRECT_RUNTIME_SSH, `catalog` the
 * startup profiles and loadouts (see the file comment).
 */
export function parseCreateVm(body: unknown, opts: { directRuntimeSsh: boolean; catalog?: StartupCatalog }): CreateVmRequest {
  if (body === undefined) throw invalid('a JSON body with at least a name is required');
  const rec = objectBody(body, CREATE_FIELDS, 'the body');
  const name = checkVmName(rec['name']);
  const catalog = opts.catalog;
  for (const f of EMPTY_ONLY_FIELDS) {
    const v = rec[f];
    if (f === 'loadout' && catalog !== undefined) continue;
    if (v !== undefined && v !== null && v !== '')
      throw invalid(`${f}: sandboxd provisions no ${f === 'loadout' ? 'loadouts' : 'compositions'} here; leave ${f} out (or empty)`);
  }
  const profile = rec['profile'] === undefined || rec['profile'] === '' ? 'svc-dev' : rec['profile'];
  let resolved: ResolvedProfile | undefined;
  if (catalog === undefined) {
    if (typeof profile !== 'string' || !(PROFILES as readonly string[]).includes(profile))
      throw invalid(`profile must be one of ${PROFILES.join(', ')}`);
  } else {
    if (typeof profile !== 'string') throw invalid('profile must be a string (a startup profile name)');
    resolved = catalog.profile(profile);
    if (resolved === undefined)
      throw new SvcError('profile.unknown', `profile: no startup profile named ${JSON.stringify(profile.slice(0, 64))}`);
  }
  let loadout = resolved?.loadout ?? null;
  const askedLoadout = rec['loadout'];
  if (catalog !== undefined && askedLoadout !== undefined && askedLoadout !== null && askedLoadout !== '') {
    if (typeof askedLoadout !== 'string') throw invalid('loadout must be a loadout name');
    const known = catalog.loadout(askedLoadout);
    if (known === undefined)
      throw new SvcError('loadout.unknown', `loadout: no loadout named ${JSON.stringify(askedLoadout.slice(0, 64))}`);
    loadout = known;
  }
  const out: CreateVmRequest = {
    name,
    profile,
    vcpus: intField(rec, 'vcpus', resolved?.vcpus),
    memoryMiB: intField(rec, 'memory_mb', resolved?.memoryMiB),
    diskGiB: intField(rec, 'disk_gb', resolved?.diskGiB),
    agentshare: boolField(rec, 'agentshare', resolved?.agentshare ?? true),
    start: boolField(rec, 'start', true),
    enrollment: enrollmentField(rec['enrollment'], resolved?.enrollment),
    sshKeys: [],
    warnings: [],
    ...(loadout !== null && { loadout }),
  };
  if (rec['ssh_key'] !== undefined && rec['ssh_key'] !== null) {
    const key = parseSshPublicKey(rec['ssh_key']);
    // Startup profiles are managed like svc-dev: only `basic` installs a key without the flag.
    if (out.profile !== 'basic' && !opts.directRuntimeSsh) {
      out.warnings.push(
        `ssh_key omitted: managed ${out.profile} VMs get no direct runtime SSH keys unless SVC_ENABLE_DIRECT_RUNTIME_SSH=1 (use gateway SSH leases)`,
      );
    } else {
      out.sshKeys.push(key);
    }
  }
  return out;
}

export interface RestartRequest {
  mode: 'graceful' | 'hard';
  timeoutSeconds: number;
}

export function parseRestart(body: unknown): RestartRequest {
  const rec = objectBody(body, RESTART_FIELDS, 'the body');
  const mode = rec['mode'] ?? 'graceful';
  if (mode !== 'graceful' && mode !== 'hard') throw invalid('mode must be graceful or hard');
  const t = rec['timeout_seconds'] ?? 60;
  if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0 || t > RESTART_TIMEOUT_MAX_SECONDS) {
    throw invalid(`timeout_seconds must be an integer from 0 to ${RESTART_TIMEOUT_MAX_SECONDS}`);
  }
  return { mode, timeoutSeconds: t };
}
