/**
 * The scoped storage routes (spec 4.13; shapes are ours, the spec shows none). `{area}` is
 * `global`, `inbox/{agent_id}` or `outbox/{task_id}`; `{path}` is one or more names, each
 * percent-encoded on its own and joined with `/` (scoped-path.ts).
 *
 * | method | path | permission | answer |
 * |---|---|---|---|
 * | GET | /api/v2/storage/{area}/list[/{path}]?cursor=&limit= | storage.read | 200 storage.listing/v1 |
 * | GET, HEAD | /api/v2/storage/{area}/objects/{path} | storage.read | 200 bytes + ETag (≤ 1 MiB) |
 * | PUT | /api/v2/storage/{area}/objects/{path}[?confirm=overwrite] | storage.write | 202 {review} + Location |
 * | DELETE | /api/v2/storage/{area}/objects/{path}?confirm=delete (or If-Match) | storage.write | 202 {review} + Location |
 * | GET | /api/v2/storage/reviews[?state=pending&limit=] | storage.read | 200 {reviews} |
 * | GET | /api/v2/storage/reviews/{id} | storage.read | 200 {review} |
 * | POST | /api/v2/storage/reviews/{id}/approve | storage.review | 200 {review} (applied), or the write's error (review failed) |
 * | POST | /api/v2/storage/reviews/{id}/reject | storage.review | 200 {review} (rejected) |
 * | GET | /api/v1/storage/{global, inbox/{agent_id}, outbox/{owner}}?path=&cursor= | storage.read | 200 the reference's listing shape |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { Handler, HandlerResult, RequestView } from '../http/types.js';
import { contentDisposition, contentTypeFor } from './content-type.js';
import { REVIEW_STATES, type ReviewState } from './review-state.js';
import type { ReviewJson } from './review-store.js';
import { MAX_LIST_ENTRIES, MAX_OBJECT_BYTES, type ScopedStorage } from './scoped-storage.js';
import { parseRelativePath } from './safe-path.js';
import { parseScopedPath, rawTail } from './scoped-path.js';
import type { StorageArea } from './storage.js';

export const SCOPED_BASE = '/api/v2/storage';

/** Where a review is read back. */
export function reviewLocation(id: string): string {
  return `${SCOPED_BASE}/reviews/${encodeURIComponent(id)}`;
}

interface AreaRoute {
  readonly area: StorageArea;
  /** Pattern prefix up to the area (`/api/v2/storage/inbox/:owner`). */
  readonly prefix: string;
}

const AREAS: readonly AreaRoute[] = [
  { area: 'global', prefix: `${SCOPED_BASE}/global` },
  { area: 'inbox', prefix: `${SCOPED_BASE}/inbox/:owner` },
  { area: 'outbox', prefix: `${SCOPED_BASE}/outbox/:owner` },
];

/** Segments of a pattern before its `*` (what rawTail skips). */
function segmentCount(pattern: string): number {
  return pattern.split('/').length - 1;
}

function oneQuery(req: RequestView, name: string): string | undefined {
  const all = req.query.getAll(name);
  if (all.length > 1) throw new SvcError('request.invalid', `query parameter ${name} is given more than once`);
  return all[0];
}

function limitOf(req: RequestView, max: number): number {
  const raw = oneQuery(req, 'limit');
  if (raw === undefined) return max;
  if (!/^[0-9]{1,6}$/u.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new SvcError('request.invalid', `limit must be an integer from 1 to ${max}`);
  }
  return Number(raw);
}

function reviewResult(status: number, review: ReviewJson): HandlerResult {
  return status === 202 ? { status, headers: { location: reviewLocation(review.id) }, json: { review } } : { status, json: { review } };
}

