/**
 * The scoped storage API's rules (spec 4.13, 8), over the areas of storage.ts:
 *
 * - global is read-only; inbox (per agent) and outbox (per task) take writes.
 * - Listings are metadata only (name, kind, size, mtime), at most 500 entries a page, with a
 *   cursor (the last name of the page, opaque to clients) for the next.
 * - An object read or write is at most 1 MiB (413 `storage.object_too_large`; bigger files are
 *   read through the streamed `_download` route).
 * - Overwrite and delete need confirmation: `If-Match: <etag>` (the object's current ETag, or
 *   `*`), or `confirm=overwrite` / `confirm=delete`; without it 428
 *   `storage.confirmation_required`, with a stale ETag 412 `storage.precondition_failed`.
 * - Every inbox and outbox write (PUT or DELETE) needs review: it is recorded as a pending review
 *   (202) holding the content and the ETag the requester saw (or "absent" for a create); it lands
 *   only when an operator holding `storage.review` approves it, and only if the object still has
 *   that ETag (else the review fails with 412). An mTLS operator cannot approve their own request.
 * - Inbox writes count against the agent's quota (507 `storage.quota_exceeded`), checked when
 *   the write is requested and again, under the area's write lock, when it is applied.
 * - Paths: scoped-path.ts; symlinks and races: area-fs.ts.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { SvcError } from '../core/errors.js';
import { AreaFs, etagOf, type Current, type EntryMeta } from './area-fs.js';
import type { InboxQuota } from './inbox-quota.js';
import { encodeScopedPath } from './scoped-path.js';
import type { ReviewJson, ReviewStore } from './review-store.js';
import type { Storage, StorageArea } from './storage.js';
import type { StorageListing } from '../wire/storage.js';

/** Most entries in one listing page (spec 8). */
export const MAX_LIST_ENTRIES = 500;
/** Largest object read or written through the scoped API (spec 8): 1 MiB. */
export const MAX_OBJECT_BYTES = 1024 * 1024;

/** The storage.listing/v1 record (src/storage/storage-listing-v1.schema.json). */
export type ListingJson = StorageListing;

/** One entry of the reference-compatible listing. */
export interface ReferenceEntryJson {
  readonly name: string;
  readonly kind: 'file' | 'dir' | 'other';
  readonly size_bytes: number;
  /** Octal permission bits, e.g. `0644`. */
  readonly mode: string;
  readonly modified: string;
}

/** The reference-compatible listing (`GET /api/v1/storage/{scope}?path=`). */
export interface ReferenceListingJson {
  readonly root: string;
  readonly path: string;
  readonly entries: readonly ReferenceEntryJson[];
  readonly has_more: boolean;
  readonly next_cursor: string | null;
}

/** How a write request confirms what it replaces. */
export interface Confirmation {
  /** The If-Match header, when sent. */
  readonly ifMatch: string | undefined;
  /** The `confirm` query parameter, when sent. */
  readonly confirm: string | undefined;
}

export interface ScopedStorageOptions {
  readonly storage: Storage;
  readonly reviews: ReviewStore;
  readonly quota: InboxQuota;
  /** svc_storage_writes_total{op, outcome}: requested, applied, rejected, failed. */
  readonly writes?: { inc(labels: { op: 'put' | 'delete'; outcome: 'requested' | 'applied' | 'rejected' | 'failed' }): void };
}

export class ScopedStorage {
  readonly #o: ScopedStorageOptions;
  /** Per-area write lock: quota check, write and usage update run one at a time per area. */
  readonly #locks = new Map<string, Promise<unknown>>();

  constructor(opts: ScopedStorageOptions) {
    this.#o = opts;
  }

  /** The review store (list and read routes). */
  reviews(): ReviewStore {
    return this.#o.reviews;
  }

  /** The area's file operations (validates the owner id: 400 storage.invalid_path). */
  area(area: StorageArea, owner: string | undefined): AreaFs {
    const { storage } = this.#o;
    storage.areaDir(area, owner); // validates the id
    const rel = area === 'global' ? ['global'] : [area, owner ?? ''];
    return new AreaFs(storage.rootDir, rel);
  }

