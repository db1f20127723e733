/**
 * The agent share's file areas (spec 4.9), all under one storage root
 * (`$SVC_STATE_DIR/storage` by default):
 *
 *   <root>/global/…              shared by every task and agent; read-only through the API
 *   <root>/inbox/<agent_id>/…    files for one agent (quota-limited, see inbox-quota.ts)
 *   <root>/outbox/<task_id>/…    what a task leaves behind (its artifacts)
 *
 * The API only reads (downloads); there are no upload, delete or list routes. A file above
 * `maxDownloadBytes` is refused rather than buffered, because the HTTP layer sends a response
 * from one in-memory body (see the report on streaming downloads).
 */
import { join } from 'node:path';
import { SvcError } from '../core/errors.js';
import { isValidName } from '../identity/spiffe.js';
import { TASK_ID_RE } from '../core/ids.js';
import { readFileInRoot, type StoredFile } from './safe-path.js';

export type StorageArea = 'global' | 'inbox' | 'outbox';

/** Largest download served by default (64 MiB). */
export const DEFAULT_MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;

export interface StorageOptions {
  /** The storage root (absolute); areas are subdirectories. Missing directories read as 404. */
  readonly rootDir: string;
  /** Largest file served, bytes. Default {@link DEFAULT_MAX_DOWNLOAD_BYTES}. */
  readonly maxDownloadBytes?: number;
}

export class Storage {
  readonly rootDir: string;
  readonly maxDownloadBytes: number;

  constructor(opts: StorageOptions) {
    this.rootDir = opts.rootDir;
    this.maxDownloadBytes = opts.maxDownloadBytes ?? DEFAULT_MAX_DOWNLOAD_BYTES;
  }

  /** `<root>/global`. */
  globalDir(): string {
    return join(this.rootDir, 'global');
  }

  /** `<root>/inbox`, the parent of every agent inbox. */
  inboxesDir(): string {
    return join(this.rootDir, 'inbox');
  }

  /** `<root>/inbox/<agent_id>`; 400 `storage.invalid_path` for an id outside 1–128 of [A-Za-z0-9._-]. */
  inboxDir(agentId: string): string {
    if (!isValidName(agentId)) throw new SvcError('storage.invalid_path', 'agent_id must be 1-128 of A-Z a-z 0-9 . _ - (not . or ..)');
    return join(this.inboxesDir(), agentId);
  }

  /** `<root>/outbox/<task_id>`; 400 `storage.invalid_path` unless the id is task-<uuid>. */
  outboxDir(taskId: string): string {
    if (!TASK_ID_RE.test(taskId)) throw new SvcError('storage.invalid_path', 'task_id must be task-<uuid> (lower-case hex)');
    return join(this.rootDir, 'outbox', taskId);
  }

  /** The directory of an area (`id` is the agent id for inbox, the task id for outbox). */
  areaDir(area: StorageArea, id?: string): string {
    if (area === 'global') return this.globalDir();
    return area === 'inbox' ? this.inboxDir(id ?? '') : this.outboxDir(id ?? '');
  }

  /**
   * Read `relPath` of an area. Rejects with 400 `storage.invalid_path` (bad id or path, leaves the
   * area, a directory), 404 `storage.not_found`, or 503 `server.unavailable` for a file over
   * maxDownloadBytes.
   */
  async download(area: StorageArea, id: string | undefined, relPath: string | undefined): Promise<StoredFile> {
    const dir = this.areaDir(area, id);
    return readFileInRoot(dir, relPath, {
      maxBytes: this.maxDownloadBytes,
      container: this.rootDir,
      tooLarge: (size) =>
        new SvcError(
          'server.unavailable',
          `the file is ${size} bytes; downloads are limited to ${this.maxDownloadBytes} bytes until streamed downloads exist`,
        ),
    });
  }
}
