import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readTar, safeEntryName, TarError } from '../../../src/tasks/tar-reader.js';

/** One 512-byte header (ustar) with a correct checksum, followed by the padded data. */
function entry(name: string, type: string, data = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100, 'latin1');
  h.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  h.write(type, 156, 'latin1');
  h.write('ustar\x0000', 257, 'latin1');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return Buffer.concat([h, data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
}
const END = Buffer.alloc(1024);

void describe('readTar', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tar-reader-'));
    const src = join(dir, 'src');
    await mkdir(join(src, 'reports', 'd'.repeat(80)), { recursive: true });
    await writeFile(join(src, 'summary.md'), '# done\n');
    await writeFile(join(src, 'reports', 'd'.repeat(80), `${'n'.repeat(60)}.txt`), 'long name');
    await writeFile(join(src, 'bin.dat'), Buffer.from([0, 1, 2, 255]));
    await writeFile(join(src, 'empty'), '');
    await symlink('/etc/passwd', join(src, 'link'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const format of ['gnu', 'ustar', 'pax']) {
    void test(`reads what GNU tar --format=${format} writes (a 150-character path too): regular files only, links skipped`, () => {
      const archive = execFileSync('tar', ['-c', `--format=${format}`, '-C', join(dir, 'src'), '.']);
      const got = readTar(archive);
      const byName = new Map(got.files.map((f) => [f.name, f.data.toString('latin1')]));
      assert.equal(byName.get('summary.md'), '# done\n');
      assert.equal(byName.get(`reports/${'d'.repeat(80)}/${'n'.repeat(60)}.txt`), 'long name');
      assert.deepEqual([...(got.files.find((f) => f.name === 'bin.dat')?.data ?? [])], [0, 1, 2, 255]);
      assert.equal(byName.get('empty'), '');
      assert.equal(byName.size, 4);
      assert.deepEqual(got.skipped, ['link (type 2)']);
    });
  }

  void test('a name leaving the root or an absolute name rejects the whole archive', () => {
    assert.throws(
      () => readTar(Buffer.concat([entry('ok.txt', '0', Buffer.from('x')), entry('../escape', '0', Buffer.from('x')), END])),
      TarError,
    );
    assert.throws(() => readTar(Buffer.concat([entry('a/../../escape', '0'), END])), /leaving the archive root/);
    assert.throws(() => readTar(Buffer.concat([entry('/etc/cron.d/x', '0'), END])), /absolute name/);
  });

  void test('a hard link, device or FIFO is skipped, never written', () => {
    const got = readTar(
      Buffer.concat([entry('hard', '1'), entry('dev', '3'), entry('fifo', '6'), entry('real', '0', Buffer.from('r')), END]),
    );
    assert.deepEqual(
      got.files.map((f) => f.name),
      ['real'],
    );
    assert.deepEqual(got.skipped, ['hard (type 1)', 'dev (type 3)', 'fifo (type 6)']);
  });

  void test('corrupt, truncated or duplicated archives are refused', () => {
    const good = entry('a.txt', '0', Buffer.from('hello'));
    const bad = Buffer.from(good);
    bad[0] = 'b'.charCodeAt(0); // the checksum no longer matches
    assert.throws(() => readTar(Buffer.concat([bad, END])), /checksum/);
    assert.throws(() => readTar(good.subarray(0, 515)), /truncated/);
    assert.throws(() => readTar(good), /no end marker/);
    assert.throws(() => readTar(Buffer.concat([good, good, END])), /twice/);
    assert.throws(() => readTar(Buffer.concat([entry('a', '0'), entry('b', '0'), END]), { maxFiles: 1 }), /more than 1 files/);
  });

  void test('an empty archive has no files', () => {
    assert.deepEqual(readTar(END), { files: [], skipped: [] });
  });

  void test('safeEntryName normalises ./ and trailing slashes', () => {
    assert.equal(safeEntryName('./a//b/'), 'a/b');
    assert.equal(safeEntryName('./'), '');
    assert.throws(() => safeEntryName('a\\..\\b'), TarError);
  });
});
