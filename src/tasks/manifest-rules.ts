/**
 * The manifest's vocabulary: allowed keys per object, required keys, patterns, limits and
 * defaults. The validator (manifest.ts) enforces exactly these, and the published JSON Schema
 * (manifest.schema.json) declares exactly these: test/unit/tasks/manifest-schema.test.ts compares
 * the two and runs every fixture through both.
 */
/* eslint-disable no-control-regex -- several patterns exist to refuse NUL and control characters */
import { DURATION_RE } from './duration.js';

/** Allowed keys of each object of a manifest, by path (`''` is the root). Anything else is rejected. */
export const MANIFEST_KEYS = {
  '': ['version', 'kind', 'name', 'metadata', 'repository', 'prompt', 'agent', 'lifecycle', 'artifacts'],
  metadata: ['id', 'name', 'labels'],
  repository: ['url', 'branch'],
  agent: ['prompt', 'model', 'command'],
  lifecycle: ['timeout', 'failure_action'],
  artifacts: ['patterns'],
} as const satisfies Record<string, readonly string[]>;

/** Keys that must be present in each object (the root's name and prompt have two homes; see the validator). */
export const MANIFEST_REQUIRED = {
  '': ['repository'],
  metadata: [],
  repository: ['url'],
  agent: [],
  lifecycle: [],
  artifacts: [],
} as const satisfies Record<keyof typeof MANIFEST_KEYS, readonly string[]>;

/** `failure_action` values: destroy the VM when the task fails (default), or keep it (failed_preserved). */
export const FAILURE_ACTIONS = ['destroy', 'preserve'] as const;
export type FailureAction = (typeof FAILURE_ACTIONS)[number];

/** Task names and metadata ids: 1–128 of [A-Za-z0-9._-], starting with a letter or digit. */
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/u;

/** Label keys: 1–63 of [A-Za-z0-9._/-], starting and ending with a letter or digit. */
export const LABEL_KEY_RE = /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/u;
/** Label keys refused although they match the pattern (prototype-pollution names). */
export const RESERVED_LABEL_KEYS = ['constructor', 'prototype', '__proto__'] as const;
export const MAX_LABELS = 32;
export const MAX_LABEL_VALUE_CHARS = 256;
/** Label values: strings without control characters. */
export const LABEL_VALUE_RE = /^[^\u0000-\u001f\u007f]*$/u;

/**
 * Repository URLs (at most {@link MAX_URL_CHARS} characters, no whitespace or control characters):
 * - `https://`, `http://`, `git://` and `ssh://` URLs with a host;
 * - scp-like `user@host:path` (`git@github.com:org/repo.git`);
 * - `file:///absolute/path` and absolute local paths `/srv/repos/x` (the embedded default and
 *   tests clone local repositories).
 * Nothing may start with `-` (it would read as a git option), and other transports (`ext::`,
 * `fd::`, relative paths) are refused. Passwords are refused too: credentials
 * do not belong in manifests (they would show up in task records and logs), so a user part
 * (`ssh://git@host/x`) has no `:password`.
 */
export const REPO_URL_RE =
  /^(?:(?:https?|git|ssh):\/\/(?:[A-Za-z0-9_][A-Za-z0-9._~%!$&'()*+,;=-]*@)?(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?:\/[^\s\\\u0000-\u001f\u007f]*)?|file:\/\/\/[^\s\\\u0000-\u001f\u007f]*|\/[^\s\\\u0000-\u001f\u007f]+|[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:(?!\/)[^\s\\\u0000-\u001f\u007f]+)$/u;
export const MAX_URL_CHARS = 2048;

/**
 * Branch names: 1–255 characters of [A-Za-z0-9._/-], not starting with `-`, `.` or `/`, without
 * `..` or `//`, not ending in `/`, `.` or `.lock` (git's ref-name rules, narrowed).
 */
export const BRANCH_RE = /^(?![-./])(?!.*\.\.)(?!.*\/\/)(?!.*(?:\/|\.|\.lock)$)[A-Za-z0-9._/-]{1,255}$/u;

/** Model names: 1–128 of [A-Za-z0-9._:/@-], starting with a letter or digit. */
export const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/u;

/** Prompts: 1–65536 characters (code points), not only whitespace, no NUL. */
export const MAX_PROMPT_CHARS = 65_536;
/** A prompt is not blank and has no NUL (the JSON Schema pattern; NUL cannot be an argv byte). */
export const PROMPT_RE = /^(?=[\s\S]*\S)[^\u0000]*$/u;

/** Agent command templates: 1–64 argv elements of 1–8192 characters, no NUL. */
export const MAX_COMMAND_ARGS = 64;
export const MAX_COMMAND_ARG_CHARS = 8192;
export const COMMAND_ARG_RE = /^[^\u0000]+$/u;
/** The placeholders substituted in command templates. The program (element 0) may hold none of them. */
export const PLACEHOLDER_RE = /\{(?:prompt|model)\}/u;

/** `lifecycle.timeout` syntax (duration.ts) and bounds: 1 second to 7 days. */
export const TIMEOUT_RE = DURATION_RE;
export const MIN_TIMEOUT_MS = 1_000;
export const MAX_TIMEOUT_MS = 7 * 86_400_000;

/**
 * Artifact patterns: globs relative to the task's outbox (`*` within a segment, `**` across
 * segments, `?` one character), 1–256 characters, not absolute, no `..` segment, no backslash or NUL.
 */
export const ARTIFACT_PATTERN_RE = /^(?!\/)(?!(?:.*\/)?\.\.(?:\/|$))[^\\\u0000]{1,256}$/u;
export const MAX_ARTIFACT_PATTERNS = 32;

/** Defaults applied when a manifest leaves a field out (and the deployment sets none). */
export const MANIFEST_DEFAULTS = {
  /** Model passed as `{model}`. */
  model: 'claude-sonnet-4-5',
  /** Claude Code, as the spec names it: `claude -p {prompt} --output-format stream-json --model {model}`. */
  command: ['claude', '-p', '{prompt}', '--output-format', 'stream-json', '--model', '{model}'],
  /** `lifecycle.timeout`. */
  timeout: '1h',
  failureAction: 'destroy',
  /** Every file the task leaves in its outbox. */
  artifactPatterns: ['**'],
} as const;