  async list(
    area: StorageArea,
    owner: string | undefined,
    names: readonly string[],
    cursor: string | null,
    limit: number,
  ): Promise<ListingJson> {
    const after = cursor === null ? null : decodeCursor(cursor);
    const fs = this.area(area, owner);
    let page: { entries: EntryMeta[]; hasMore: boolean };
    try {
      page = await fs.list(names, after, limit);
    } catch (err) {
      // An inbox or outbox nobody wrote to yet lists as empty.
      if (names.length === 0 && err instanceof SvcError && err.code === 'storage.not_found' && area !== 'global') {
        page = { entries: [], hasMore: false };
      } else throw err;
    }
    const lastEntry = page.entries[page.entries.length - 1];
    return {
      schema_version: 'storage.listing/v1',
      area,
      owner: owner ?? null,
      path: encodeScopedPath(names),
      entries: page.entries.map((e) => ({
        name: e.name,
        kind: e.kind,
        size_bytes: e.sizeBytes,
        modified: new Date(e.modifiedMs).toISOString(),
      })),
      has_more: page.hasMore,
      next_cursor: page.hasMore && lastEntry !== undefined ? encodeCursor(lastEntry.name) : null,
    };
  }

  /**
   * The reference implementation's listing (`GET /api/v1/storage/{scope}?path=`): `{root, path,
   * entries: [{name, kind file|dir|other, size_bytes, mode, modified}]}`, so its clients list
   * unchanged; `root` is the area's name, never a host path; symlinks are `other` (never
   * followed). A path naming a file lists that one entry. Paged like list() (500, cursor).
   */
  async referenceList(
    area: StorageArea,
    owner: string | undefined,
    names: readonly string[],
    cursor: string | null,
  ): Promise<ReferenceListingJson> {
    const root = area === 'global' ? 'global' : `${area}/${owner ?? ''}`;
    const fs = this.area(area, owner);
    const entry = (e: EntryMeta): ReferenceEntryJson => ({
      name: e.name,
      kind: e.kind === 'symlink' ? 'other' : e.kind,
      size_bytes: e.sizeBytes,
      mode: e.mode.toString(8).padStart(4, '0'),
      modified: new Date(e.modifiedMs).toISOString(),
    });
    if (names.length > 0) {
      const self = await fs.entry(names);
      if (self.kind !== 'dir') return { root, path: names.join('/'), entries: [entry(self)], has_more: false, next_cursor: null };
    }
    let page: { entries: EntryMeta[]; hasMore: boolean };
    try {
      page = await fs.list(names, cursor === null ? null : decodeCursor(cursor), MAX_LIST_ENTRIES);
    } catch (err) {
      if (names.length === 0 && err instanceof SvcError && err.code === 'storage.not_found' && area !== 'global')
        page = { entries: [], hasMore: false };
      else throw err;
    }
    const lastEntry = page.entries[page.entries.length - 1];
    return {
      root,
      path: names.join('/'),
      entries: page.entries.map(entry),
      has_more: page.hasMore,
      next_cursor: page.hasMore && lastEntry !== undefined ? encodeCursor(lastEntry.name) : null,
    };
  }

