import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SECTOR_BYTES, buildIso9660, readIso9660 } from '../../../src/vms/iso9660.js';

describe('ISO 9660 seed writer', () => {
  test('a cidata image: descriptors where readers look, files readable back by name', () => {
    const files = [
      { name: 'user-data', data: Buffer.from('#cloud-config\nhostname: a\n') },
      { name: 'meta-data', data: Buffer.from('instance-id: x\n') },
      { name: 'network-config', data: Buffer.alloc(5000, 7) },
    ];
    const img = buildIso9660({ volumeId: 'cidata', files, date: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)) });
    assert.equal(img.length % SECTOR_BYTES, 0);
    assert.equal(img.toString('ascii', 16 * SECTOR_BYTES + 1, 16 * SECTOR_BYTES + 6), 'CD001');
    assert.equal(img[16 * SECTOR_BYTES], 1, 'primary volume descriptor');
    assert.equal(img[17 * SECTOR_BYTES], 255, 'set terminator');
    assert.equal(img.readUInt32LE(16 * SECTOR_BYTES + 80), img.length / SECTOR_BYTES, 'volume space size');
    assert.equal(img.readUInt32BE(16 * SECTOR_BYTES + 84), img.length / SECTOR_BYTES, 'both-endian');
    assert.equal(img.toString('ascii', 16 * SECTOR_BYTES + 813, 16 * SECTOR_BYTES + 829), '2026010203040500');
    const back = readIso9660(img);
    assert.equal(back.volumeId, 'CIDATA');
    assert.deepEqual([...back.files.keys()].sort(), ['meta-data', 'network-config', 'user-data']);
    for (const f of files) assert.deepEqual(back.files.get(f.name), f.data);
    // Names as written: upper case with the required period and version.
    assert.ok(img.includes(Buffer.from('USER-DATA.;1')));
  });

  test('bad names, duplicates and an overfull root directory are refused', () => {
    assert.throws(() => buildIso9660({ volumeId: 'cidata', files: [{ name: 'a/b', data: Buffer.alloc(1) }] }), RangeError);
    assert.throws(
      () =>
        buildIso9660({
          volumeId: 'cidata',
          files: [
            { name: 'a', data: Buffer.alloc(1) },
            { name: 'A', data: Buffer.alloc(1) },
          ],
        }),
      RangeError,
    );
    assert.throws(() => buildIso9660({ volumeId: 'bad id', files: [] }), RangeError);
    const many = Array.from({ length: 80 }, (_, i) => ({ name: `file-number-${i}`, data: Buffer.alloc(1) }));
    assert.throws(() => buildIso9660({ volumeId: 'cidata', files: many }), /one-sector root directory/);
  });

  test('any set of small files round-trips (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.record({ name: fc.stringMatching(/^[a-z0-9_-]{1,20}$/), data: fc.uint8Array({ maxLength: 6000 }) }), {
          selector: (f) => f.name,
          maxLength: 8,
        }),
        (files) => {
          const back = readIso9660(buildIso9660({ volumeId: 'cidata', files }));
          assert.equal(back.files.size, files.length);
          for (const f of files) assert.deepEqual(new Uint8Array(back.files.get(f.name)!), f.data);
        },
      ),
      { numRuns: 50 },
    );
  });
});
