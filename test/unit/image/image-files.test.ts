import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { bzImagePayload, extractVmlinux, uuidFrom } from '../../../src/image/image-files.js';

/** A minimal bzImage: setup header (HdrS, setup_sects, payload offset/length) + payload + size_append. */
function fakeBzImage(compressed: Buffer, uncompressedBytes: number, setupSects = 3): Buffer {
  // setup_sects 0 means 4 (boot protocol).
  const setup = Buffer.alloc(((setupSects === 0 ? 4 : setupSects) + 1) * 512);
  setup.writeUInt8(setupSects, 0x1f1);
  setup.writeUInt32LE(0x53726448, 0x202);
  const gap = 0x40; // payload_offset: decompressor code before the payload
  const size = Buffer.alloc(4);
  size.writeUInt32LE(uncompressedBytes);
  const payload = Buffer.concat([compressed, size]);
  setup.writeUInt32LE(gap, 0x248);
  setup.writeUInt32LE(payload.length, 0x24c);
  return Buffer.concat([setup, Buffer.alloc(gap, 0x90), payload, Buffer.alloc(64)]);
}

void describe('image files', () => {
  void test('the payload of a bzImage is located by its setup header, its codec by its magic', () => {
    const elf = Buffer.concat([Buffer.from('\x7fELF', 'latin1'), Buffer.alloc(1000, 7)]);
    const gz = gzipSync(elf);
    const p = bzImagePayload(fakeBzImage(gz, elf.length));
    assert.equal(p.codec, 'gzip');
    assert.equal(p.uncompressedBytes, elf.length);
    assert.deepEqual(p.data, gz);
    const lz4 = Buffer.concat([Buffer.from([0x02, 0x21, 0x4c, 0x18]), Buffer.alloc(20)]);
    assert.equal(bzImagePayload(fakeBzImage(lz4, 99, 0)).codec, 'lz4');
  });

  void test('extractVmlinux returns the ELF and checks its size against the header', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-bz-'));
    try {
      const elf = Buffer.concat([Buffer.from('\x7fELF', 'latin1'), Buffer.alloc(5000, 3)]);
      await writeFile(join(dir, 'good'), fakeBzImage(gzipSync(elf), elf.length));
      assert.deepEqual(await extractVmlinux(join(dir, 'good')), elf);
      await writeFile(join(dir, 'short'), fakeBzImage(gzipSync(elf), elf.length + 1));
      await assert.rejects(extractVmlinux(join(dir, 'short')), /header says/);
      await writeFile(join(dir, 'notelf'), fakeBzImage(gzipSync(Buffer.from('hello')), 5));
      await assert.rejects(extractVmlinux(join(dir, 'notelf')), /not an ELF/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  void test('files that are not bzImages are refused, never misread', () => {
    assert.throws(() => bzImagePayload(Buffer.alloc(100)), /not a bzImage/);
    assert.throws(() => bzImagePayload(fakeBzImage(Buffer.from('plain text payload'), 1)), /unknown compression/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => {
        try {
          const p = bzImagePayload(Buffer.from(bytes));
          assert.ok(p.data.length >= 4);
        } catch (err) {
          assert.match((err as Error).message, /bzImage/);
        }
      }),
      { numRuns: 300 },
    );
  });

  void test('filesystem UUIDs are stable per hash and well-formed', () => {
    assert.equal(uuidFrom('abc'), uuidFrom('abc'));
    assert.notEqual(uuidFrom('abc'), uuidFrom('abd'));
    assert.match(uuidFrom('abc'), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
