/**
 * Loadout documents (src/loadouts/loadout-record.ts) and their published JSON Schema
 * (loadout-v1.schema.json): they agree on every shape in the table; the YAML safety of task
 * manifests applies (size, depth, aliases, tags, several documents); metadata.name must be the
 * key; secret-bearing environment and file contents are refused naming the field; a qemu guest's
 * cloud-init seed carries the files, packages and environment.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import { SvcError } from '../../../src/core/errors.js';
import { environmentFileLine, provisioningMaterial } from '../../../src/loadouts/apply.js';
import { loadoutJson, parseLoadout } from '../../../src/loadouts/loadout-record.js';
import { buildCloudInit } from '../../../src/vms/cloud-init.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'loadouts', 'loadout-v1.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
addFormats(ajv, ['date-time']);
ajv.addSchema(schema);
const documentAccepts = ajv.getSchema(`${schema.$id}#/$defs/Document`)!;
const recordAccepts = ajv.getSchema(schema.$id)!;

function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'ok';
  } catch (e) {
    if (e instanceof SvcError) return e.code;
    throw e;
  }
}

const GOOD = `metadata: {name: k, description: d, labels: {category: dev}}
packages: [git, python3]
tools: [git]
environment: {EDITOR: vi, N: 3}
files: [{path: a/b.txt, content: hi, mode: "0600"}, {path: c, mode: 420}]
`;

/** Shapes the schema can judge: [what, YAML, accepted]. */
const SHAPES: [string, string, boolean][] = [
  ['the full document', GOOD, true],
  ['only metadata', 'metadata: {name: k}', true],
  ['apiVersion and kind', 'apiVersion: sandboxd.loadout/v1\nkind: Loadout\nmetadata: {name: k}', true],
  ['no metadata', 'packages: [git]', false],
  ['an unknown top-level field', 'metadata: {name: k}\nscripts: [x]', false],
  ['an unknown metadata field', 'metadata: {name: k, owner: x}', false],
  ['a wrong apiVersion', 'apiVersion: v2\nmetadata: {name: k}', false],
  ['a bad package name', 'metadata: {name: k}\npackages: ["Git Hub"]', false],
  ['a tool with a slash', 'metadata: {name: k}\ntools: [/bin/sh]', false],
  ['packages not a list', 'metadata: {name: k}\npackages: git', false],
  ['an absolute file path', 'metadata: {name: k}\nfiles: [{path: /etc/passwd, content: x}]', false],
  ['a file without a path', 'metadata: {name: k}\nfiles: [{content: x}]', false],
  ['a file with an unknown field', 'metadata: {name: k}\nfiles: [{path: a, owner: root}]', false],
  ['a bad mode', 'metadata: {name: k}\nfiles: [{path: a, mode: "0999"}]', false],
  ['a bad env name', 'metadata: {name: k}\nenvironment: {"1X": y}', false],
  ['too many packages', `metadata: {name: k}\npackages: [${Array.from({ length: 65 }, (_, i) => `p${i}`).join(', ')}]`, false],
];

