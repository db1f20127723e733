/**
 * Task manifests (spec 2 "Task", 4.6): validation of a submitted body into a normalized
 * {@link TaskManifest}. The schema is published as JSON Schema in manifest.schema.json; its keys,
 * patterns and limits live in manifest-rules.ts, shared with this validator.
 *
 * Two forms are accepted, and may be mixed as long as nothing is said twice:
 *
 *   name: fix-login                        version: "1"
 *   repository: {url: /srv/repos/app}      kind: Task
 *   prompt: Fix the login bug              metadata: {id: JIRA-12, name: fix-login, labels: {team: web}}
 *                                          repository: {url: https://example.com/app.git, branch: main}
 *                                          agent: {prompt: Fix the login bug, model: claude-opus-4-1,
 *                                                  command: [my-agent, --prompt, "{prompt}"]}
 *                                          lifecycle: {timeout: 1h30m, failure_action: preserve}
 *                                          artifacts: {patterns: ["reports/**", "*.diff"]}
 *
 * The name is `name` or `metadata.name` (both only if equal); the prompt is `prompt` or
 * `agent.prompt` (exactly one). Every error is a 400 `task.invalid_manifest` whose message starts
 * with the path of the offending field (`repository.foo: unknown field`).
 */
import { SvcError } from '../core/errors.js';
import { formatDuration, parseDuration } from './duration.js';
import {
  ARTIFACT_PATTERN_RE,
  BRANCH_RE,
  COMMAND_ARG_RE,
  FAILURE_ACTIONS,
  LABEL_KEY_RE,
  LABEL_VALUE_RE,
  MANIFEST_DEFAULTS,
  MANIFEST_KEYS,
  MANIFEST_REQUIRED,
  MAX_ARTIFACT_PATTERNS,
  MAX_COMMAND_ARG_CHARS,
  MAX_COMMAND_ARGS,
  MAX_LABEL_VALUE_CHARS,
  MAX_LABELS,
  MAX_PROMPT_CHARS,
  MAX_TIMEOUT_MS,
  MAX_URL_CHARS,
  MIN_TIMEOUT_MS,
  MODEL_RE,
  NAME_RE,
  PLACEHOLDER_RE,
  PROMPT_RE,
  REPO_URL_RE,
  RESERVED_LABEL_KEYS,
  TIMEOUT_RE,
  type FailureAction,
} from './manifest-rules.js';
import { loadManifestYaml } from './manifest-yaml.js';

/** A validated manifest with every default applied. Deep-frozen. */
export interface TaskManifest {
  readonly version: '1';
  readonly kind: 'Task';
  /** `name` or `metadata.name`. */
  readonly name: string;
  readonly metadata: {
    /** A client's own reference (ticket, job id); not the task id, which is always task-<uuid>. */
    readonly id: string | null;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly repository: { readonly url: string; readonly branch: string | null };
  readonly agent: {
    readonly prompt: string;
    readonly model: string;
    /** argv template with `{prompt}`/`{model}` placeholders; expand with buildArgv. */
    readonly command: readonly string[];
  };
  readonly lifecycle: {
    /** Normalized duration text (`90m` → `1h30m`). */
    readonly timeout: string;
    readonly timeoutMs: number;
    readonly failureAction: FailureAction;
  };
  readonly artifacts: { readonly patterns: readonly string[] };
}

/** Deployment defaults (SVC_TASK_AGENT_COMMAND, …); each falls back to MANIFEST_DEFAULTS. */
export interface ManifestDefaults {
  readonly model?: string;
  readonly command?: readonly string[];
  readonly timeoutMs?: number;
}

type Obj = Record<string, unknown>;

function fail(path: string, message: string): never {
  throw new SvcError('task.invalid_manifest', `${path === '' ? 'manifest' : path}: ${message}`);
}

const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/** Code points, as JSON Schema counts string length. */
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff || i + 1 >= s.length) n++;
    else {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
      n++;
    }
  }
  return n;
}

function isPlainObject(v: unknown): v is Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function objectAt(v: unknown, path: string, shape: keyof typeof MANIFEST_KEYS): Obj {
  if (!isPlainObject(v)) fail(path, 'must be an object');
  const allowed: readonly string[] = MANIFEST_KEYS[shape];
  const unknown = Object.keys(v).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    const named = unknown.slice(0, 10).map((k) => join(path, k.slice(0, 64)));
    fail(
      named[0] ?? path,
      `unknown field${unknown.length > 1 ? `s ${named.join(', ')}${unknown.length > 10 ? ', …' : ''}` : ''} (allowed: ${allowed.join(', ')})`,
    );
  }
  for (const k of MANIFEST_REQUIRED[shape] as readonly string[]) if (v[k] === undefined) fail(join(path, k), 'is required');
  return v;
}

