/**
 * A loadout: what a VM gets at provisioning (spec 4.13; the record's fields are ours, README
 * "Startup profiles and loadouts"). It arrives as one bounded YAML document, parsed with the task
 * manifests' safe loader (src/tasks/manifest-yaml.ts: one document, no tags, at most 16 aliases,
 * nesting at most 16 deep, 4096 nodes, no duplicate keys, YAML 1.2 core schema) and then checked
 * here field by field; every refusal is a 400 naming the field.
 *
 * ```yaml
 * apiVersion: sandboxd.loadout/v1   # optional; this value when present
 * kind: Loadout                     # optional; this value when present
 * metadata:
 *   name: py-dev                    # required; must equal the catalog key (the path's {name})
 *   description: Python tooling     # optional, ≤ 512 characters
 *   labels: {category: dev}         # optional, ≤ 16 string pairs
 * packages: [python3, git]          # Debian package names, ≤ 64
 * tools: [python3, git]             # commands that must be on PATH after provisioning, ≤ 64
 * environment: {PIP_INDEX_URL: https://…}   # ≤ 64 variables, no secret-bearing keys or values
 * files:                            # ≤ 32 files, ≤ 32 KiB each, ≤ 128 KiB together
 *   - path: .config/pip/pip.conf    # relative to the agent's work directory; no `..`, no NUL
 *     content: "[global]\n"
 *     mode: "0644"                  # optional octal, default 0644
 * ```
 * Unknown keys are refused, so a typo never silently provisions less than asked for.
 */
import { createHash } from 'node:crypto';
import { classifyKey, SECRET_VALUE_PATTERNS } from '../activity/record.js';
import { SvcError } from '../core/errors.js';
import type { LoadoutFile, LoadoutSpec } from '../core/loadout-apply.js';
import type { LoadoutJson, ReferenceLoadoutJson } from '../wire/profiles.js';
import { loadManifestYaml, MAX_MANIFEST_YAML_BYTES } from '../tasks/manifest-yaml.js';

export const LOADOUT_SCHEMA_VERSION = 'sandboxd.loadout/v1';
/** A loadout document, at most (bytes of UTF-8): the task manifests' bound. */
export const MAX_LOADOUT_YAML_BYTES = MAX_MANIFEST_YAML_BYTES;
export const LOADOUT_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const LOADOUT_LIMITS = {
  packages: 64,
  tools: 64,
  environment: 64,
  files: 32,
  fileBytes: 32 * 1024,
  filesTotalBytes: 128 * 1024,
  pathBytes: 255,
  envValueBytes: 4096,
  labels: 16,
  descriptionChars: 512,
} as const;

const PACKAGE_RE = /^[a-z0-9][a-z0-9+.-]{0,127}$/;
const TOOL_RE = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const LABEL_RE = /^[A-Za-z0-9_./-]{1,63}$/;
/** Variables the agent's own environment depends on: a loadout must not move them. */
const RESERVED_ENV = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'TMUX',
  'TMUX_TMPDIR',
  'LD_PRELOAD',
  'LD_LIBRARY_PATH',
  'NODE_OPTIONS',
  'SANDBOXD_LOCAL_VM',
]);
/** Prefixes of the agent's configuration (SANDBOX_AGENT_*), a guest's settings (SBX_*) and sandboxd's own (SVC_*). */
const RESERVED_ENV_PREFIXES = ['SANDBOX_AGENT_', 'SBX_', 'SVC_'];

export type { LoadoutFile, LoadoutSpec };

export interface Loadout extends LoadoutSpec {
  readonly name: string;
  readonly description: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The YAML as sent. */
  readonly document: string;
  /** SHA-256 of the document, hex. */
  readonly documentSha256: string;
  readonly createdAtMs: number;
}

function invalid(message: string): SvcError {
  return new SvcError('loadout.invalid', message);
}

