/**
 * A startup profile: a named launch template for VMs (spec 4.13; the record's fields are ours,
 * README "Startup profiles and loadouts", schema startup-profile-v1.schema.json).
 *
 * | field | rule | default |
 * |---|---|---|
 * | name | 1-63 of a-z 0-9 -, starting with a letter or digit (POST only; the path's on PUT) | required |
 * | description | ≤ 512 characters | "" |
 * | vcpus | integer 1-64 | 4 |
 * | memory_mb | integer 256-262144 | 8192 |
 * | disk_gb | integer 1-2048 | 50 |
 * | image | a container image `ref` of GET /api/v1/container-images, or null | null |
 * | network | the host's VM network (SVC_VM_NETWORK), or null for it | null |
 * | agent.agentshare | boolean | true |
 * | agent.enrollment | mtls or deferred | mtls |
 * | agent.env | ≤ 64 NAME: value, no secret-bearing names or values (as loadouts) | {} |
 * | loadout | the name of an existing loadout, or null | null |
 * Unknown fields are refused. Every refusal is 400 profile.invalid naming the field (an env
 * secret: loadout.secret_field; a loadout that does not exist: loadout.unknown).
 */
import { SvcError } from '../core/errors.js';
import type { StartupProfileJson } from '../wire/profiles.js';
import { checkEnvironment } from '../loadouts/loadout-record.js';
import { LIMITS } from '../vms/create-request.js';

export const PROFILE_SCHEMA_VERSION = 'sandboxd.startup-profile/v1';
export const PROFILE_NAME_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const BUILTIN_PROFILES = ['svc-dev', 'basic'] as const;

export interface ProfileAgent {
  readonly agentshare: boolean;
  readonly enrollment: 'mtls' | 'deferred';
  readonly env: Readonly<Record<string, string>>;
}

/** The fields a client sets (POST, PUT). */
export interface ProfileSpec {
  readonly description: string;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
  readonly image: string | null;
  readonly network: string | null;
  readonly agent: ProfileAgent;
  readonly loadout: string | null;
}