function stringAt(v: unknown, path: string, opts: { max: number; re: RegExp; hint: string; min?: number }): string {
  if (typeof v !== 'string') fail(path, `must be a string (${opts.hint})`);
  if (v.length > opts.max * 2 || codePoints(v) > opts.max) fail(path, `must be at most ${opts.max} characters`);
  if (codePoints(v) < (opts.min ?? 1)) fail(path, `must not be empty (${opts.hint})`);
  if (!opts.re.test(v)) fail(path, `is invalid: ${opts.hint}`);
  return v;
}

function arrayAt(v: unknown, path: string, maxItems: number): unknown[] {
  if (!Array.isArray(v)) fail(path, 'must be an array');
  if (v.length === 0) fail(path, 'must not be empty');
  if (v.length > maxItems) fail(path, `must have at most ${maxItems} items`);
  return v;
}

/**
 * A POST /api/v1/tasks body: an object with exactly one of `manifest_yaml` (YAML text) or
 * `manifest` (an object). Throws SvcError `task.invalid_manifest` (400).
 */
export function parseTaskSubmission(body: unknown, defaults: ManifestDefaults = {}): TaskManifest {
  if (!isPlainObject(body)) fail('body', 'must be a JSON object with manifest_yaml or manifest');
  const unknown = Object.keys(body).filter((k) => k !== 'manifest_yaml' && k !== 'manifest');
  if (unknown.length > 0) fail(unknown[0]?.slice(0, 64) ?? 'body', 'unknown field (send manifest_yaml or manifest)');
  const hasYaml = body['manifest_yaml'] !== undefined && body['manifest_yaml'] !== null;
  const hasObject = body['manifest'] !== undefined && body['manifest'] !== null;
  if (hasYaml === hasObject) fail('body', hasYaml ? 'send manifest_yaml or manifest, not both' : 'manifest_yaml or manifest is required');
  if (hasYaml) {
    const text = body['manifest_yaml'];
    if (typeof text !== 'string') fail('manifest_yaml', 'must be a string of YAML');
    return validateManifest(loadManifestYaml(text), defaults);
  }
  return validateManifest(body['manifest'], defaults);
}

/** Validate manifest data (from YAML or JSON) and apply defaults. Throws SvcError `task.invalid_manifest`. */
export function validateManifest(input: unknown, defaults: ManifestDefaults = {}): TaskManifest {
  const root = objectAt(input, '', '');
  if (root['version'] !== undefined && root['version'] !== '1' && root['version'] !== 1) fail('version', 'must be "1"');
  if (root['kind'] !== undefined && root['kind'] !== 'Task') fail('kind', 'must be "Task"');

  const meta = root['metadata'] === undefined ? {} : objectAt(root['metadata'], 'metadata', 'metadata');
  const nameHint = `1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit`;
  const topName = root['name'] === undefined ? undefined : stringAt(root['name'], 'name', { max: 128, re: NAME_RE, hint: nameHint });
  const metaName =
    meta['name'] === undefined ? undefined : stringAt(meta['name'], 'metadata.name', { max: 128, re: NAME_RE, hint: nameHint });
  if (topName !== undefined && metaName !== undefined && topName !== metaName)
    fail('name', 'differs from metadata.name (give one of them)');
  const name = topName ?? metaName ?? fail('name', 'is required (name or metadata.name)');
  const id = meta['id'] === undefined ? null : stringAt(meta['id'], 'metadata.id', { max: 128, re: NAME_RE, hint: nameHint });
  const labels = meta['labels'] === undefined ? {} : labelsAt(meta['labels'], 'metadata.labels');

  const repo = objectAt(root['repository'], 'repository', 'repository');
  const url = stringAt(repo['url'], 'repository.url', {
    max: MAX_URL_CHARS,
    re: REPO_URL_RE,
    hint: 'an https://, http://, git://, ssh:// or file:// URL, git@host:path, or an absolute path; no spaces, no password',
  });
  const branch =
    repo['branch'] === undefined
      ? null
      : stringAt(repo['branch'], 'repository.branch', { max: 255, re: BRANCH_RE, hint: 'a git branch name such as main or feature/x' });

  const agent = root['agent'] === undefined ? {} : objectAt(root['agent'], 'agent', 'agent');
  const promptHint = `a non-blank string of at most ${MAX_PROMPT_CHARS} characters without NUL`;
  if (root['prompt'] !== undefined && agent['prompt'] !== undefined) fail('prompt', 'give prompt or agent.prompt, not both');
  const prompt =
    root['prompt'] !== undefined
      ? stringAt(root['prompt'], 'prompt', { max: MAX_PROMPT_CHARS, re: PROMPT_RE, hint: promptHint })
      : agent['prompt'] !== undefined
        ? stringAt(agent['prompt'], 'agent.prompt', { max: MAX_PROMPT_CHARS, re: PROMPT_RE, hint: promptHint })
        : fail('prompt', 'is required (prompt or agent.prompt)');
  const model =
    agent['model'] === undefined
      ? (defaults.model ?? MANIFEST_DEFAULTS.model)
      : stringAt(agent['model'], 'agent.model', { max: 128, re: MODEL_RE, hint: '1-128 of A-Z a-z 0-9 . _ : / @ -' });
  const command =
    agent['command'] === undefined ? (defaults.command ?? MANIFEST_DEFAULTS.command) : commandAt(agent['command'], 'agent.command');

  const life = root['lifecycle'] === undefined ? {} : objectAt(root['lifecycle'], 'lifecycle', 'lifecycle');
  let timeoutMs = defaults.timeoutMs ?? (parseDuration(MANIFEST_DEFAULTS.timeout) as number);
  if (life['timeout'] !== undefined) {
    const text = stringAt(life['timeout'], 'lifecycle.timeout', {
      max: 40,
      re: TIMEOUT_RE,
      hint: 'a duration such as 90s, 30m, 2h, 1h30m or 7d',
    });
    timeoutMs = parseDuration(text) ?? fail('lifecycle.timeout', 'is not a duration');
    if (timeoutMs < MIN_TIMEOUT_MS || timeoutMs > MAX_TIMEOUT_MS) fail('lifecycle.timeout', 'must be between 1s and 7d');
  }
  const action = life['failure_action'];
  if (action !== undefined && !(FAILURE_ACTIONS as readonly unknown[]).includes(action))
    fail('lifecycle.failure_action', `must be one of ${FAILURE_ACTIONS.join(', ')}`);

  const arts = root['artifacts'] === undefined ? {} : objectAt(root['artifacts'], 'artifacts', 'artifacts');
  const patterns =
    arts['patterns'] === undefined
      ? MANIFEST_DEFAULTS.artifactPatterns
      : arrayAt(arts['patterns'], 'artifacts.patterns', MAX_ARTIFACT_PATTERNS).map((p, i) =>
          stringAt(p, `artifacts.patterns[${i}]`, {
            max: 256,
            re: ARTIFACT_PATTERN_RE,
            hint: 'a glob relative to the outbox, without .. or a leading /',
          }),
        );

  return deepFreeze({
    version: '1',
    kind: 'Task',
    name,
    metadata: { id, labels },
    repository: { url, branch },
    agent: { prompt, model, command: [...command] },
    lifecycle: {
      timeout: formatDuration(timeoutMs),
      timeoutMs,
      failureAction: (action as FailureAction | undefined) ?? MANIFEST_DEFAULTS.failureAction,
    },
    artifacts: { patterns: [...patterns] },
  });
}

