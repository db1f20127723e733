/**
 * The effect ledger (src/celld/effect-ledger.ts) on a real SQLite file: a claim binds an
 * operation_id once (a second claim reads the first row and changes nothing), outcomes survive a
 * reopen, and a command left accepted or running by a process that died reads as `unknown` after
 * it, with the restart named — never as succeeded or as never sent. Records match their schema.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { EffectLedger, type NewCommand } from '../../../src/celld/effect-ledger.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
const recordAccepts = ajv.compile(
  JSON.parse(readFileSync(join(repoRoot, 'src', 'celld', 'celld-command-record-v1.schema.json'), 'utf8')) as object,
);

const cmd = (id: string, hash = 'a'.repeat(64)): NewCommand => ({
  operationId: id,
  cellId: 'cell-a',
  action: 'start',
  kind: 'document',
  requestHash: hash,
  request: { operation_id: id },
  actor: 'local',
});

describe('effect ledger', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-ledger-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('one claim per operation_id; outcomes survive a reopen; unfinished commands become unknown', () => {
    const a = new EffectLedger(dir);
    const first = a.claim(cmd('op-1'));
    assert.equal(first.claimed, true);
    const second = a.claim(cmd('op-1', 'b'.repeat(64)));
    assert.equal(second.claimed, false);
    assert.equal(second.record.request_hash, 'a'.repeat(64), 'a second claim rewrote the bound hash');
    a.started('op-1', 'op-mgmt-1');
    a.finished('op-1', true, { effects: [] });
    a.claim(cmd('op-2'));
    a.started('op-2', 'op-mgmt-2');
    a.claim(cmd('op-3'));
    for (const id of ['op-1', 'op-2', 'op-3']) assert.ok(recordAccepts(a.get(id)), JSON.stringify(recordAccepts.errors));
    a.close();

    const b = new EffectLedger(dir);
    const done = b.get('op-1');
    assert.equal(done?.status, 'succeeded');
    assert.deepEqual(done?.outcome, { effects: [] });
    assert.equal(done?.management_operation_id, 'op-mgmt-1');
    for (const id of ['op-2', 'op-3']) {
      const r = b.get(id);
      assert.equal(r?.status, 'unknown', id);
      assert.equal(r?.error?.code, 'server.restarted');
      assert.ok(recordAccepts(r), JSON.stringify(recordAccepts.errors));
    }
    // A finished entry never moves again.
    b.finished('op-1', false, null, { code: 'x', message: 'y' });
    assert.equal(b.get('op-1')?.status, 'succeeded');
    assert.deepEqual(b.counts(), { accepted: 0, running: 0, succeeded: 1, failed: 0, unknown: 2 });
    assert.equal(b.get('op-never'), undefined);
    b.close();
  });
});
