/**
 * The HTTP API's wire shapes of scoped storage (README "Scoped storage"): a directory listing
 * (storage.listing/v1, metadata only) and a write review (storage.review/v1).
 * A leaf: imports nothing outside src/wire.
 */

/** The areas: global (read-only), an agent's inbox, a task's outbox. */
export type StorageAreaName = 'global' | 'inbox' | 'outbox';

/** States of a write review. */
export const STORAGE_REVIEW_STATES = ['pending', 'applied', 'rejected', 'failed'] as const;
export type StorageReviewState = (typeof STORAGE_REVIEW_STATES)[number];

/** One entry of a listing: never contents. */
export interface StorageEntry {
  /** The name (a `/` inside a name is shown as `/`; it is never a separator). */
  readonly name: string;
  readonly kind: 'file' | 'dir' | 'symlink' | 'other';
  /** Bytes (0 for a directory). */
  readonly size_bytes: number;
  /** Last modification, RFC 3339. */
  readonly modified: string;
}

/** GET /api/v2/storage/{area}/list[/{path}] (storage.listing/v1). */
export interface StorageListing {
  readonly schema_version: 'storage.listing/v1';
  readonly area: StorageAreaName;
  /** The agent id (inbox) or task id (outbox); null for global. */
  readonly owner: string | null;
  /** The listed directory, each name percent-encoded on its own ('' for the area's root). */
  readonly path: string;
  /** At most 500, sorted by name. */
  readonly entries: readonly StorageEntry[];
  readonly has_more: boolean;
  /** Pass as `cursor` for the next page; null on the last. */
  readonly next_cursor: string | null;
}

/** A requested inbox or outbox write (storage.review/v1). */
export interface StorageReview {
  readonly schema_version: 'storage.review/v1';
  readonly id: string;
  readonly area: 'inbox' | 'outbox';
  readonly owner: string;
  /** The object path, each name percent-encoded on its own, joined with `/`. */
  readonly path: string;
  readonly op: 'put' | 'delete';
  readonly state: StorageReviewState;
  /** PUT: bytes and SHA-256 (hex) of the content to write; null for DELETE. */
  readonly size_bytes: number | null;
  readonly sha256: string | null;
  /** The ETag the object must still have when the write is applied; null: it must not exist. */
  readonly expected_etag: string | null;
  readonly requested_by: string;
  readonly requested_at: string;
  readonly decided_by: string | null;
  readonly decided_at: string | null;
  /** ETag of the object an applied PUT wrote. */
  readonly result_etag: string | null;
  /** Why an approved write was refused when applied (state failed). */
  readonly error: { readonly code: string; readonly message: string } | null;
}