  /** An object's bytes and ETag (at most 1 MiB). */
  async read(
    area: StorageArea,
    owner: string | undefined,
    names: readonly string[],
  ): Promise<{ bytes: Buffer; etag: string; name: string }> {
    const { fh, st } = await this.area(area, owner).openFile(names);
    try {
      if (st.size > BigInt(MAX_OBJECT_BYTES)) {
        throw new SvcError(
          'storage.object_too_large',
          `the object is ${st.size} bytes; the scoped API reads at most ${MAX_OBJECT_BYTES} bytes: use GET /api/v1/storage/.../_download?path=`,
        );
      }
      const size = Number(st.size);
      const bytes = Buffer.allocUnsafe(size);
      let got = 0;
      while (got < size) {
        const { bytesRead } = await fh.read(bytes, got, size - got, got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return { bytes: bytes.subarray(0, got), etag: etagOf(st), name: names[names.length - 1] ?? 'object' };
    } finally {
      await fh.close();
    }
  }

  /** Request a PUT: 403 for global; checks now; records a pending review (202 by the route). */
  async requestPut(
    area: StorageArea,
    owner: string | undefined,
    names: readonly string[],
    body: Uint8Array,
    c: Confirmation,
    requestedBy: string,
  ): Promise<ReviewJson> {
    const w = this.#writable(area, owner);
    if (body.byteLength > MAX_OBJECT_BYTES) {
      throw new SvcError(
        'storage.object_too_large',
        `the body is ${body.byteLength} bytes; the scoped API writes at most ${MAX_OBJECT_BYTES}`,
      );
    }
    if (names.length === 0) throw new SvcError('storage.invalid_path', 'an object path is required');
    const cur = await this.area(w.area, w.owner).current(names);
    const expected = putExpectation(cur, c);
    if (w.area === 'inbox') await this.#o.quota.checkQuota(w.owner, incoming(body.byteLength, cur));
    this.#o.writes?.inc({ op: 'put', outcome: 'requested' });
    return this.#o.reviews.create({
      area: w.area,
      owner: w.owner,
      names,
      path: encodeScopedPath(names),
      op: 'put',
      body,
      sha256: createHash('sha256').update(body).digest('hex'),
      expectedEtag: expected,
      requestedBy,
    });
  }

  /** Request a DELETE: 403 for global; needs confirmation; records a pending review. */
  async requestDelete(
    area: StorageArea,
    owner: string | undefined,
    names: readonly string[],
    c: Confirmation,
    requestedBy: string,
  ): Promise<ReviewJson> {
    const w = this.#writable(area, owner);
    if (names.length === 0) throw new SvcError('storage.invalid_path', 'an object path is required');
    const cur = await this.area(w.area, w.owner).current(names);
    if (!cur.exists) throw new SvcError('storage.not_found', 'no such file or directory');
    const expected = deleteExpectation(cur, c);
    this.#o.writes?.inc({ op: 'delete', outcome: 'requested' });
    return this.#o.reviews.create({
      area: w.area,
      owner: w.owner,
      names,
      path: encodeScopedPath(names),
      op: 'delete',
      body: null,
      sha256: null,
      expectedEtag: expected,
      requestedBy,
    });
  }

  /**
   * Approve and apply a pending review. The write lands only if the object still has the ETag
   * the requester saw; a refusal (412, 507, …) moves the review to failed and is rethrown.
   */
  async approve(id: string, by: { actor: string; mode: 'mtls' | 'local' }): Promise<ReviewJson> {
    const review = this.#o.reviews.get(id);
    if (review.state !== 'pending') throw new SvcError('storage.review_decided', `storage write review ${id} is already ${review.state}`);
    if (by.mode === 'mtls' && review.requested_by === by.actor) {
      throw new SvcError('storage.review_self', `${by.actor} requested this write; another operator must approve it`);
    }
    const { names, body } = this.#o.reviews.payload(id);
    const fs = this.area(review.area, review.owner);
    try {
      const resultEtag = await this.#locked(`${review.area}/${review.owner}`, async () => {
        if (review.op === 'delete') {
          await fs.remove(names, (cur) => expectNow(cur, review.expected_etag));
          return null;
        }
        const bytes = body ?? new Uint8Array(0);
        const etag = await fs.writeFile(names, bytes, async (cur) => {
          expectNow(cur, review.expected_etag);
          if (review.area === 'inbox') await this.#o.quota.checkQuota(review.owner, incoming(bytes.byteLength, cur));
        });
        return etag;
      });
      if (review.area === 'inbox') await this.#o.quota.refresh(review.owner);
      this.#o.writes?.inc({ op: review.op, outcome: 'applied' });
      return this.#o.reviews.decide(id, 'applied', by.actor, resultEtag === null ? {} : { resultEtag });
    } catch (err) {
      const wire = err instanceof SvcError ? err.toWire() : { code: 'server.internal' as const, message: 'the write failed' };
      this.#o.writes?.inc({ op: review.op, outcome: 'failed' });
      this.#o.reviews.decide(id, 'failed', by.actor, { error: { code: wire.code, message: wire.message } });
      throw err;
    }
  }

  reject(id: string, by: string): ReviewJson {
    const review = this.#o.reviews.decide(id, 'rejected', by);
    this.#o.writes?.inc({ op: review.op, outcome: 'rejected' });
    return review;
  }

  #writable(area: StorageArea, owner: string | undefined): { area: 'inbox' | 'outbox'; owner: string } {
    if (area === 'global') throw new SvcError('storage.read_only', 'the global area is read-only');
    this.#o.storage.areaDir(area, owner); // validates the id
    return { area, owner: owner ?? '' };
  }

  async #locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    }
  }
}

