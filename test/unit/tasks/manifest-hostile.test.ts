/**
 * Hostile submissions: every one is a 400 `task.invalid_manifest` with a clear message, answered
 * quickly, and none crashes or pollutes anything.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { parseTaskSubmission } from '../../../src/tasks/manifest.js';
import { MINIMAL } from './manifest-fixtures.js';

const GOOD_YAML = 'name: a\nrepository: {url: /r}\nprompt: x\n';

function billionLaughs(levels: number, width: number): string {
  let doc = `a0: &a0 ["lol"${',"lol"'.repeat(width - 1)}]\n`;
  for (let i = 1; i <= levels; i++) doc += `a${i}: &a${i} [${Array.from({ length: width }, () => `*a${i - 1}`).join(',')}]\n`;
  return doc;
}

const HOSTILE: ReadonlyArray<{ name: string; body: unknown; message: string | RegExp }> = [
  // body shape
  { name: 'neither manifest_yaml nor manifest', body: {}, message: 'manifest_yaml or manifest is required' },
  { name: 'both manifest_yaml and manifest', body: { manifest_yaml: GOOD_YAML, manifest: MINIMAL }, message: 'not both' },
  { name: 'body is an array', body: [MINIMAL], message: 'body: must be a JSON object' },
  { name: 'body is a string', body: GOOD_YAML, message: 'body: must be a JSON object' },
  { name: 'body is null', body: null, message: 'body: must be a JSON object' },
  { name: 'unknown body field', body: { manifest: MINIMAL, priority: 1 }, message: 'priority: unknown field' },
  {
    name: '__proto__ body field',
    body: JSON.parse(`{"manifest":${JSON.stringify(MINIMAL)},"__proto__":{"x":1}}`) as unknown,
    message: '__proto__: unknown field',
  },
  { name: 'manifest_yaml is not a string', body: { manifest_yaml: { name: 'a' } }, message: 'manifest_yaml: must be a string' },
  { name: 'manifest is a string', body: { manifest: GOOD_YAML }, message: 'manifest: must be an object' },
  // YAML
  { name: 'billion laughs (aliases)', body: { manifest_yaml: billionLaughs(9, 9) }, message: /too many aliases/u },
  { name: 'alias bomb under the node limit', body: { manifest_yaml: billionLaughs(4, 5) }, message: /too many aliases/u },
  { name: 'document over 64 KiB', body: { manifest_yaml: `${GOOD_YAML}# ${'x'.repeat(64 * 1024)}\n` }, message: 'larger than 65536 bytes' },
  {
    name: 'multi-byte text over 64 KiB in bytes',
    body: { manifest_yaml: `name: a\nrepository: {url: /r}\nprompt: "${'é'.repeat(33_000)}"\n` },
    message: 'larger than 65536 bytes',
  },
  { name: 'two documents', body: { manifest_yaml: `${GOOD_YAML}---\n${GOOD_YAML}` }, message: 'only one YAML document' },
  { name: 'empty document', body: { manifest_yaml: '' }, message: 'the document is empty' },
  { name: 'comment-only document', body: { manifest_yaml: '# nothing\n' }, message: 'the document is empty' },
  { name: 'scalar root', body: { manifest_yaml: 'just a string' }, message: 'root must be a mapping' },
  { name: 'sequence root', body: { manifest_yaml: '- name: a\n' }, message: 'root must be a mapping' },
  { name: 'deep flow nesting', body: { manifest_yaml: `name: ${'['.repeat(5000)}${']'.repeat(5000)}\n` }, message: /nesting deeper/u },
  { name: 'unterminated deep nesting', body: { manifest_yaml: `name: ${'['.repeat(60_000)}` }, message: /manifest_yaml: /u },
  {
    name: 'deep flow nesting again (a second deep document must not crash the process)',
    body: { manifest_yaml: `name: ${'{a: '.repeat(15_000)}` },
    message: /nesting deeper/u,
  },
  {
    name: 'compact block sequences',
    body: { manifest_yaml: `name: a\nrepository: {url: /r}\nprompt:\n  ${'- '.repeat(30_000)}x\n` },
    message: /nesting deeper/u,
  },
  { name: 'chained complex keys', body: { manifest_yaml: `${'? '.repeat(30_000)}x\n` }, message: /nesting deeper/u },
  {
    name: 'deep block nesting',
    body: { manifest_yaml: Array.from({ length: 40 }, (_, i) => `${' '.repeat(i)}a:`).join('\n') },
    message: /nesting deeper/u,
  },
  {
    name: 'explicit !!binary tag',
    body: { manifest_yaml: 'name: a\nrepository: {url: /r}\nprompt: !!binary aGVsbG8=\n' },
    message: 'explicit tags',
  },
  {
    name: 'custom tag',
    body: { manifest_yaml: 'name: !js/function "x"\nrepository: {url: /r}\nprompt: x\n' },
    message: /Unresolved tag|explicit tags/u,
  },
  { name: 'explicit !!str tag', body: { manifest_yaml: 'name: !!str a\nrepository: {url: /r}\nprompt: x\n' }, message: 'explicit tags' },
  { name: 'duplicate keys', body: { manifest_yaml: `${GOOD_YAML}name: b\n` }, message: 'duplicate key "name"' },
  { name: 'complex key', body: { manifest_yaml: `${GOOD_YAML}? [a, b]\n: c\n` }, message: 'mapping keys must be plain strings' },
  { name: 'NUL byte in the text', body: { manifest_yaml: `${GOOD_YAML}x: "\u0000"\n` }, message: 'NUL byte' },
  {
    name: 'escaped NUL in a prompt',
    body: { manifest_yaml: 'name: a\nrepository: {url: /r}\nprompt: "a\\0b"\n' },
    message: 'prompt: is invalid',
  },
  { name: 'syntax error', body: { manifest_yaml: 'name: [a\nrepository: {url: /r}\n' }, message: /manifest_yaml: line \d+/u },
  {
    name: 'merge key',
    body: { manifest_yaml: 'base: &b {url: /r}\nname: a\nrepository:\n  <<: *b\nprompt: x\n' },
    message: /unknown field/u,
  },
  {
    name: '__proto__ key in YAML',
    body: { manifest_yaml: `${GOOD_YAML}__proto__: {polluted: true}\n` },
    message: '__proto__: unknown field',
  },
  {
    name: 'constructor key in YAML',
    body: { manifest_yaml: `${GOOD_YAML}constructor: {prototype: {polluted: true}}\n` },
    message: 'constructor: unknown field',
  },
  {
    name: 'numeric prompt in YAML',
    body: { manifest_yaml: 'name: a\nrepository: {url: /r}\nprompt: 42\n' },
    message: 'prompt: must be a string',
  },
  { name: 'null prompt in YAML', body: { manifest_yaml: 'name: a\nrepository: {url: /r}\nprompt:\n' }, message: /prompt/u },
  {
    name: 'boolean-looking name stays a string but is valid',
    body: { manifest_yaml: 'name: yes\nrepository: {url: /r}\nprompt: x\ntimeout: 30\n' },
    message: 'timeout: unknown field',
  },
  {
    name: 'bare-number duration in YAML',
    body: { manifest_yaml: `${GOOD_YAML}lifecycle: {timeout: 30}\n` },
    message: 'lifecycle.timeout: must be a string',
  },
  {
    name: 'quoted bare-number duration',
    body: { manifest_yaml: `${GOOD_YAML}lifecycle: {timeout: "30"}\n` },
    message: 'lifecycle.timeout: is invalid',
  },
  {
    name: 'many keys (quadratic duplicate check)',
    body: { manifest_yaml: Array.from({ length: 5000 }, (_, i) => `k${i}: 1`).join('\n') },
    message: /nodes|unknown field/u,
  },
];

describe('task manifest: hostile submissions', () => {
  for (const h of HOSTILE) {
    test(h.name, () => {
      const t0 = performance.now();
      assert.throws(
        () => parseTaskSubmission(h.body),
        (err: unknown) => {
          assert.ok(err instanceof SvcError, `an SvcError, got ${String(err)}`);
          assert.equal(err.code, 'task.invalid_manifest');
          assert.equal(err.httpStatus, 400);
          if (typeof h.message === 'string')
            assert.ok(
              err.message.includes(h.message),
              `message ${JSON.stringify(err.message.slice(0, 300))} lacks ${JSON.stringify(h.message)}`,
            );
          else assert.match(err.message, h.message);
          assert.ok(err.message.length < 1000, 'the message is short');
          return true;
        },
      );
      // Generous: the point is "not seconds of CPU", on a loaded 2-core machine.
      assert.ok(performance.now() - t0 < 5000, 'refused quickly');
    });
  }

  test('nothing was polluted', () => {
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    assert.equal(({} as Record<string, unknown>)['x'], undefined);
  });

  test('property: arbitrary text as manifest_yaml never throws anything but a 400', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (text) => {
        try {
          parseTaskSubmission({ manifest_yaml: text });
        } catch (err) {
          assert.ok(err instanceof SvcError && err.code === 'task.invalid_manifest', String(err));
        }
      }),
      { numRuns: 300 },
    );
  });

  test('property: arbitrary JSON values as manifest never throw anything but a 400', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        try {
          parseTaskSubmission({ manifest: value });
        } catch (err) {
          assert.ok(err instanceof SvcError && err.code === 'task.invalid_manifest', String(err));
        }
      }),
      { numRuns: 300 },
    );
  });
});
