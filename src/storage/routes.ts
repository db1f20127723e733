/**
 * Storage downloads (spec 4.9):
 *
 *   GET /api/v1/storage/global/_download?path=<relative-path>
 *   GET /api/v1/storage/inbox/{agent_id}/_download?path=<relative-path>
 *   GET /api/v1/storage/outbox/{task_id}/_download?path=<relative-path>
 *
 * 200 with the raw bytes, Content-Type from the extension, Content-Disposition attachment,
 * Content-Length; 400 `storage.invalid_path` for a bad id or path (absolute, `..`, NUL,
 * backslash, a symlink out of the area, a directory); 404 `storage.not_found`. No write routes:
 * global is read-only, inbox and outbox are written by agents and tasks, not through this API.
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { HandlerResult, RequestView } from '../http/types.js';
import { contentTypeFor, downloadHeaders } from './content-type.js';
import type { Storage, StorageArea } from './storage.js';

export function registerStorageRoutes(router: Router, deps: { storage: Storage }): void {
  const serve = async (area: StorageArea, id: string | undefined, req: RequestView): Promise<HandlerResult> => {
    const all = req.query.getAll('path');
    if (all.length > 1) throw new SvcError('storage.invalid_path', 'query parameter path is given more than once');
    const path = all[0];
    const file = await deps.storage.download(area, id, path);
    return {
      status: 200,
      headers: downloadHeaders(file.name, file.bytes.byteLength),
      body: file.bytes,
      contentType: contentTypeFor(file.name),
    };
  };
  router.add({ method: 'GET', path: '/api/v1/storage/global/_download', handler: (req) => serve('global', undefined, req) });
  router.add({
    method: 'GET',
    path: '/api/v1/storage/inbox/:agent_id/_download',
    handler: (req) => serve('inbox', req.params['agent_id'], req),
  });
  router.add({
    method: 'GET',
    path: '/api/v1/storage/outbox/:task_id/_download',
    handler: (req) => serve('outbox', req.params['task_id'], req),
  });
}
