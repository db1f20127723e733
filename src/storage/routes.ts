/**
 * Storage downloads (spec 4.9):
 *
 *   GET /api/v1/storage/global/_download?path=<relative-path>
 *   GET /api/v1/storage/inbox/{agent_id}/_download?path=<relative-path>
 *   GET /api/v1/storage/outbox/{task_id}/_download?path=<relative-path>
 *
 * 200 with the raw bytes, Content-Type from the extension, Content-Disposition attachment,
 * Content-Length, streamed (one 256 KiB chunk in memory at a time, by backpressure); 400
 * `storage.invalid_path` for a bad id or path (absolute, `..`, NUL, backslash, a symlink out of
 * the area, a directory); 404 `storage.not_found`; 413 `storage.download_too_large` above
 * SVC_STORAGE_MAX_DOWNLOAD_BYTES. Listing and writes are the scoped API (scoped-routes.ts).
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { HandlerResult, RequestView } from '../http/types.js';
import { contentTypeFor, downloadHeaders } from './content-type.js';
import { fileSource } from './file-source.js';
import type { Storage, StorageArea } from './storage.js';

export function registerStorageRoutes(router: Router, deps: { storage: Storage }): void {
  const serve = async (area: StorageArea, id: string | undefined, req: RequestView): Promise<HandlerResult> => {
    const all = req.query.getAll('path');
    if (all.length > 1) throw new SvcError('storage.invalid_path', 'query parameter path is given more than once');
    const path = all[0];
    const file = await deps.storage.openDownload(area, id, path);
    const { 'content-length': _length, ...headers } = downloadHeaders(file.name, file.sizeBytes);
    return {
      status: 200,
      headers,
      contentType: contentTypeFor(file.name),
      lengthBytes: file.sizeBytes,
      stream: fileSource(file.fh, file.sizeBytes),
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
