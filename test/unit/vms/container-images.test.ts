import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { registerContainerImageRoutes } from '../../../src/vms/container-image-routes.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { loadContainerImages, parseCatalog } from '../../../src/vms/container-images.js';

describe('container image catalog', () => {
  test('the built-in catalog is valid, has one default, and GET /api/v1/container-images serves it', async () => {
    const images = await loadContainerImages(null);
    assert.ok(images.length >= 3);
    assert.equal(images.filter((i) => i.default === true).length, 1);
    const router = new Router();
    registerContainerImageRoutes(router, { images: () => images });
    const r = await inject(router, { method: 'GET', url: '/api/v1/container-images' });
    assert.equal(r.status, 200);
    const body = r.json() as { images: Record<string, unknown>[] };
    assert.equal(body.images.length, images.length);
    for (const i of body.images) {
      assert.deepEqual(
        Object.keys(i)
          .filter((k) => k !== 'default')
          .sort(),
        ['description', 'label', 'ref'],
      );
    }
  });

  test('SVC_CONTAINER_IMAGES_FILE replaces it; a bad file is refused with the reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-images-'));
    try {
      const good = join(dir, 'good.json');
      await writeFile(good, JSON.stringify([{ ref: 'registry.local/x:1', label: 'X', description: 'ours', default: true }]));
      assert.deepEqual(await loadContainerImages(good), [{ ref: 'registry.local/x:1', label: 'X', description: 'ours', default: true }]);
      const bad = join(dir, 'bad.json');
      await writeFile(bad, '{"images": [');
      await assert.rejects(loadContainerImages(bad), /not valid JSON/);
      await assert.rejects(loadContainerImages(join(dir, 'missing.json')), /ENOENT/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('entries are checked field by field', () => {
    assert.throws(() => parseCatalog({ images: [{ ref: '', label: 'a', description: '' }] }, 'f'), /images\[0\]\.ref/);
    assert.throws(() => parseCatalog({ images: [{ ref: 'a', label: 'a', description: '', extra: 1 }] }, 'f'), /unknown field/);
    assert.throws(() => parseCatalog({ images: [{ ref: 'a', label: 'a', description: '', default: 'yes' }] }, 'f'), /default/);
    assert.throws(
      () =>
        parseCatalog(
          [
            { ref: 'a', label: 'a', default: true },
            { ref: 'b', label: 'b', default: true },
          ],
          'f',
        ),
      /at most one image/,
    );
    assert.throws(
      () =>
        parseCatalog(
          [
            { ref: 'a', label: 'a' },
            { ref: 'a', label: 'b' },
          ],
          'f',
        ),
      /listed twice/,
    );
    assert.throws(() => parseCatalog({ nope: [] }, 'f'), /expected/);
    assert.deepEqual(parseCatalog([{ ref: 'a', label: 'A' }], 'f'), [{ ref: 'a', label: 'A', description: '' }]);
  });
});
