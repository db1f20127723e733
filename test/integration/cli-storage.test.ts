/**
 * `sbx storage` against the whole server (startServer, the storage component as main.ts wires
 * it): a write is requested, waits for review, lands on approve; overwrite and delete need their
 * confirmation flags; global is read-only.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runSbx, sbxJson, startCliServer, type CliServer } from './cli-harness.js';

describe('sbx storage', () => {
  let srv: CliServer;
  let root: string;
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'sbx-cli-storage-'));
    mkdirSync(join(root, 'global'), { recursive: true });
    srv = await startCliServer({ SVC_STORAGE_DIR: root });
  });
  after(async () => {
    await srv.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const review = async (args: string[], stdin?: string): Promise<{ id: string; state: string }> =>
    (await sbxJson<{ review: { id: string; state: string } }>(srv, args, stdin === undefined ? {} : { stdin })).review;

  test('put waits for review, approve lands it, ls and get show it', async () => {
    const file = join(root, 'inbox', 'agent-1', 'notes', 'a.txt');
    const r = await review(['storage', 'put', 'inbox/agent-1', 'notes/a.txt', '-'], 'hello inbox\n');
    assert.equal(r.state, 'pending');
    assert.ok(!existsSync(file), 'nothing lands before review');
    const human = await runSbx(srv, ['storage', 'reviews', '--state', 'pending']);
    assert.match(human.stdout, new RegExp(r.id));
    assert.equal((await review(['storage', 'approve', r.id])).state, 'applied');
    assert.equal(readFileSync(file, 'utf8'), 'hello inbox\n');
    const ls = await sbxJson<{ entries: Array<{ name: string; kind: string; size_bytes: number }> }>(srv, [
      'storage',
      'ls',
      'inbox/agent-1',
      'notes',
    ]);
    assert.deepEqual(
      ls.entries.map((e) => [e.name, e.kind, e.size_bytes]),
      [['a.txt', 'file', 12]],
    );
    const got = await runSbx(srv, ['storage', 'get', 'inbox/agent-1', 'notes/a.txt', '-o', '-']);
    assert.equal(got.stdout, 'hello inbox\n');
  });

  test('overwrite needs --overwrite, rm needs --yes; global is read-only', async () => {
    const again = await runSbx(srv, ['storage', 'put', 'inbox/agent-1', 'notes/a.txt', '-'], { stdin: 'v2' });
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /storage\.confirmation_required/u);
    const over = await review(['storage', 'put', 'inbox/agent-1', 'notes/a.txt', '-', '--overwrite'], 'v2');
    assert.equal((await review(['storage', 'approve', over.id])).state, 'applied');
    assert.equal(readFileSync(join(root, 'inbox', 'agent-1', 'notes', 'a.txt'), 'utf8'), 'v2');
    const noYes = await runSbx(srv, ['storage', 'rm', 'inbox/agent-1', 'notes/a.txt']);
    assert.equal(noYes.code, 2, noYes.stderr);
    const rm = await review(['storage', 'rm', 'inbox/agent-1', 'notes/a.txt', '--yes']);
    assert.equal((await review(['storage', 'reject', rm.id])).state, 'rejected');
    assert.ok(existsSync(join(root, 'inbox', 'agent-1', 'notes', 'a.txt')));
    const g = await runSbx(srv, ['storage', 'put', 'global', 'x.txt', '-'], { stdin: 'x' });
    assert.notEqual(g.code, 0);
    assert.match(g.stderr, /storage\.read_only/u);
  });
});