/** Checks a catalog key (the path's {name}). */
export function checkLoadoutName(name: string, what = 'name'): string {
  if (!LOADOUT_NAME_RE.test(name)) throw invalid(`${what} must be 1-63 characters of a-z 0-9 . _ - starting with a letter or digit`);
  return name;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKeys(rec: Record<string, unknown>, allowed: readonly string[], where: string): void {
  const extra = Object.keys(rec).filter((k) => !allowed.includes(k));
  if (extra.length > 0)
    throw invalid(
      `${where}: unknown field(s) ${extra
        .slice(0, 5)
        .map((k) => k.slice(0, 40))
        .join(', ')}`,
    );
}

function stringList(v: unknown, field: string, max: number, re: RegExp, rule: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid(`${field} must be a list`);
  if (v.length > max) throw invalid(`${field} has ${v.length} entries; at most ${max}`);
  const out: string[] = [];
  v.forEach((item, i) => {
    if (typeof item !== 'string' || !re.test(item)) throw invalid(`${field}[${i}] must be ${rule}`);
    if (!out.includes(item)) out.push(item);
  });
  return out;
}

/**
 * Environment without secrets: names a shell takes, no reserved names, no key whose words name
 * a secret (the activity store's table: password, token, api key, …), no value that is one
 * (a PEM private key, a Bearer credential). Shared with startup profiles' agent env.
 */
export function checkEnvironment(v: unknown, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isRecord(v)) throw invalid(`${field} must be a mapping of NAME: value`);
  const entries = Object.entries(v);
  if (entries.length > LOADOUT_LIMITS.environment)
    throw invalid(`${field} has ${entries.length} variables; at most ${LOADOUT_LIMITS.environment}`);
  const out: Record<string, string> = {};
  for (const [k, raw] of entries) {
    const at = `${field}.${k.slice(0, 64)}`;
    if (!ENV_KEY_RE.test(k)) throw invalid(`${at}: a variable name is A-Z a-z 0-9 _, not starting with a digit, at most 128 characters`);
    if (RESERVED_ENV.has(k) || RESERVED_ENV_PREFIXES.some((p) => k.startsWith(p)))
      throw invalid(`${at}: ${k} is the agent's own; a loadout cannot set it`);
    if (classifyKey(k) === 'secret')
      throw new SvcError('loadout.secret_field', `${at}: the name looks secret-bearing; secrets go through credential leases, never here`);
    const value = typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : raw;
    if (typeof value !== 'string') throw invalid(`${at} must be a string`);
    if (Buffer.byteLength(value) > LOADOUT_LIMITS.envValueBytes)
      throw invalid(`${at} is longer than ${LOADOUT_LIMITS.envValueBytes} bytes`);
    if (/[\0\r\n]/.test(value)) throw invalid(`${at} must be one line without NUL`);
    for (const p of SECRET_VALUE_PATTERNS)
      if (p.re.test(value)) throw new SvcError('loadout.secret_field', `${at} holds what looks like a ${p.name}`);
    out[k] = value;
  }
  return out;
}

function checkPath(v: unknown, at: string): string {
  if (typeof v !== 'string' || v === '') throw invalid(`${at}.path is required (a path relative to the agent's work directory)`);
  if (Buffer.byteLength(v) > LOADOUT_LIMITS.pathBytes) throw invalid(`${at}.path is longer than ${LOADOUT_LIMITS.pathBytes} bytes`);
  if (v.startsWith('/')) throw invalid(`${at}.path must be relative (to the agent's work directory)`);
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\u0000-\u001f\u007f\\]/.test(v)) throw invalid(`${at}.path has a control character or a backslash`);
  const segments = v.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) throw invalid(`${at}.path has an empty, . or .. segment`);
  return v;
}

function checkMode(v: unknown, at: string): number {
  if (v === undefined || v === null) return 0o644;
  if (typeof v === 'string' && /^0?[0-7]{3}$/.test(v)) return parseInt(v, 8);
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0o777) return v;
  throw invalid(`${at}.mode must be an octal string such as "0644" (at most 0777)`);
}

function checkFiles(v: unknown): LoadoutFile[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid('files must be a list of {path, content, mode}');
  if (v.length > LOADOUT_LIMITS.files) throw invalid(`files has ${v.length} entries; at most ${LOADOUT_LIMITS.files}`);
  let total = 0;
  const seen = new Set<string>();
  return v.map((f: unknown, i) => {
    const at = `files[${i}]`;
    if (!isRecord(f)) throw invalid(`${at} must be a mapping {path, content, mode}`);
    onlyKeys(f, ['path', 'content', 'mode'], at);
    const path = checkPath(f['path'], at);
    if (seen.has(path)) throw invalid(`${at}.path ${path} is listed twice`);
    seen.add(path);
    const content = f['content'] ?? '';
    if (typeof content !== 'string') throw invalid(`${at}.content must be a string`);
    const bytes = Buffer.byteLength(content);
    if (bytes > LOADOUT_LIMITS.fileBytes) throw invalid(`${at}.content is larger than ${LOADOUT_LIMITS.fileBytes} bytes`);
    total += bytes;
    if (total > LOADOUT_LIMITS.filesTotalBytes) throw invalid(`files hold more than ${LOADOUT_LIMITS.filesTotalBytes} bytes together`);
    if (content.includes('\0')) throw invalid(`${at}.content has a NUL byte (files are text)`);
    for (const p of SECRET_VALUE_PATTERNS.slice(0, 2))
      if (p.re.test(content)) throw new SvcError('loadout.secret_field', `${at}.content holds what looks like a ${p.name}`);
    return { path, content, mode: checkMode(f['mode'], at) };
  });
}

function checkLabels(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isRecord(v)) throw invalid('metadata.labels must be a mapping');
  const entries = Object.entries(v);
  if (entries.length > LOADOUT_LIMITS.labels) throw invalid(`metadata.labels: at most ${LOADOUT_LIMITS.labels}`);
  const out: Record<string, string> = {};
  for (const [k, val] of entries) {
    if (!LABEL_RE.test(k)) throw invalid(`metadata.labels.${k.slice(0, 40)}: keys are 1-63 characters of A-Z a-z 0-9 _ . / -`);
    // eslint-disable-next-line no-control-regex -- control characters are what is refused
    if (typeof val !== 'string' || val.length > 128 || /[\0-\x1f]/.test(val))
      throw invalid(`metadata.labels.${k}: a one-line string of at most 128 characters`);
    out[k] = val;
  }
  return out;
}

