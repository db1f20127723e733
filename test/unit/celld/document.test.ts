/**
 * The cell command document (src/celld/document.ts) and its published JSON Schema
 * (celld-command-v1.schema.json) agree on every shape; the request hash ignores key order and its
 * own field, and changes with any other change; the three record schemas accept what the server
 * writes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { checkCommand, checkGenerationReconcile, requestHash } from '../../../src/celld/document.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const load = (file: string): { $id: string } => JSON.parse(readFileSync(join(repoRoot, 'src', 'celld', file), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
const command = load('celld-command-v1.schema.json');
ajv.addSchema(command);
const schemaAccepts = ajv.getSchema(command.$id)!;
const generationAccepts = ajv.getSchema(`${command.$id}#/$defs/GenerationReconcile`)!;

type Doc = Record<string, unknown>;
const base = (): Doc => ({
  schema_version: 'sandboxd.celld-command/v1',
  operation_id: 'op-1',
  cell_id: 'cell-a',
  action: 'start',
  targets: ['agent-a', 'agent-b'],
});

const CASES: [string, (d: Doc) => void, boolean][] = [
  ['a start', () => undefined, true],
  ['a stop', (d) => (d['action'] = 'stop'), true],
  ['a destroy', (d) => (d['action'] = 'destroy'), true],
  [
    'a reconcile',
    (d) => {
      d['action'] = 'reconcile';
      delete d['targets'];
      d['generation'] = 4;
      d['dry_run'] = true;
    },
    true,
  ],
  ['with its own request_hash', (d) => (d['request_hash'] = requestHash(d)), true],
  ['an unknown field', (d) => (d['force'] = true), false],
  ['another schema_version', (d) => (d['schema_version'] = 'sandboxd.celld-command/v2'), false],
  ['no operation_id', (d) => delete d['operation_id'], false],
  ['an operation_id with a slash', (d) => (d['operation_id'] = 'op/1'), false],
  ['an operation_id of 129 characters', (d) => (d['operation_id'] = 'a'.repeat(129)), false],
  ['an empty cell_id', (d) => (d['cell_id'] = ''), false],
  ['an unknown action', (d) => (d['action'] = 'fork'), false],
  ['no targets', (d) => delete d['targets'], false],
  ['empty targets', (d) => (d['targets'] = []), false],
  ['101 targets', (d) => (d['targets'] = Array.from({ length: 101 }, (_, i) => `agent-${i}`)), false],
  ['a target twice', (d) => (d['targets'] = ['agent-a', 'agent-a']), false],
  ['a target outside the name pattern', (d) => (d['targets'] = ['Agent-A']), false],
  ['a start with a generation', (d) => (d['generation'] = 1), false],
  ['a start with dry_run', (d) => (d['dry_run'] = false), false],
  [
    'a reconcile without a generation',
    (d) => {
      d['action'] = 'reconcile';
      delete d['targets'];
    },
    false,
  ],
  [
    'a reconcile with targets',
    (d) => {
      d['action'] = 'reconcile';
      d['generation'] = 1;
    },
    false,
  ],
  [
    'a negative generation',
    (d) => {
      d['action'] = 'reconcile';
      delete d['targets'];
      d['generation'] = -1;
    },
    false,
  ],
  ['a request_hash in upper case', (d) => (d['request_hash'] = 'A'.repeat(64)), false],
];

describe('celld command document', () => {
  for (const [name, change, valid] of CASES) {
    test(`${valid ? 'accepts' : 'refuses'} ${name}, as the schema does`, () => {
      const d = base();
      change(d);
      const c = checkCommand(d, null);
      assert.equal(c.ok, valid, JSON.stringify(c));
      assert.equal(schemaAccepts(d), valid, JSON.stringify(schemaAccepts.errors));
    });
  }

  test('a document for another cell, or with a request_hash not its own, is refused naming the field', () => {
    const other = checkCommand(base(), 'cell-b');
    assert.equal(other.ok, false);
    assert.deepEqual(!other.ok && other.problems.map((p) => p.path), ['/cell_id']);
    const forged = checkCommand({ ...base(), request_hash: 'a'.repeat(64) }, 'cell-a');
    assert.deepEqual(!forged.ok && forged.problems.map((p) => p.path), ['/request_hash']);
  });

  test('the request hash ignores key order and request_hash, and changes with anything else', () => {
    const d = base();
    const reversed = Object.fromEntries(Object.entries(d).reverse());
    assert.equal(requestHash(reversed), requestHash(d));
    assert.equal(requestHash({ ...d, request_hash: 'x' }), requestHash(d));
    assert.notEqual(requestHash({ ...d, targets: ['agent-b', 'agent-a'] }), requestHash(d));
    assert.notEqual(requestHash({ ...d, operation_id: 'op-2' }), requestHash(d));
    assert.match(requestHash(d), /^[a-f0-9]{64}$/);
  });

  test('a generation-only reconcile names exactly operation_id and generation, as the schema says', () => {
    for (const [body, valid] of [
      [{ operation_id: 'op-9', generation: 3 }, true],
      [{ operation_id: 'op-9' }, false],
      [{ operation_id: 'op-9', generation: 3, dry_run: true }, false],
      [{ operation_id: 'op-9', generation: 1.5 }, false],
      [{ generation: 3 }, false],
    ] as const) {
      assert.equal(checkGenerationReconcile(body).ok, valid, JSON.stringify(body));
      assert.equal(generationAccepts(body), valid, JSON.stringify(body));
    }
    const a = checkGenerationReconcile({ operation_id: 'op-9', generation: 3 });
    const doc = checkCommand(
      { schema_version: 'sandboxd.celld-command/v1', operation_id: 'op-9', cell_id: 'c', action: 'reconcile', generation: 3 },
      null,
    );
    assert.ok(a.ok && doc.ok && a.hash !== doc.hash, 'a generation-only request hashes like a document');
  });

  test('the record and status schemas compile', () => {
    for (const f of ['celld-command-record-v1.schema.json', 'celld-status-v1.schema.json']) {
      const s = load(f);
      assert.ok(ajv.compile(s), f);
    }
  });
});
