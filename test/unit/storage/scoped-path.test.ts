/**
 * The scoped path parser: names round-trip through per-segment percent-encoding, `%2F` stays
 * inside a name, and whatever a client sends (property-tested with fast-check) never yields a
 * name that a file system or a second decoder would read as navigation.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { DISK_SLASH, encodeScopedPath, fromDiskName, parseScopedPath, rawTail, toDiskName } from '../../../src/storage/scoped-path.js';

const refused = (fn: () => unknown): boolean => {
  try {
    fn();
    return false;
  } catch (err) {
    assert.ok(err instanceof SvcError && err.code === 'storage.invalid_path', String(err));
    return true;
  }
};

describe('scoped paths', () => {
  test('each segment is decoded once; %2F is part of a name', () => {
    assert.deepEqual(parseScopedPath('docs/a%2Fb.txt', { allowEmpty: false }), ['docs', 'a/b.txt']);
    assert.deepEqual(parseScopedPath('r%C3%A9sum%C3%A9.pdf', { allowEmpty: false }), ['résumé.pdf']);
    assert.deepEqual(parseScopedPath('', { allowEmpty: true }), []);
    assert.deepEqual(parseScopedPath('dir/', { allowEmpty: true }), ['dir']);
    assert.equal(toDiskName('a/b'), `a${DISK_SLASH}b`);
    assert.equal(fromDiskName(toDiskName('a/b/c')), 'a/b/c');
    assert.equal(encodeScopedPath(['a/b', 'c d']), 'a%2Fb/c%20d');
    assert.equal(rawTail('/api/v2/storage/global/objects/a%2Fb/c', 5), 'a%2Fb/c');
  });

  test('any name a client encodes properly round-trips or is refused, never altered', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1, maxLength: 40, unit: 'binary' }), { minLength: 1, maxLength: 6 }), (names) => {
        let parsed: string[];
        try {
          parsed = parseScopedPath(encodeScopedPath(names), { allowEmpty: false });
        } catch (err) {
          assert.ok(err instanceof SvcError && err.code === 'storage.invalid_path');
          return;
        }
        assert.deepEqual(parsed, names);
      }),
      { numRuns: 2000 },
    );
  });

  test('whatever arrives, an accepted name never navigates', () => {
    const piece = fc.constantFrom(
      '.',
      '..',
      '%2e',
      '%2E',
      '%2F',
      '%2f',
      '%5C',
      '%00',
      '%25',
      '%252e',
      '%252F',
      '%C0%AE',
      'a',
      '/',
      '%',
      'é',
      '%E2%88%95',
    );
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 12 }), (pieces) => {
        const raw = pieces.join('');
        let names: string[];
        try {
          names = parseScopedPath(raw, { allowEmpty: false });
        } catch (err) {
          assert.ok(err instanceof SvcError && err.code === 'storage.invalid_path');
          return;
        }
        for (const name of names) {
          const disk = toDiskName(name);
          assert.ok(!disk.includes('/') && !disk.includes('\u0000') && !disk.includes('\\'), `disk name ${JSON.stringify(disk)}`);
          assert.ok(disk !== '.' && disk !== '..' && disk !== '', `disk name ${JSON.stringify(disk)}`);
          for (const part of name.split('/')) assert.ok(part !== '.' && part !== '..' && part !== '', `part of ${JSON.stringify(name)}`);
          // A second decoder (one that decodes %XX escapes) must not see navigation either.
          if (/%[0-9A-Fa-f]{2}/u.test(name)) {
            let again = '';
            assert.doesNotThrow(() => (again = decodeURIComponent(name)), `second decoding of ${JSON.stringify(name)} fails`);
            // eslint-disable-next-line no-control-regex -- NUL is what must not appear
            assert.ok(again !== '.' && again !== '..' && !/[/\\\u0000]/u.test(again), `second decoding of ${JSON.stringify(name)}`);
          }
        }
      }),
      { numRuns: 5000 },
    );
  });

  test('limits: 255 bytes a name on disk, 4096 a path, 64 segments', () => {
    assert.deepEqual(parseScopedPath('a'.repeat(255), { allowEmpty: false }), ['a'.repeat(255)]);
    assert.ok(refused(() => parseScopedPath('a'.repeat(256), { allowEmpty: false })));
    // `/` is stored as U+2215 (3 bytes): the disk name counts.
    assert.ok(refused(() => parseScopedPath(`${'a'.repeat(251)}%2Fbb`, { allowEmpty: false })));
    assert.ok(refused(() => parseScopedPath(Array.from({ length: 17 }, () => 'c'.repeat(250)).join('/'), { allowEmpty: false })));
    assert.ok(refused(() => parseScopedPath(Array.from({ length: 65 }, () => 'd').join('/'), { allowEmpty: false })));
    assert.ok(refused(() => parseScopedPath('', { allowEmpty: false })));
    assert.ok(refused(() => parseScopedPath('a//b', { allowEmpty: false })));
  });
});