/** Bytes a write adds to an inbox: the new size minus the file it replaces. */
function incoming(sizeBytes: number, cur: Current): number {
  return Math.max(0, sizeBytes - (cur.exists && cur.kind === 'file' ? cur.sizeBytes : 0));
}

function normalEtag(v: string): string {
  return v.trim().replace(/^W\//u, '');
}

/** The ETag a PUT expects at apply (null: absent), or the refusal (428/412/409). */
function putExpectation(cur: Current, c: Confirmation): string | null {
  if (c.confirm !== undefined && c.confirm !== 'overwrite') {
    throw new SvcError('request.invalid', 'confirm must be overwrite on PUT');
  }
  if (!cur.exists) {
    if (c.ifMatch !== undefined) throw new SvcError('storage.precondition_failed', 'If-Match was given but the object does not exist');
    return null;
  }
  if (cur.kind === 'symlink')
    throw new SvcError('storage.invalid_path', 'the path is a symlink (symlinks in storage areas are never followed or replaced)');
  if (cur.kind !== 'file') throw new SvcError('storage.not_a_file', 'the path names a directory or a special file');
  return confirmed(cur, c, 'overwrite');
}

function deleteExpectation(cur: Current & { exists: true }, c: Confirmation): string {
  if (c.confirm !== undefined && c.confirm !== 'delete') throw new SvcError('request.invalid', 'confirm must be delete on DELETE');
  return confirmed(cur, c, 'delete');
}

function confirmed(cur: Current & { exists: true }, c: Confirmation, word: 'overwrite' | 'delete'): string {
  if (c.ifMatch !== undefined) {
    const tags = c.ifMatch.split(',').map(normalEtag);
    if (!tags.includes('*') && !tags.includes(cur.etag)) {
      throw new SvcError('storage.precondition_failed', `the object's ETag is ${cur.etag}, not ${c.ifMatch.slice(0, 100)}`);
    }
    return cur.etag;
  }
  if (c.confirm === word) return cur.etag;
  throw new SvcError(
    'storage.confirmation_required',
    `the object exists (ETag ${cur.etag}); to ${word} it send If-Match: ${cur.etag} or confirm=${word}`,
    { etag: cur.etag },
  );
}

/** At apply: the object must still be what the requester saw. */
function expectNow(cur: Current, expected: string | null): void {
  if (expected === null) {
    if (cur.exists) throw new SvcError('storage.precondition_failed', 'the object was created since the write was requested');
    return;
  }
  if (!cur.exists) throw new SvcError('storage.precondition_failed', 'the object was removed since the write was requested');
  if (cur.etag !== expected)
    throw new SvcError('storage.precondition_failed', `the object changed since the write was requested (ETag ${cur.etag})`);
}

function encodeCursor(name: string): string {
  return Buffer.from(JSON.stringify({ after: name }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof v.after === 'string') return v.after;
  } catch {
    // fall through
  }
  throw new SvcError('request.invalid', 'cursor is not a cursor this server handed out');
}

/** Where the review store lives below the state directory. */
export function reviewsDir(stateDir: string): string {
  return join(stateDir, 'storage-reviews');
}
