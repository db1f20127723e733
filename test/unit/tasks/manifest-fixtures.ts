/**
 * Manifest fixtures shared by the validator tests and the schema-agreement test. Object-form
 * fixtures go through both the validator and the published JSON Schema; `semantic` marks the few
 * the schema accepts and only the validator refuses (documented in the schema's $comment).
 */

export const MINIMAL = { name: 'fix-login', repository: { url: '/srv/repos/app' }, prompt: 'Fix the login bug' };

export const FULL = {
  version: '1',
  kind: 'Task',
  metadata: { id: 'JIRA-12', name: 'fix-login', labels: { team: 'web', 'example.com/tier': 'gold' } },
  repository: { url: 'https://example.com/org/app.git', branch: 'feature/login' },
  agent: { prompt: 'Fix the login bug', model: 'claude-opus-4-1', command: ['my-agent', '--prompt', '{prompt}', '--model={model}'] },
  lifecycle: { timeout: '1h30m', failure_action: 'preserve' },
  artifacts: { patterns: ['reports/**', '*.diff'] },
};

export interface Fixture {
  readonly name: string;
  readonly manifest: unknown;
}

export interface InvalidFixture extends Fixture {
  /** Part of the 400 message (the path of the offending field, usually). */
  readonly message: string | RegExp;
  /** Valid for the JSON Schema; refused by a check the schema cannot express. */
  readonly semantic?: true;
}

const with_ = (patch: Record<string, unknown>): Record<string, unknown> => ({ ...MINIMAL, ...patch });
const withRepo = (repo: Record<string, unknown>): Record<string, unknown> => ({ ...MINIMAL, repository: repo });
const withAgent = (agent: Record<string, unknown>): Record<string, unknown> => {
  const { prompt: _p, ...rest } = MINIMAL;
  return { ...rest, agent };
};
const withLife = (life: Record<string, unknown>): Record<string, unknown> => ({ ...MINIMAL, lifecycle: life });

export const VALID: readonly Fixture[] = [
  { name: 'minimal form', manifest: MINIMAL },
  { name: 'full form', manifest: FULL },
  { name: 'version as the number 1', manifest: with_({ version: 1 }) },
  { name: 'metadata.name only', manifest: { repository: MINIMAL.repository, prompt: 'x', metadata: { name: 'a' } } },
  { name: 'name and equal metadata.name', manifest: with_({ metadata: { name: 'fix-login' } }) },
  { name: 'top-level prompt with an agent block holding the model', manifest: with_({ agent: { model: 'gpt-5' } }) },
  { name: 'https URL with port', manifest: withRepo({ url: 'https://git.example.com:8443/a/b.git' }) },
  { name: 'http URL', manifest: withRepo({ url: 'http://127.0.0.1:9418/repo' }) },
  { name: 'git URL', manifest: withRepo({ url: 'git://127.0.0.1/repo.git' }) },
  { name: 'ssh URL with user', manifest: withRepo({ url: 'ssh://git@example.com:2222/org/repo.git' }) },
  { name: 'scp-like URL', manifest: withRepo({ url: 'git@github.com:org/repo.git' }) },
  { name: 'file URL', manifest: withRepo({ url: 'file:///tmp/repo' }) },
  { name: 'IPv6 host', manifest: withRepo({ url: 'https://[::1]:8080/repo.git' }) },
  { name: 'branch with slashes', manifest: withRepo({ url: '/r', branch: 'release/2.0' }) },
  { name: 'timeout 1s (lower bound)', manifest: withLife({ timeout: '1s' }) },
  { name: 'timeout 7d (upper bound)', manifest: withLife({ timeout: '7d' }) },
  { name: 'timeout 90s', manifest: withLife({ timeout: '90s' }) },
  { name: 'timeout 1d2h3m4s', manifest: withLife({ timeout: '1d2h3m4s' }) },
  { name: 'failure_action destroy', manifest: withLife({ failure_action: 'destroy' }) },
  { name: 'prompt with newlines, quotes and shell text', manifest: with_({ prompt: 'line1\n"$(rm -rf /)" `x` {model}\t' }) },
  { name: 'non-ASCII prompt', manifest: with_({ prompt: 'Réparer le bug 🐛' }) },
  { name: 'prompt of 65536 characters', manifest: with_({ prompt: 'p'.repeat(65_536) }) },
  {
    name: 'command with placeholders inside elements',
    manifest: withAgent({ prompt: 'x', command: ['run', '--ask={prompt}', 'x{model}y'] }),
  },
  { name: 'command with JSON-looking text', manifest: withAgent({ prompt: 'x', command: ['run', '{"a":1}'] }) },
  {
    name: 'labels at their limits',
    manifest: with_({ metadata: { labels: Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, 'v'.repeat(256)])) } }),
  },
  { name: 'empty metadata with top-level name', manifest: with_({ metadata: {} }) },
  { name: 'artifact globs', manifest: with_({ artifacts: { patterns: ['**/*.md', 'out/?.txt', 'a..b'] } }) },
  { name: 'name of 128 characters', manifest: with_({ name: `a${'b'.repeat(127)}` }) },
];