export function registerScopedStorageRoutes(
  router: Router,
  deps: { scoped: ScopedStorage; identity: Pick<OperatorIdentity, 'require'> },
): void {
  const { scoped, identity } = deps;
  const actor = (
    req: RequestView,
    perm: 'storage.read' | 'storage.write' | 'storage.review',
  ): { actor: string; mode: 'mtls' | 'local' } => {
    const who = identity.require(req, perm);
    return { actor: who.actor ?? 'unknown', mode: who.mode };
  };

  for (const { area, prefix } of AREAS) {
    const owner = (req: RequestView): string | undefined => (area === 'global' ? undefined : (req.params['owner'] ?? ''));
    const listRoot = `${prefix}/list`;
    const listPath = `${prefix}/list/*`;
    const objects = `${prefix}/objects/*`;
    const list =
      (pattern: string): Handler =>
      async (req) => {
        actor(req, 'storage.read');
        const names = parseScopedPath(pattern.endsWith('*') ? rawTail(req.path, segmentCount(pattern) - 1) : '', { allowEmpty: true });
        const cursor = oneQuery(req, 'cursor') ?? null;
        return { status: 200, json: await scoped.list(area, owner(req), names, cursor, limitOf(req, MAX_LIST_ENTRIES)) };
      };
    router.add({ method: 'GET', path: listRoot, handler: list(listRoot) });
    router.add({ method: 'GET', path: listPath, handler: list(listPath) });

    const objectNames = (req: RequestView): string[] =>
      parseScopedPath(rawTail(req.path, segmentCount(objects) - 1), { allowEmpty: false });
    router.add({
      method: 'GET',
      path: objects,
      handler: async (req) => {
        actor(req, 'storage.read');
        const obj = await scoped.read(area, owner(req), objectNames(req));
        return {
          status: 200,
          headers: {
            etag: obj.etag,
            'content-disposition': contentDisposition(obj.name),
            'x-content-type-options': 'nosniff',
            'cache-control': 'no-store',
            'content-security-policy': "default-src 'none'; sandbox",
          },
          contentType: contentTypeFor(obj.name),
          body: obj.bytes,
        };
      },
    });
    router.add({
      method: 'PUT',
      path: objects,
      body: 'raw',
      maxBodyBytes: MAX_OBJECT_BYTES,
      handler: async (req) => {
        const who = actor(req, 'storage.write');
        const names = objectNames(req);
        const body = req.rawBody ?? new Uint8Array(0);
        const review = await scoped.requestPut(area, owner(req), names, body, confirmation(req), who.actor);
        return reviewResult(202, review);
      },
    });
    router.add({
      method: 'DELETE',
      path: objects,
      body: 'none',
      handler: async (req) => {
        const who = actor(req, 'storage.write');
        const review = await scoped.requestDelete(area, owner(req), objectNames(req), confirmation(req), who.actor);
        return reviewResult(202, review);
      },
    });
  }

  // The reference implementation's listing route and shape, for its clients (sandboxctl storage ls).
  for (const { area, prefix } of [
    { area: 'global' as const, prefix: '/api/v1/storage/global' },
    { area: 'inbox' as const, prefix: '/api/v1/storage/inbox/:owner' },
    { area: 'outbox' as const, prefix: '/api/v1/storage/outbox/:owner' },
  ]) {
    router.add({
      method: 'GET',
      path: prefix,
      handler: async (req) => {
        actor(req, 'storage.read');
        const path = oneQuery(req, 'path');
        const names = path === undefined || path === '' ? [] : parseRelativePath(path);
        const owner = area === 'global' ? undefined : (req.params['owner'] ?? '');
        return { status: 200, json: await scoped.referenceList(area, owner, names, oneQuery(req, 'cursor') ?? null) };
      },
    });
  }

  router.add({
    method: 'GET',
    path: `${SCOPED_BASE}/reviews`,
    handler: (req) => {
      actor(req, 'storage.read');
      const state = oneQuery(req, 'state');
      if (state !== undefined && !(REVIEW_STATES as readonly string[]).includes(state)) {
        throw new SvcError('request.invalid', `state must be one of ${REVIEW_STATES.join(', ')}`);
      }
      return {
        status: 200,
        json: { reviews: scoped.reviews().list((state as ReviewState | undefined) ?? null, limitOf(req, MAX_LIST_ENTRIES)) },
      };
    },
  });
  router.add({
    method: 'GET',
    path: `${SCOPED_BASE}/reviews/:id`,
    handler: (req) => {
      actor(req, 'storage.read');
      return reviewResult(200, scoped.reviews().get(req.params['id'] ?? ''));
    },
  });
  router.add({
    method: 'POST',
    path: `${SCOPED_BASE}/reviews/:id/approve`,
    body: 'none',
    handler: async (req) => reviewResult(200, await scoped.approve(req.params['id'] ?? '', actor(req, 'storage.review'))),
  });
  router.add({
    method: 'POST',
    path: `${SCOPED_BASE}/reviews/:id/reject`,
    body: 'none',
    handler: (req) => reviewResult(200, scoped.reject(req.params['id'] ?? '', actor(req, 'storage.review').actor)),
  });
}

function confirmation(req: RequestView): { ifMatch: string | undefined; confirm: string | undefined } {
  const confirm = req.query.getAll('confirm');
  if (confirm.length > 1) throw new SvcError('request.invalid', 'query parameter confirm is given more than once');
  return { ifMatch: req.headers['if-match'], confirm: confirm[0] };
}