/**
 * Parses and checks a loadout document sent for catalog key `key`. loadout.invalid (limits,
 * schema), loadout.secret_field, loadout.name_mismatch (metadata.name ≠ key).
 */
export function parseLoadout(text: string, key: string, nowMs: number): Loadout {
  checkLoadoutName(key);
  let doc: Record<string, unknown>;
  try {
    doc = loadManifestYaml(text);
  } catch (err) {
    if (err instanceof SvcError && err.code === 'task.invalid_manifest')
      throw invalid(err.message.replace(/^manifest_yaml: /, 'the document: '));
    throw err;
  }
  onlyKeys(doc, ['apiVersion', 'kind', 'metadata', 'packages', 'tools', 'environment', 'files'], 'the document');
  if (doc['apiVersion'] !== undefined && doc['apiVersion'] !== LOADOUT_SCHEMA_VERSION)
    throw invalid(`apiVersion must be ${LOADOUT_SCHEMA_VERSION} (or left out)`);
  if (doc['kind'] !== undefined && doc['kind'] !== 'Loadout') throw invalid('kind must be Loadout (or left out)');
  const meta = doc['metadata'];
  if (!isRecord(meta)) throw invalid('metadata is required (a mapping with name)');
  onlyKeys(meta, ['name', 'description', 'labels'], 'metadata');
  const name = meta['name'];
  if (typeof name !== 'string' || name === '') throw invalid('metadata.name is required');
  if (name !== key) throw new SvcError('loadout.name_mismatch', `metadata.name "${name.slice(0, 64)}" must equal the catalog key "${key}"`);
  const description = meta['description'] ?? '';
  if (typeof description !== 'string' || description.length > LOADOUT_LIMITS.descriptionChars)
    throw invalid(`metadata.description must be a string of at most ${LOADOUT_LIMITS.descriptionChars} characters`);
  return {
    name,
    description,
    labels: checkLabels(meta['labels']),
    packages: stringList(doc['packages'], 'packages', LOADOUT_LIMITS.packages, PACKAGE_RE, 'a Debian package name (a-z 0-9 + . -)'),
    tools: stringList(doc['tools'], 'tools', LOADOUT_LIMITS.tools, TOOL_RE, 'a command name (A-Z a-z 0-9 _ . + -, no slash)'),
    environment: checkEnvironment(doc['environment'], 'environment'),
    files: checkFiles(doc['files']),
    document: text,
    documentSha256: createHash('sha256').update(text).digest('hex'),
    createdAtMs: nowMs,
  };
}

/** The JSON of GET /api/v2/loadouts/{name} (loadout-v1.schema.json); `document` only in the detail. */
export function loadoutJson(l: Loadout, detail: boolean): LoadoutJson {
  return {
    schema_version: 'sandboxd.loadout/v1',
    name: l.name,
    description: l.description,
    labels: { ...l.labels },
    packages: [...l.packages],
    tools: [...l.tools],
    environment: { ...l.environment },
    files: l.files.map((f) => ({
      path: f.path,
      mode: `0${f.mode.toString(8).padStart(3, '0')}`,
      size_bytes: Buffer.byteLength(f.content),
      ...(detail ? { content: f.content } : {}),
    })),
    document_sha256: l.documentSha256,
    created_at: new Date(l.createdAtMs).toISOString(),
    ...(detail ? { document: l.document } : {}),
  };
}

/**
 * The categories the reference dashboard groups its loadout picker by; it shows no other (a
 * loadout of another category would be missing from its picker), so others are left out and it
 * files the loadout under "Other".
 */
const REFERENCE_CATEGORIES = new Set(['per-provider', 'collaboration', 'task-focused', 'backward-compat', 'other']);

/** The reference's `path` of a loadout: what its dashboard sends back as the VM create `loadout`. */
export function referenceLoadoutPath(name: string): string {
  return `profiles/${name}.yaml`;
}

/**
 * The loadout name a VM create's `loadout` value means: the name itself, or the reference's
 * `path` (`profiles/<name>.yaml`, what its dashboard sends) or file name (`<name>.yaml`).
 */
export function loadoutNameOf(value: string): string {
  const m = /^(?:profiles\/)?([a-z0-9][a-z0-9._-]{0,62})\.yaml$/.exec(value);
  return m?.[1] ?? value;
}

/**
 * GET /api/v1/loadouts entry in the reference dashboard's shape ({name, path, description,
 * category?, complexity?}; its other optional fields have nothing behind them here).
 */
export function referenceLoadoutJson(l: Loadout): ReferenceLoadoutJson {
  const category = l.labels['category'];
  return {
    name: l.name,
    path: referenceLoadoutPath(l.name),
    description: l.description,
    ...(category !== undefined && REFERENCE_CATEGORIES.has(category) ? { category } : {}),
    ...(l.labels['complexity'] !== undefined ? { complexity: l.labels['complexity'] } : {}),
  };
}