export const INVALID: readonly InvalidFixture[] = [
  // shape
  { name: 'not an object', manifest: 'name: x', message: 'manifest: must be an object' },
  { name: 'an array', manifest: [MINIMAL], message: 'manifest: must be an object' },
  { name: 'null', manifest: null, message: 'manifest: must be an object' },
  { name: 'unknown top-level field', manifest: with_({ foo: 1 }), message: 'foo: unknown field' },
  { name: 'unknown nested field', manifest: withRepo({ url: '/r', foo: 'x' }), message: 'repository.foo: unknown field' },
  { name: 'several unknown fields', manifest: with_({ vm: {}, secrets: [] }), message: /unknown fields vm, secrets/u },
  {
    name: '__proto__ key',
    manifest: JSON.parse('{"name":"a","repository":{"url":"/r"},"prompt":"x","__proto__":{"polluted":true}}') as unknown,
    message: '__proto__: unknown field',
  },
  { name: 'constructor key', manifest: with_({ constructor: { prototype: { polluted: true } } }), message: 'constructor: unknown field' },
  {
    name: '__proto__ inside repository',
    manifest: withRepo(JSON.parse('{"url":"/r","__proto__":{"x":1}}') as Record<string, unknown>),
    message: 'repository.__proto__: unknown field',
  },
  {
    name: '__proto__ label',
    manifest: with_({ metadata: { labels: JSON.parse('{"__proto__":"x"}') as unknown } }),
    message: 'metadata.labels.__proto__',
  },
  { name: 'constructor label', manifest: with_({ metadata: { labels: { constructor: 'x' } } }), message: 'metadata.labels.constructor' },
  // required
  { name: 'no name anywhere', manifest: { repository: { url: '/r' }, prompt: 'x' }, message: 'name: is required' },
  { name: 'no repository', manifest: { name: 'a', prompt: 'x' }, message: 'repository: is required' },
  { name: 'no repository.url', manifest: withRepo({ branch: 'main' }), message: 'repository.url: is required' },
  { name: 'no prompt anywhere', manifest: { name: 'a', repository: { url: '/r' } }, message: 'prompt: is required' },
  { name: 'agent block without prompt and no top-level prompt', manifest: withAgent({ model: 'm' }), message: 'prompt: is required' },
  {
    name: 'prompt and agent.prompt both',
    manifest: with_({ agent: { prompt: 'y' } }),
    message: 'prompt: give prompt or agent.prompt, not both',
  },
  // wrong types
  { name: 'prompt is a number', manifest: with_({ prompt: 42 }), message: 'prompt: must be a string' },
  { name: 'prompt is an object', manifest: with_({ prompt: { text: 'x' } }), message: 'prompt: must be a string' },
  { name: 'prompt is an array', manifest: with_({ prompt: ['x'] }), message: 'prompt: must be a string' },
  { name: 'name is a number', manifest: with_({ name: 7 }), message: 'name: must be a string' },
  { name: 'repository is a string', manifest: withRepo('https://x/y' as never), message: 'repository: must be an object' },
  { name: 'repository.url is a number', manifest: withRepo({ url: 1 }), message: 'repository.url: must be a string' },
  { name: 'agent is an array', manifest: with_({ agent: [] }), message: 'agent: must be an object' },
  { name: 'command is a string', manifest: withAgent({ prompt: 'x', command: 'claude -p' }), message: 'agent.command: must be an array' },
  {
    name: 'command has a number',
    manifest: withAgent({ prompt: 'x', command: ['run', 1] }),
    message: 'agent.command[1]: must be a string',
  },
  { name: 'timeout is a number', manifest: withLife({ timeout: 30 }), message: 'lifecycle.timeout: must be a string' },
  {
    name: 'labels value is a number',
    manifest: with_({ metadata: { labels: { tier: 1 } } }),
    message: 'metadata.labels.tier: label values must be strings',
  },
  { name: 'version 2', manifest: with_({ version: '2' }), message: 'version: must be "1"' },
  { name: 'kind Job', manifest: with_({ kind: 'Job' }), message: 'kind: must be "Task"' },
  { name: 'metadata null', manifest: with_({ metadata: null }), message: 'metadata: must be an object' },
  // values
  { name: 'blank prompt', manifest: with_({ prompt: '  \n\t ' }), message: 'prompt: is invalid' },
  { name: 'empty prompt', manifest: with_({ prompt: '' }), message: 'prompt: must not be empty' },
  { name: 'NUL in prompt', manifest: with_({ prompt: 'a\u0000b' }), message: 'prompt: is invalid' },
  { name: 'prompt too long', manifest: with_({ prompt: 'p'.repeat(65_537) }), message: 'prompt: must be at most 65536 characters' },
  { name: 'NUL in name', manifest: with_({ name: 'a\u0000' }), message: 'name: is invalid' },
  { name: 'name with a space', manifest: with_({ name: 'fix login' }), message: 'name: is invalid' },
  { name: 'name starting with a dash', manifest: with_({ name: '-x' }), message: 'name: is invalid' },
  { name: 'name too long', manifest: with_({ name: 'a'.repeat(129) }), message: 'name: must be at most 128 characters' },
  {
    name: 'NUL in a command element',
    manifest: withAgent({ prompt: 'x', command: ['run', 'a\u0000'] }),
    message: 'agent.command[1]: is invalid',
  },
  { name: 'empty command', manifest: withAgent({ prompt: 'x', command: [] }), message: 'agent.command: must not be empty' },
  {
    name: 'empty command element',
    manifest: withAgent({ prompt: 'x', command: ['run', ''] }),
    message: 'agent.command[1]: must not be empty',
  },
  {
    name: 'placeholder as the program',
    manifest: withAgent({ prompt: 'x', command: ['{prompt}'] }),
    message: 'agent.command[0]: the program must be fixed',
  },
  {
    name: 'too many command elements',
    manifest: withAgent({ prompt: 'x', command: Array.from({ length: 65 }, () => 'a') }),
    message: 'at most 64 items',
  },
  { name: 'bad model', manifest: withAgent({ prompt: 'x', model: 'a model' }), message: 'agent.model: is invalid' },
  {
    name: 'failure_action keep',
    manifest: withLife({ failure_action: 'keep' }),
    message: 'lifecycle.failure_action: must be one of destroy, preserve',
  },
  {
    name: 'too many labels',
    manifest: with_({ metadata: { labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) } }),
    message: 'at most 32 labels',
  },
  {
    name: 'label value with a newline',
    manifest: with_({ metadata: { labels: { a: 'x\ny' } } }),
    message: 'metadata.labels.a: must not contain control characters',
  },
  {
    name: 'artifact pattern with ..',
    manifest: with_({ artifacts: { patterns: ['../secrets'] } }),
    message: 'artifacts.patterns[0]: is invalid',
  },
  {
    name: 'artifact pattern with inner ..',
    manifest: with_({ artifacts: { patterns: ['a/../../b'] } }),
    message: 'artifacts.patterns[0]: is invalid',
  },
  {
    name: 'absolute artifact pattern',
    manifest: with_({ artifacts: { patterns: ['/etc/*'] } }),
    message: 'artifacts.patterns[0]: is invalid',
  },
  // durations
  { name: 'duration without unit', manifest: withLife({ timeout: '30' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'negative duration', manifest: withLife({ timeout: '-5m' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'duration in years', manifest: withLife({ timeout: '1y' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'duration 5mm', manifest: withLife({ timeout: '5mm' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'empty duration', manifest: withLife({ timeout: '' }), message: 'lifecycle.timeout: must not be empty' },
  { name: 'duration with a space', manifest: withLife({ timeout: '1h 30m' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'duration in the wrong order', manifest: withLife({ timeout: '30m1h' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'fractional duration', manifest: withLife({ timeout: '1.5h' }), message: 'lifecycle.timeout: is invalid' },
  { name: 'duration in ms', manifest: withLife({ timeout: '500ms' }), message: 'lifecycle.timeout: is invalid' },
  {
    name: 'duration 0s (below 1s)',
    manifest: withLife({ timeout: '0s' }),
    message: 'lifecycle.timeout: must be between 1s and 7d',
    semantic: true,
  },
  {
    name: 'duration 8d (above 7d)',
    manifest: withLife({ timeout: '8d' }),
    message: 'lifecycle.timeout: must be between 1s and 7d',
    semantic: true,
  },
  {
    name: 'duration 7d1s',
    manifest: withLife({ timeout: '7d1s' }),
    message: 'lifecycle.timeout: must be between 1s and 7d',
    semantic: true,
  },
  {
    name: 'name differs from metadata.name',
    manifest: with_({ metadata: { name: 'other' } }),
    message: 'name: differs from metadata.name',
    semantic: true,
  },
  // repository URLs and branches
  { name: 'URL starting with a dash', manifest: withRepo({ url: '--upload-pack=touch /tmp/x' }), message: 'repository.url: is invalid' },
  { name: 'ext:: transport', manifest: withRepo({ url: 'ext::sh -c touch% /tmp/pwned' }), message: 'repository.url: is invalid' },
  { name: 'relative path', manifest: withRepo({ url: 'repos/app' }), message: 'repository.url: is invalid' },
  { name: 'ftp URL', manifest: withRepo({ url: 'ftp://example.com/repo' }), message: 'repository.url: is invalid' },
  {
    name: 'URL with a password',
    manifest: withRepo({ url: 'https://user:secret@example.com/repo.git' }),
    message: 'repository.url: is invalid',
  },
  { name: 'ssh URL with a dash host', manifest: withRepo({ url: 'ssh://-oProxyCommand=x/repo' }), message: 'repository.url: is invalid' },
  {
    name: 'ssh URL with a dash user',
    manifest: withRepo({ url: 'ssh://-oProxyCommand=x@host/repo' }),
    message: 'repository.url: is invalid',
  },
  { name: 'scp-like with a dash user', manifest: withRepo({ url: '-oProxyCommand=x@host:repo' }), message: 'repository.url: is invalid' },
  { name: 'URL with a space', manifest: withRepo({ url: 'https://example.com/a b' }), message: 'repository.url: is invalid' },
  { name: 'URL with a newline', manifest: withRepo({ url: '/srv/repo\n--x' }), message: 'repository.url: is invalid' },
  { name: 'URL with NUL', manifest: withRepo({ url: '/srv/repo\u0000' }), message: 'repository.url: is invalid' },
  { name: 'URL too long', manifest: withRepo({ url: `/${'a'.repeat(2048)}` }), message: 'repository.url: must be at most 2048 characters' },
  { name: 'branch starting with a dash', manifest: withRepo({ url: '/r', branch: '--orphan' }), message: 'repository.branch: is invalid' },
  { name: 'branch with ..', manifest: withRepo({ url: '/r', branch: 'a..b' }), message: 'repository.branch: is invalid' },
  { name: 'branch ending in .lock', manifest: withRepo({ url: '/r', branch: 'main.lock' }), message: 'repository.branch: is invalid' },
  { name: 'branch with a space', manifest: withRepo({ url: '/r', branch: 'my branch' }), message: 'repository.branch: is invalid' },
];
