import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { isInside, openFileInRoot, parseRelativePath, type ReadOptions } from '../../../src/storage/safe-path.js';
import { makeStorageFixture, type StorageFixture } from './storage-fixture.js';

const isCode =
  (code: string) =>
  (e: unknown): boolean =>
    e instanceof SvcError && e.code === code;

describe('parseRelativePath', () => {
  test('splits good paths', () => {
    assert.deepEqual(parseRelativePath('a/b/c.txt'), ['a', 'b', 'c.txt']);
    assert.deepEqual(parseRelativePath('..a/b..'), ['..a', 'b..'], 'dots inside names are fine');
    assert.deepEqual(parseRelativePath('résumé 1.pdf'), ['résumé 1.pdf']);
  });

  test('refuses every bad shape with 400 storage.invalid_path', () => {
    const bad = [
      undefined,
      '',
      '/etc/passwd',
      '../x',
      'a/../b',
      'a/..',
      '.',
      './a',
      'a/./b',
      'a//b',
      'a/',
      'a\\b',
      '..\\x',
      'a\u0000b',
      'a\nb',
      'a\rb',
      'a\u007fb',
      'a/'.repeat(2100) + 'x',
      'x'.repeat(256),
      Array.from({ length: 65 }, () => 'a').join('/'),
    ];
    for (const p of bad) assert.throws(() => parseRelativePath(p), isCode('storage.invalid_path'), JSON.stringify(p?.slice(0, 40)));
  });

  test('property: an accepted path never has a dot segment, an empty segment or a leading slash', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', '.', '..', '', '/', '\\', 'b.c', '\u0000', '%2e'), { maxLength: 12 }).map((xs) => xs.join('')),
        (p) => {
          let segs: string[];
          try {
            segs = parseRelativePath(p);
          } catch (err) {
            assert.ok(isCode('storage.invalid_path')(err));
            return;
          }
          assert.ok(!p.startsWith('/') && !p.includes('\\') && !p.includes('\u0000'));
          assert.ok(segs.every((s) => s !== '' && s !== '.' && s !== '..'));
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('isInside', () => {
  test('is about path segments, not string prefixes', () => {
    assert.ok(isInside('/srv/global', '/srv/global'));
    assert.ok(isInside('/srv/global', '/srv/global/a'));
    assert.ok(!isInside('/srv/global', '/srv/global2/a'));
    assert.ok(!isInside('/srv/global', '/srv'));
    assert.ok(isInside('/', '/etc'));
  });
});

/** The file's bytes through openFileInRoot (what a download streams), and its name. */
async function readFileInRoot(root: string, rel: string | undefined, opts: ReadOptions): Promise<{ bytes: Buffer; name: string }> {
  const f = await openFileInRoot(root, rel, opts);
  try {
    return { bytes: await f.fh.readFile(), name: f.name };
  } finally {
    await f.fh.close();
  }
}

describe('openFileInRoot', () => {
  let fx: StorageFixture;
  before(() => {
    fx = makeStorageFixture();
  });
  after(() => fx.cleanup());
  const opts = { maxBytes: 1024 * 1024, tooLarge: (n: number) => new SvcError('server.unavailable', `too large: ${n}`) };
  const read = (rel: string | undefined, o: Partial<typeof opts> & { container?: string } = {}) =>
    readFileInRoot(join(fx.root, 'global'), rel, { ...opts, ...o });

  test('reads files, binary exactly, and follows symlinks that stay inside', async () => {
    assert.equal(Buffer.from((await read('readme.txt')).bytes).toString(), 'hello from global\n');
    assert.deepEqual(Buffer.from((await read('image.png')).bytes), fx.png);
    assert.equal(Buffer.from((await read('link-in')).bytes).toString(), '# Guide\n');
    assert.equal(Buffer.from((await read('dirlink-in/guide.md')).bytes).toString(), '# Guide\n');
    assert.equal(Buffer.from((await read('chain-in')).bytes).toString(), '# Guide\n');
    assert.equal((await read('empty.txt')).bytes.byteLength, 0);
    assert.equal((await read('docs/guide.md')).name, 'guide.md');
  });

  test('symlinks out of the root are 400 whether or not their target exists', async () => {
    for (const p of ['link-out', 'link-out-rel', 'link-abs', 'dirlink-out/canary.txt', 'dangling-out', 'sibling', 'up-one', 'chain-out']) {
      await assert.rejects(read(p), isCode('storage.invalid_path'), p);
    }
  });

  test('loops, directories and FIFOs are 400; missing files are 404', async () => {
    await assert.rejects(read('loop'), isCode('storage.invalid_path'));
    await assert.rejects(read('docs'), isCode('storage.invalid_path'));
    await assert.rejects(read('dirlink-in'), isCode('storage.invalid_path'));
    const t0 = Date.now();
    await assert.rejects(read('fifo'), isCode('storage.invalid_path'));
    assert.ok(Date.now() - t0 < 5000, 'a FIFO does not block the read');
    await assert.rejects(read('nope.txt'), isCode('storage.not_found'));
    await assert.rejects(read('readme.txt/x'), isCode('storage.not_found'));
    await assert.rejects(readFileInRoot(join(fx.root, 'missing-area'), 'a.txt', opts), isCode('storage.not_found'));
  });

  test('a root that resolves outside its container is refused', async () => {
    await assert.rejects(
      readFileInRoot(join(fx.root, 'inbox', 'evil'), 'canary.txt', { ...opts, container: fx.root }),
      isCode('storage.invalid_path'),
    );
    const ok = await readFileInRoot(join(fx.root, 'inbox', 'agent-1'), 'in.txt', { ...opts, container: fx.root });
    assert.equal(Buffer.from(ok.bytes).toString(), 'for agent-1');
  });

  test('files over maxBytes get the caller’s error and are not read', async () => {
    await assert.rejects(read('big.bin', { maxBytes: 1000 }), /too large: 4096/u);
    assert.equal((await read('big.bin', { maxBytes: 4096 })).bytes.byteLength, 4096);
  });
});