function labelsAt(v: unknown, path: string): Record<string, string> {
  if (!isPlainObject(v)) fail(path, 'must be an object of string values');
  const keys = Object.keys(v);
  if (keys.length > MAX_LABELS) fail(path, `must have at most ${MAX_LABELS} labels`);
  const entries: Array<[string, string]> = [];
  for (const k of keys) {
    const at = `${path}.${k.slice(0, 64)}`;
    if (!LABEL_KEY_RE.test(k) || (RESERVED_LABEL_KEYS as readonly string[]).includes(k)) {
      fail(at, 'invalid label key: 1-63 of A-Z a-z 0-9 . _ / -, starting and ending with a letter or digit');
    }
    const value = v[k];
    if (typeof value !== 'string') fail(at, 'label values must be strings');
    if (codePoints(value) > MAX_LABEL_VALUE_CHARS) fail(at, `must be at most ${MAX_LABEL_VALUE_CHARS} characters`);
    if (!LABEL_VALUE_RE.test(value)) fail(at, 'must not contain control characters');
    entries.push([k, value]);
  }
  // fromEntries defines own properties, so even a hostile key could not reach a prototype.
  return Object.fromEntries(entries);
}

/** Validate an argv template (agent.command, or SVC_TASK_AGENT_COMMAND at start-up). */
export function commandAt(v: unknown, path: string): string[] {
  const items = arrayAt(v, path, MAX_COMMAND_ARGS);
  const argv = items.map((a, i) =>
    stringAt(a, `${path}[${i}]`, {
      max: MAX_COMMAND_ARG_CHARS,
      re: COMMAND_ARG_RE,
      hint: `an argv element of 1-${MAX_COMMAND_ARG_CHARS} characters without NUL`,
    }),
  );
  if (PLACEHOLDER_RE.test(argv[0] ?? ''))
    fail(`${path}[0]`, 'the program must be fixed: {prompt} and {model} are allowed in arguments only');
  return argv;
}

/** Values substituted into a command template. */
export interface ArgvValues {
  readonly prompt: string;
  readonly model: string;
}

/**
 * Expand a command template into argv: every `{prompt}` and `{model}` inside each element is
 * replaced by the value (an element may be just the placeholder or contain it, `--model={model}`).
 * Values are never re-scanned and never pass through a shell, so a prompt holding `{model}`,
 * quotes or `$(…)` stays literal text in one argv element.
 */
export function buildArgv(template: readonly string[], values: ArgvValues): string[] {
  return template.map((el) => el.replace(/\{(prompt|model)\}/gu, (_m, key: 'prompt' | 'model') => values[key]));
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