describe('loadout documents', () => {
  for (const [what, text, ok] of SHAPES) {
    test(`${what}: ${ok ? 'accepted' : 'refused'} by the validator and the schema alike`, () => {
      assert.equal(
        codeOf(() => parseLoadout(text, 'k', 0)),
        ok ? 'ok' : 'loadout.invalid',
      );
      assert.equal(documentAccepts(parse(text)), ok, JSON.stringify(documentAccepts.errors));
    });
  }

  test('the record matches the schema, in the list and the detail', () => {
    const l = parseLoadout(GOOD, 'k', Date.UTC(2026, 0, 1));
    for (const detail of [false, true]) assert.ok(recordAccepts(loadoutJson(l, detail)), JSON.stringify(recordAccepts.errors));
    assert.deepEqual(l.environment, { EDITOR: 'vi', N: '3' });
    assert.deepEqual(
      l.files.map((f) => [f.path, f.mode]),
      [
        ['a/b.txt', 0o600],
        ['c', 0o644],
      ],
    );
  });

  test('metadata.name must be the catalog key', () => {
    assert.equal(
      codeOf(() => parseLoadout('metadata: {name: k}', 'other', 0)),
      'loadout.name_mismatch',
    );
  });

  test('the YAML safety of task manifests applies', () => {
    const deep = `metadata: {name: k}\nenvironment: ${'['.repeat(40)}${']'.repeat(40)}`;
    const bomb = `a: &a [x, x, x, x, x, x, x, x, x, x]\n${Array.from({ length: 20 }, (_, i) => `b${i}: &b${i} [*a, *a]`).join('\n')}\nmetadata: {name: k}`;
    for (const [what, text] of [
      ['deep nesting', deep],
      ['an alias bomb', bomb],
      ['a tag', 'metadata: !!binary aGk=\n'],
      ['two documents', 'metadata: {name: k}\n---\nmetadata: {name: k}\n'],
      ['more than 64 KiB', `metadata: {name: k, description: "${'x'.repeat(70_000)}"}`],
      ['a duplicate key', 'metadata: {name: k}\nmetadata: {name: k}\n'],
    ] as const)
      assert.equal(
        codeOf(() => parseLoadout(text, 'k', 0)),
        'loadout.invalid',
        what,
      );
  });

  test('paths stay inside the work directory; secrets are refused naming the field', () => {
    for (const p of ['../x', 'a/../../x', 'a//b', './a', 'a\\b', 'a\u0000b'])
      assert.equal(
        codeOf(() => parseLoadout(`metadata: {name: k}\nfiles: [{path: ${JSON.stringify(p)}}]`, 'k', 0)),
        'loadout.invalid',
        p,
      );
    for (const key of ['GITHUB_TOKEN', 'DB_PASSWORD', 'apiKey', 'AWS_SECRET_ACCESS_KEY', 'PRIVATE_KEY'])
      assert.equal(
        codeOf(() => parseLoadout(`metadata: {name: k}\nenvironment: {${key}: x}`, 'k', 0)),
        'loadout.secret_field',
        key,
      );
    assert.equal(
      codeOf(() => parseLoadout('metadata: {name: k}\nenvironment: {AUTH: "Bearer abcdefghijkl"}', 'k', 0)),
      'loadout.secret_field',
    );
    const pem = JSON.stringify('-----BEGIN RSA PRIVATE KEY-----\nMII\n');
    assert.equal(
      codeOf(() => parseLoadout(`metadata: {name: k}\nfiles: [{path: id_rsa, content: ${pem}}]`, 'k', 0)),
      'loadout.secret_field',
    );
    assert.equal(
      codeOf(() => parseLoadout('metadata: {name: k}\nenvironment: {input_tokens: "3"}', 'k', 0)),
      'ok',
    );
    for (const key of ['PATH', 'SANDBOX_AGENT_SERVER', 'SBX_SERVER', 'SVC_STATE_DIR', 'SANDBOXD_LOCAL_VM'])
      assert.equal(
        codeOf(() => parseLoadout(`metadata: {name: k}\nenvironment: {${key}: /x}`, 'k', 0)),
        'loadout.invalid',
        key,
      );
  });

  test("a qemu guest's seed carries the files, the packages and the environment", () => {
    const l = parseLoadout(GOOD, 'k', 0);
    const m = provisioningMaterial(l, { EDITOR: 'nano', Q: 'say "hi" \\ bye' });
    const seed = buildCloudInit({
      vm: 'agent-x',
      instanceId: 'i-1',
      profile: 'p',
      server: '10.0.0.1:8120',
      certs: { caPem: 'c', certPem: 'c', keyPem: 'k' },
      sshKeys: [],
      macAddress: '52:54:00:12:34:56',
      loadout: m,
    });
    const cfg = parse(seed.userData.replace(/^#cloud-config\n/, '')) as {
      write_files: { path: string; content: string; permissions: string }[];
      packages: string[];
    };
    const file = cfg.write_files.find((f) => f.path === '/home/agent/workspace/a/b.txt');
    assert.deepEqual([file?.content, file?.permissions], ['hi', '0600']);
    assert.deepEqual(cfg.packages, ['git', 'python3']);
    const env = cfg.write_files.find((f) => f.path === '/etc/sandbox-agent/loadout.env')?.content ?? '';
    assert.equal(env, `EDITOR="nano"\nN="3"\n${environmentFileLine('Q', 'say "hi" \\ bye')}\n`);
    assert.match(
      cfg.write_files.find((f) => f.path.endsWith('sandbox-agent.service'))?.content ?? '',
      /^EnvironmentFile=-\/etc\/sandbox-agent\/loadout\.env$/m,
    );
    assert.equal(environmentFileLine('Q', 'say "hi" \\ bye'), 'Q="say \\"hi\\" \\\\ bye"');
  });
});
