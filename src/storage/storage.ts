/**
 * The agent share's file areas (spec 4.9), all under one storage root
 * (`$SVC_STATE_DIR/storage` by default):
 *
 *   <root>/global/…              shared by every task and agent; read-only through the API
 *   <root>/inbox/<agent_id>/…    files for one agent (quota-limited, see inbox-quota.ts)
 *   <root>/outbox/<task_id>/…    what a task leaves behind (its artifacts)
 *   <root>/outbox/<agent_id>/…   what a VM's agent leaves (its agent share, agentshare.ts)
 *
 * Downloads stream (src/http StreamResult: one chunk in memory at a time), so the only size limit
 * is `maxDownloadBytes` (SVC_STORAGE_MAX_DOWNLOAD_BYTES), 413 `storage.download_too_large` beyond.
 * Listing, upload, overwrite and delete are the scoped API (scoped-storage.ts).
 */
import { join } from 'node:path';
import { SvcError } from '../core/errors.js';
import { isValidName } from '../identity/spiffe.js';
import { TASK_ID_RE } from '../core/ids.js';
import { openFileInRoot, type OpenedFile } from './safe-path.js';

export type StorageArea = 'global' | 'inbox' | 'outbox';

/** A VM's agent id (its name) as an outbox owner (the VM name rule of create-request.ts). */
const VM_OWNER_RE = /^agent-[a-z0-9-]+$/u;

/** Largest download served by default (64 GiB: downloads stream, so this bounds time, not memory). */
export const DEFAULT_MAX_DOWNLOAD_BYTES = 64 * 1024 ** 3;

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

  /**
   * `<root>/outbox/<owner>`: a task's (task-<uuid>) or a VM agent's (its name, agent-…: the agent
   * share, agentshare.ts); 400 `storage.invalid_path` for anything else.
   */
  outboxDir(owner: string): string {
    if (!TASK_ID_RE.test(owner) && !(VM_OWNER_RE.test(owner) && owner.length <= 63)) {
      throw new SvcError('storage.invalid_path', 'the outbox owner must be a task id (task-<uuid>) or a VM agent (agent-[a-z0-9-]+)');
    }
    return join(this.rootDir, 'outbox', owner);
  }

  /** The directory of an area (`id` is the agent id for inbox, the task id for outbox). */
  areaDir(area: StorageArea, id?: string): string {
    if (area === 'global') return this.globalDir();
    return area === 'inbox' ? this.inboxDir(id ?? '') : this.outboxDir(id ?? '');
  }

  /**
   * Open `relPath` of an area for a streamed download (the caller closes it). Rejects with 400
   * `storage.invalid_path` (bad id or path, leaves the area, a directory), 404
   * `storage.not_found`, or 413 `storage.download_too_large` for a file over maxDownloadBytes.
   */
  async openDownload(area: StorageArea, id: string | undefined, relPath: string | undefined): Promise<OpenedFile> {
    const dir = this.areaDir(area, id);
    return openFileInRoot(dir, relPath, {
      maxBytes: this.maxDownloadBytes,
      container: this.rootDir,
      tooLarge: (size) =>
        new SvcError(
          'storage.download_too_large',
          `the file is ${size} bytes; downloads are limited to ${this.maxDownloadBytes} bytes (SVC_STORAGE_MAX_DOWNLOAD_BYTES)`,
        ),
    });
  }
}