export interface StartupProfile extends ProfileSpec {
  readonly name: string;
  readonly builtin: boolean;
  /** 1 at create, +1 per update: the ETag and expected_revision. */
  readonly revision: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

/** What the checks need from the rest of the server. */
export interface ProfileContext {
  /** Refs of the container image catalog. */
  imageRefs(): readonly string[];
  /** SVC_VM_NETWORK. */
  readonly network: string;
  hasLoadout(name: string): boolean;
}

function invalid(message: string): SvcError {
  return new SvcError('profile.invalid', message);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKeys(rec: Record<string, unknown>, allowed: readonly string[], where: string): void {
  const extra = Object.keys(rec).filter((k) => !allowed.includes(k));
  if (extra.length > 0)
    throw invalid(
      `${where}unknown field(s): ${extra
        .slice(0, 5)
        .map((k) => k.slice(0, 40))
        .join(', ')}`,
    );
}

export function checkProfileName(v: unknown, what = 'name'): string {
  if (typeof v !== 'string' || !PROFILE_NAME_RE.test(v))
    throw invalid(`${what} must be 1-63 characters of a-z 0-9 -, starting with a letter or digit`);
  return v;
}

function intField(rec: Record<string, unknown>, field: keyof typeof LIMITS): number {
  const v = rec[field];
  const lim = LIMITS[field];
  if (v === undefined) return lim.default;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < lim.min || v > lim.max)
    throw invalid(`${field} must be an integer from ${lim.min} to ${lim.max}`);
  return v;
}

function agentField(v: unknown): ProfileAgent {
  if (v === undefined || v === null) return { agentshare: true, enrollment: 'mtls', env: {} };
  if (!isRecord(v)) throw invalid('agent must be an object {agentshare, enrollment, env}');
  onlyKeys(v, ['agentshare', 'enrollment', 'env'], 'agent: ');
  const agentshare = v['agentshare'] ?? true;
  if (typeof agentshare !== 'boolean') throw invalid('agent.agentshare must be true or false');
  const enrollment = v['enrollment'] ?? 'mtls';
  if (enrollment !== 'mtls' && enrollment !== 'deferred') throw invalid('agent.enrollment must be mtls or deferred');
  const rawEnv = v['env'];
  if (isRecord(rawEnv))
    for (const [k, val] of Object.entries(rawEnv))
      if (typeof val !== 'string') throw invalid(`agent.env.${k.slice(0, 64)} must be a string`);
  let env: Record<string, string>;
  try {
    env = checkEnvironment(v['env'], 'agent.env');
  } catch (err) {
    if (err instanceof SvcError && err.code === 'loadout.invalid') throw invalid(err.message);
    throw err;
  }
  return { agentshare, enrollment, env };
}

/**
 * Checks a POST (`withName`) or PUT body. `expected_revision` is allowed (and ignored here) on PUT.
 * Returns the name (POST) and the spec.
 */
export function parseProfileBody(
  body: unknown,
  ctx: ProfileContext,
  mode: 'create' | 'update',
): { name: string | null; spec: ProfileSpec } {
  if (!isRecord(body)) throw invalid('the body must be a JSON object');
  const allowed = ['description', 'vcpus', 'memory_mb', 'disk_gb', 'image', 'network', 'agent', 'loadout'];
  onlyKeys(body, mode === 'create' ? ['name', ...allowed] : ['name', 'expected_revision', ...allowed], '');
  const name = mode === 'create' ? checkProfileName(body['name']) : body['name'] === undefined ? null : checkProfileName(body['name']);
  const description = body['description'] ?? '';
  if (typeof description !== 'string' || description.length > 512) throw invalid('description must be a string of at most 512 characters');
  const image = body['image'] ?? null;
  if (image !== null) {
    const refs = ctx.imageRefs();
    if (typeof image !== 'string' || !refs.includes(image))
      throw invalid(
        `image must be a ref of GET /api/v1/container-images (${refs.slice(0, 5).join(', ')}${refs.length > 5 ? ', …' : ''}) or null`,
      );
  }
  const network = body['network'] ?? null;
  if (network !== null && network !== ctx.network)
    throw invalid(`network must be ${JSON.stringify(ctx.network)} (this host's VM network, SVC_VM_NETWORK) or null`);
  const loadout = body['loadout'] ?? null;
  if (loadout !== null) {
    if (typeof loadout !== 'string') throw invalid('loadout must be a loadout name or null');
    if (!ctx.hasLoadout(loadout))
      throw new SvcError('loadout.unknown', `loadout: no loadout named ${JSON.stringify(loadout.slice(0, 64))}`);
  }
  return {
    name,
    spec: {
      description,
      vcpus: intField(body, 'vcpus'),
      memoryMiB: intField(body, 'memory_mb'),
      diskGiB: intField(body, 'disk_gb'),
      image: image,
      network: network,
      agent: agentField(body['agent']),
      loadout: loadout,
    },
  };
}

/** The built-in profiles: the spec's svc-dev and basic, with the create defaults. */
export function builtinProfile(name: (typeof BUILTIN_PROFILES)[number]): StartupProfile {
  return {
    name,
    builtin: true,
    description:
      name === 'svc-dev'
        ? 'built-in: managed development VM; direct runtime SSH keys only with SVC_ENABLE_DIRECT_RUNTIME_SSH=1'
        : 'built-in: basic VM; a given ssh_key is installed',
    vcpus: LIMITS.vcpus.default,
    memoryMiB: LIMITS.memory_mb.default,
    diskGiB: LIMITS.disk_gb.default,
    image: null,
    network: null,
    agent: { agentshare: true, enrollment: 'mtls', env: {} },
    loadout: null,
    revision: 1,
    createdAtMs: 0,
    updatedAtMs: 0,
  };
}

/** The JSON of a profile (startup-profile-v1.schema.json). */
export function profileJson(p: StartupProfile): StartupProfileJson {
  return {
    schema_version: 'sandboxd.startup-profile/v1',
    name: p.name,
    description: p.description,
    builtin: p.builtin,
    vcpus: p.vcpus,
    memory_mb: p.memoryMiB,
    disk_gb: p.diskGiB,
    image: p.image,
    network: p.network,
    agent: { agentshare: p.agent.agentshare, enrollment: p.agent.enrollment, env: { ...p.agent.env } },
    loadout: p.loadout,
    revision: p.revision,
    created_at: new Date(p.createdAtMs).toISOString(),
    updated_at: new Date(p.updatedAtMs).toISOString(),
  };
}
