/**
 * Startup profile bodies (src/profiles/profile-record.ts) and the published JSON Schema
 * (startup-profile-v1.schema.json) agree on every shape in the table; refusals name the field;
 * the record the routes answer matches the schema.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { SvcError } from '../../../src/core/errors.js';
import { builtinProfile, parseProfileBody, profileJson, type ProfileContext } from '../../../src/profiles/profile-record.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'profiles', 'startup-profile-v1.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
addFormats(ajv, ['date-time']);
ajv.addSchema(schema);
const createAccepts = ajv.getSchema(`${schema.$id}#/$defs/Create`)!;
const updateAccepts = ajv.getSchema(`${schema.$id}#/$defs/Update`)!;
const recordAccepts = ajv.getSchema(schema.$id)!;

const ctx: ProfileContext = { imageRefs: () => ['img'], network: 'default', hasLoadout: (n) => n === 'dev' };

function refusal(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
    return { code: 'ok', message: '' };
  } catch (e) {
    if (e instanceof SvcError) return { code: e.code, message: e.message };
    throw e;
  }
}

const FULL = {
  name: 'p1',
  description: 'x',
  vcpus: 2,
  memory_mb: 1024,
  disk_gb: 5,
  image: 'img',
  network: 'default',
  agent: { agentshare: false, enrollment: 'deferred', env: { A: 'b' } },
  loadout: 'dev',
};

/** [what, body, accepted, field named in the refusal]. */
const SHAPES: [string, Record<string, unknown>, boolean, string][] = [
  ['the full body', FULL, true, ''],
  ['only a name', { name: 'p1' }, true, ''],
  ['nulls', { name: 'p1', image: null, network: null, loadout: null }, true, ''],
  ['no name', { vcpus: 2 }, false, 'name'],
  ['a bad name', { name: 'P_1' }, false, 'name'],
  ['vcpus 0', { name: 'p1', vcpus: 0 }, false, 'vcpus'],
  ['memory too small', { name: 'p1', memory_mb: 128 }, false, 'memory_mb'],
  ['disk not an integer', { name: 'p1', disk_gb: 1.5 }, false, 'disk_gb'],
  ['an unknown field', { name: 'p1', cpus: 2 }, false, 'cpus'],
  ['an unknown agent field', { name: 'p1', agent: { ssh: true } }, false, 'ssh'],
  ['a bad enrollment', { name: 'p1', agent: { enrollment: 'later' } }, false, 'agent.enrollment'],
  ['agentshare not boolean', { name: 'p1', agent: { agentshare: 'yes' } }, false, 'agent.agentshare'],
  ['a bad env name', { name: 'p1', agent: { env: { '1A': 'x' } } }, false, 'agent.env'],
  ['a number in env', { name: 'p1', agent: { env: { A: 1 } } }, false, 'agent.env.A'],
];

describe('startup profile bodies', () => {
  for (const [what, body, ok, field] of SHAPES) {
    test(`${what}: ${ok ? 'accepted' : 'refused'} by the validator and the schema alike`, () => {
      const r = refusal(() => parseProfileBody(body, ctx, 'create'));
      assert.equal(r.code, ok ? 'ok' : 'profile.invalid', r.message);
      if (!ok) assert.match(r.message, new RegExp(field.replace('.', '\\.')));
      assert.equal(createAccepts(body), ok, JSON.stringify(createAccepts.errors));
    });
  }

  test('catalog checks beyond the schema: image, network, loadout, secrets', () => {
    assert.equal(refusal(() => parseProfileBody({ name: 'p', image: 'other' }, ctx, 'create')).code, 'profile.invalid');
    assert.equal(refusal(() => parseProfileBody({ name: 'p', network: 'br0' }, ctx, 'create')).code, 'profile.invalid');
    assert.equal(refusal(() => parseProfileBody({ name: 'p', loadout: 'nope' }, ctx, 'create')).code, 'loadout.unknown');
    assert.equal(
      refusal(() => parseProfileBody({ name: 'p', agent: { env: { API_KEY: 'x' } } }, ctx, 'create')).code,
      'loadout.secret_field',
    );
  });

  test('an update takes expected_revision; the record matches the schema', () => {
    const body = { ...FULL, expected_revision: 3 };
    assert.equal(refusal(() => parseProfileBody(body, ctx, 'update')).code, 'ok');
    assert.ok(updateAccepts(body));
    assert.equal(refusal(() => parseProfileBody(body, ctx, 'create')).code, 'profile.invalid');
    const { spec } = parseProfileBody(FULL, ctx, 'create');
    const p = { ...spec, name: 'p1', builtin: false, revision: 1, createdAtMs: 0, updatedAtMs: 0 };
    for (const rec of [profileJson(p), profileJson(builtinProfile('svc-dev'))])
      assert.ok(recordAccepts(rec), JSON.stringify(recordAccepts.errors));
  });
});
