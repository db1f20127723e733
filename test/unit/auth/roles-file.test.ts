import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { MAX_ROLES_FILE_BYTES, parseRolesFile, RolesFile } from '../../../src/auth/roles-file.js';

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-roles-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function reasonOf(text: string): string {
  const t = parseRolesFile(text);
  assert.equal(t.ok, false, text);
  return t.ok ? '' : t.reason;
}

void describe('parseRolesFile', () => {
  void test('names map to roles', () => {
    const t = parseRolesFile('{"alice":"admin","ci-bot":"operator","v.1_x":"viewer"}');
    assert.ok(t.ok);
    assert.deepEqual(
      [...t.roles],
      [
        ['alice', 'admin'],
        ['ci-bot', 'operator'],
        ['v.1_x', 'viewer'],
      ],
    );
    const empty = parseRolesFile('{}');
    assert.ok(empty.ok && empty.roles.size === 0);
  });

  void test('bad JSON, a non-object, an unknown role or a bad name is refused, naming the position and never the content', () => {
    assert.match(reasonOf('{"alice": "admin", secret-canary'), /not valid JSON/);
    assert.match(reasonOf('["alice"]'), /must be a JSON object/);
    assert.match(reasonOf('null'), /must be a JSON object/);
    assert.match(
      reasonOf('{"alice":"admin","bob":"root-canary"}'),
      /^entry 2 of the roles file: the role is not one of viewer, operator, admin$/,
    );
    assert.match(reasonOf('{"alice":"admin","bob":"Admin"}'), /entry 2/);
    assert.match(reasonOf('{"alice":{"role":"admin"}}'), /entry 1 .*role/);
    assert.match(reasonOf('{"bad name-canary":"admin"}'), /^entry 1 of the roles file: the name is not an operator name/);
    assert.match(reasonOf('{"..":"admin"}'), /entry 1/);
    assert.match(reasonOf(`{"${'a'.repeat(129)}":"admin"}`), /entry 1/);
    for (const text of ['{"alice": "admin", secret-canary', '{"alice":"admin","bob":"root-canary"}', '{"bad name-canary":"admin"}']) {
      assert.doesNotMatch(reasonOf(text), /canary/);
    }
  });
});

void describe('RolesFile', () => {
  function fileWithLog(path: string): { file: RolesFile; lines: string[] } {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
    return { file: new RolesFile({ path, logger }), lines };
  }

  void test('reads the file, then sees an edit in place and an atomic rename at the next call', () => {
    const path = join(dir, 'edit.json');
    writeFileSync(path, '{"alice":"admin"}');
    const { file } = fileWithLog(path);
    const first = file.table();
    assert.ok(first.ok && first.roles.get('alice') === 'admin');
    writeFileSync(path, '{"alice":"viewer","bob":"operator"}');
    const edited = file.table();
    assert.ok(edited.ok && edited.roles.get('alice') === 'viewer' && edited.roles.get('bob') === 'operator');
    writeFileSync(join(dir, 'edit.json.tmp'), '{"carol":"admin"}');
    renameSync(join(dir, 'edit.json.tmp'), path);
    const renamed = file.table();
    assert.ok(renamed.ok && renamed.roles.get('carol') === 'admin' && !renamed.roles.has('alice'));
  });

  void test('an unchanged file is not re-read: the same table object, and one log line per change of state', () => {
    const path = join(dir, 'cached.json');
    writeFileSync(path, '{"alice":"admin"}');
    const { file, lines } = fileWithLog(path);
    const a = file.table();
    assert.equal(file.table(), a);
    assert.equal(file.table(), a);
    assert.equal(lines.filter((l) => l.includes('operator roles loaded')).length, 1);
    writeFileSync(path, '{"alice": nope-canary');
    for (let i = 0; i < 3; i++) assert.equal(file.table().ok, false);
    unlinkSync(path);
    for (let i = 0; i < 3; i++) assert.equal(file.table().ok, false);
    const warned = lines.filter((l) => l.includes('operator roles file cannot be used'));
    assert.equal(warned.length, 2, warned.join(''));
    assert.match(warned[1] ?? '', /ENOENT/);
    assert.doesNotMatch(lines.join(''), /canary/);
  });

  void test('a missing file, a directory and an oversized file fail closed with a reason; nothing throws', () => {
    const missing = fileWithLog(join(dir, 'missing.json')).file.table();
    assert.ok(!missing.ok && /cannot be read \(ENOENT\)/.test(missing.reason));
    const sub = join(dir, 'a-directory');
    mkdirSync(sub);
    const notFile = fileWithLog(sub).file.table();
    assert.ok(!notFile.ok && /not a regular file/.test(notFile.reason));
    const big = join(dir, 'big.json');
    writeFileSync(big, `{"a":"${'x'.repeat(MAX_ROLES_FILE_BYTES)}"}`);
    const tooBig = fileWithLog(big).file.table();
    assert.ok(!tooBig.ok && /larger than/.test(tooBig.reason));
  });
});
