/**
 * AreaFs writes are all or nothing: a write that fails after its temp file was made (here the
 * target turns into a directory between the check and the rename, as a guest could make it)
 * unlinks the temp file, and the error is a 4xx with a code.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { AreaFs } from '../../../src/storage/area-fs.js';

describe('AreaFs writes', () => {
  const root = mkdtempSync(join(tmpdir(), 'sbx-areafs-'));
  after(() => rmSync(root, { recursive: true, force: true }));
  const fs = new AreaFs(root, ['inbox', 'agent-w']);

  test('a write lands whole, creating its parents', async () => {
    const etag = await fs.writeFile(['a', 'b', 'c.txt'], Buffer.from('whole'), () => undefined);
    assert.match(etag, /^"[0-9a-z-]+"$/u);
    assert.equal(readFileSync(join(root, 'inbox', 'agent-w', 'a', 'b', 'c.txt'), 'utf8'), 'whole');
  });

  test('a write that fails after its temp file was made leaves nothing behind', async () => {
    const dir = join(root, 'inbox', 'agent-w', 'a');
    await assert.rejects(
      fs.writeFile(['a', 'raced.txt'], Buffer.alloc(4096, 1), () => {
        // The guest makes a non-empty directory of that name just before the rename.
        mkdirSync(join(dir, 'raced.txt', 'x'), { recursive: true });
      }),
      (err: unknown) => err instanceof SvcError && err.code === 'storage.not_a_file',
    );
    assert.deepEqual(readdirSync(dir).sort(), ['b', 'raced.txt'], 'no .sbx-tmp-* file is left');
    assert.deepEqual(readdirSync(join(dir, 'raced.txt')), ['x']);
  });
});
