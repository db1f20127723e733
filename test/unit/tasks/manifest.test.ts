import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { buildArgv, parseTaskSubmission, validateManifest } from '../../../src/tasks/manifest.js';
import { MANIFEST_DEFAULTS } from '../../../src/tasks/manifest-rules.js';
import { FULL, INVALID, MINIMAL, VALID } from './manifest-fixtures.js';

describe('task manifest: accepted forms', () => {
  test('the minimal form gets every documented default', () => {
    const m = parseTaskSubmission({ manifest: MINIMAL });
    assert.deepEqual(m, {
      version: '1',
      kind: 'Task',
      name: 'fix-login',
      metadata: { id: null, labels: {} },
      repository: { url: '/srv/repos/app', branch: null },
      agent: {
        prompt: 'Fix the login bug',
        model: 'claude-sonnet-4-5',
        command: ['claude', '-p', '{prompt}', '--output-format', 'stream-json', '--model', '{model}'],
      },
      lifecycle: { timeout: '1h', timeoutMs: 3_600_000, failureAction: 'destroy' },
      artifacts: { patterns: ['**'] },
    });
  });

  test('the full form keeps everything it says', () => {
    const m = parseTaskSubmission({ manifest: FULL });
    assert.equal(m.name, 'fix-login');
    assert.equal(m.metadata.id, 'JIRA-12');
    assert.deepEqual(m.metadata.labels, { team: 'web', 'example.com/tier': 'gold' });
    assert.deepEqual(m.repository, { url: 'https://example.com/org/app.git', branch: 'feature/login' });
    assert.deepEqual(m.agent, {
      prompt: 'Fix the login bug',
      model: 'claude-opus-4-1',
      command: ['my-agent', '--prompt', '{prompt}', '--model={model}'],
    });
    assert.deepEqual(m.lifecycle, { timeout: '1h30m', timeoutMs: 5_400_000, failureAction: 'preserve' });
    assert.deepEqual(m.artifacts.patterns, ['reports/**', '*.diff']);
  });

  test('YAML and JSON forms of the same manifest give the same result', () => {
    const yaml = [
      'version: 1',
      'kind: Task',
      'metadata:',
      '  id: JIRA-12',
      '  name: fix-login',
      '  labels: {team: web, example.com/tier: gold}',
      'repository:',
      '  url: https://example.com/org/app.git',
      '  branch: feature/login',
      'agent:',
      '  prompt: Fix the login bug',
      '  model: claude-opus-4-1',
      '  command: [my-agent, --prompt, "{prompt}", "--model={model}"]',
      'lifecycle:',
      '  timeout: 1h30m',
      '  failure_action: preserve',
      'artifacts:',
      '  patterns: ["reports/**", "*.diff"]',
    ].join('\n');
    assert.deepEqual(parseTaskSubmission({ manifest_yaml: yaml }), parseTaskSubmission({ manifest: FULL }));
  });

  test('a YAML block scalar prompt keeps its newlines', () => {
    const m = parseTaskSubmission({ manifest_yaml: 'name: a\nrepository: {url: /r}\nprompt: |\n  line one\n  line two\n' });
    assert.equal(m.agent.prompt, 'line one\nline two\n');
  });

  test('every valid fixture is accepted', () => {
    for (const f of VALID) assert.doesNotThrow(() => validateManifest(f.manifest), f.name);
  });

  test('deployment defaults apply only where the manifest is silent', () => {
    const defaults = { model: 'house-model', command: ['agent-cli', '{prompt}'], timeoutMs: 120_000 };
    const m = validateManifest(MINIMAL, defaults);
    assert.equal(m.agent.model, 'house-model');
    assert.deepEqual(m.agent.command, ['agent-cli', '{prompt}']);
    assert.equal(m.lifecycle.timeout, '2m');
    const own = validateManifest(FULL, defaults);
    assert.equal(own.agent.model, 'claude-opus-4-1');
    assert.equal(own.agent.command[0], 'my-agent');
  });

  test('durations are normalized', () => {
    assert.equal(validateManifest({ ...MINIMAL, lifecycle: { timeout: '90m' } }).lifecycle.timeout, '1h30m');
    assert.equal(validateManifest({ ...MINIMAL, lifecycle: { timeout: '3600s' } }).lifecycle.timeoutMs, 3_600_000);
  });

  test('the result is deep-frozen and does not alias the input', () => {
    const input = structuredClone(FULL);
    const m = validateManifest(input);
    assert.ok(Object.isFrozen(m) && Object.isFrozen(m.agent) && Object.isFrozen(m.agent.command) && Object.isFrozen(m.metadata.labels));
    input.agent.command.push('--evil');
    assert.equal(m.agent.command.length, 4);
    assert.ok(Object.isFrozen(validateManifest(MINIMAL).agent.command));
    assert.notEqual(validateManifest(MINIMAL).agent.command, MANIFEST_DEFAULTS.command, 'a copy, not the shared default');
  });

  test('a polluted-looking manifest leaves Object.prototype untouched', () => {
    for (const f of INVALID) assert.throws(() => validateManifest(f.manifest));
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });
});

describe('task manifest: every invalid fixture is a 400 naming the field', () => {
  for (const f of INVALID) {
    test(f.name, () => {
      assert.throws(
        () => validateManifest(f.manifest),
        (err: unknown) => {
          assert.ok(err instanceof SvcError, 'an SvcError');
          assert.equal(err.code, 'task.invalid_manifest');
          assert.equal(err.httpStatus, 400);
          if (typeof f.message === 'string')
            assert.ok(err.message.includes(f.message), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f.message)}`);
          else assert.match(err.message, f.message);
          return true;
        },
      );
    });
  }
});

describe('buildArgv', () => {
  test('replaces placeholders that are whole elements or parts of elements', () => {
    assert.deepEqual(buildArgv(MANIFEST_DEFAULTS.command, { prompt: 'Fix it', model: 'm1' }), [
      'claude',
      '-p',
      'Fix it',
      '--output-format',
      'stream-json',
      '--model',
      'm1',
    ]);
    assert.deepEqual(buildArgv(['x', '--model={model}', '{prompt}/{prompt}'], { prompt: 'p', model: 'm' }), ['x', '--model=m', 'p/p']);
  });

  test('a value is never re-scanned or split: shell text stays one literal element', () => {
    const prompt = `"; rm -rf / #{model} $(id) \`id\` 'q' \n next`;
    const argv = buildArgv(['agent', '{prompt}', '{model}'], { prompt, model: '{prompt}' });
    assert.deepEqual(argv, ['agent', prompt, '{prompt}']);
  });

  test('other braces are left alone', () => {
    assert.deepEqual(buildArgv(['a', '{promptx}', '{"k":1}', '{ prompt }'], { prompt: 'P', model: 'M' }), [
      'a',
      '{promptx}',
      '{"k":1}',
      '{ prompt }',
    ]);
  });

  test('property: the template length is kept and placeholder-free elements are unchanged', () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { maxLength: 8 }), fc.string(), fc.string(), (template, prompt, model) => {
        const argv = buildArgv(template, { prompt, model });
        assert.equal(argv.length, template.length);
        template.forEach((el, i) => {
          if (!/\{(prompt|model)\}/u.test(el)) assert.equal(argv[i], el);
          if (el === '{prompt}') assert.equal(argv[i], prompt);
        });
      }),
    );
  });
});
