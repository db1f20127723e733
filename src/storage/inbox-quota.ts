/**
 * The agent inbox quota (spec 8: 50 GB per agent) and the svc_agentshare_inbox_bytes gauge.
 *
 * Usage is the apparent size (st.size) of every file and symlink under `<inboxes>/<agent_id>`,
 * found by walking the tree without following symlinks. Walks are cached per agent for
 * `refreshIntervalMs` and single-flight (concurrent checks share one walk); `start()` also
 * re-walks every inbox on that interval so the gauge follows files agents write directly.
 * Write paths call `checkQuota(agentId, incomingBytes)` before accepting bytes and
 * `noteWritten(agentId, bytes)` after, so writes inside one cache window add up.
 *
 * The gauge is the total over all inboxes (the spec gives it no labels; per-agent labels would
 * be unbounded).
 */
import type { Dirent } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SvcError } from '../core/errors.js';
import { isValidName } from '../identity/spiffe.js';

/** 50 GB (decimal, as the spec writes it): 50 × 10⁹ bytes. */
export const DEFAULT_INBOX_QUOTA_BYTES = 50_000_000_000;
/** How long a measured usage is trusted, and the background re-walk period (ms). */
export const DEFAULT_INBOX_REFRESH_INTERVAL_MS = 60_000;

export interface InboxQuotaOptions {
  /** The directory holding one inbox per agent (`<storage root>/inbox`). */
  readonly inboxesDir: string;
  /** Per-agent limit in bytes. Default {@link DEFAULT_INBOX_QUOTA_BYTES}. */
  readonly quotaBytes?: number;
  /** Cache lifetime and background refresh period, ms. Default {@link DEFAULT_INBOX_REFRESH_INTERVAL_MS}. */
  readonly refreshIntervalMs?: number;
  /** svc_agentshare_inbox_bytes (set to the total after every change). */
  readonly gauge?: { set(value: number): void };
  /** A walk failed for a reason other than a missing directory (log it and count it). */
  readonly onError?: (err: unknown, agentId: string | null) => void;
  /** Clock, ms. Default Date.now. */
  readonly now?: () => number;
}

interface Usage {
  bytes: number;
  measuredAtMs: number;
}

export class InboxQuota {
  readonly quotaBytes: number;
  readonly #opts: InboxQuotaOptions;
  readonly #refreshMs: number;
  readonly #usage = new Map<string, Usage>();
  readonly #walks = new Map<string, Promise<number>>();
  #timer: NodeJS.Timeout | null = null;
  #refreshing: Promise<number> | null = null;

  constructor(opts: InboxQuotaOptions) {
    this.#opts = opts;
    this.quotaBytes = opts.quotaBytes ?? DEFAULT_INBOX_QUOTA_BYTES;
    this.#refreshMs = opts.refreshIntervalMs ?? DEFAULT_INBOX_REFRESH_INTERVAL_MS;
  }

  /** Start the periodic re-walk (idempotent). The first walk runs at once. */
  start(): void {
    if (this.#timer !== null) return;
    const tick = (): void => {
      this.refreshAll().catch((err: unknown) => this.#opts.onError?.(err, null));
    };
    this.#timer = setInterval(tick, this.#refreshMs);
    this.#timer.unref();
    tick();
  }

  /** Stop the re-walk and wait for a walk in progress (idempotent). */
  async stop(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    await Promise.allSettled([this.#refreshing, ...this.#walks.values()]);
  }

  /** Bytes in the agent's inbox (cached up to refreshIntervalMs). Rejects 400 for a bad id. */
  async usage(agentId: string): Promise<number> {
    if (!isValidName(agentId)) throw new SvcError('storage.invalid_path', 'agent_id must be 1-128 of A-Z a-z 0-9 . _ - (not . or ..)');
    const cached = this.#usage.get(agentId);
    if (cached !== undefined && this.#nowMs() - cached.measuredAtMs < this.#refreshMs) return cached.bytes;
    return this.#measure(agentId);
  }

  /**
   * Resolves when `incomingBytes` more fit in the agent's inbox; rejects 507
   * `storage.quota_exceeded` (with used, incoming and quota bytes in the message) otherwise.
   */
  async checkQuota(agentId: string, incomingBytes: number): Promise<void> {
    if (!Number.isSafeInteger(incomingBytes) || incomingBytes < 0)
      throw new SvcError('request.invalid', 'incoming size must be a non-negative integer');
    const used = await this.usage(agentId);
    if (used + incomingBytes > this.quotaBytes) {
      throw new SvcError(
        'storage.quota_exceeded',
        `inbox of agent ${agentId} holds ${used} bytes; ${incomingBytes} more would exceed its quota of ${this.quotaBytes} bytes`,
        { used_bytes: used, incoming_bytes: incomingBytes, quota_bytes: this.quotaBytes },
      );
    }
  }

  /** Re-measure one inbox now (after a write through the API), publishing the gauge; resolves to its bytes. */
  refresh(agentId: string): Promise<number> {
    return this.#measure(agentId);
  }

  /** Count bytes just written (or negative for bytes removed) without waiting for the next walk. */
  noteWritten(agentId: string, bytes: number): void {
    const u = this.#usage.get(agentId);
    if (u === undefined) return; // the next usage() walks anyway
    u.bytes = Math.max(0, u.bytes + bytes);
    this.#publish();
  }

  /** Total bytes over the inboxes measured so far. */
  totalBytes(): number {
    let total = 0;
    for (const u of this.#usage.values()) total += u.bytes;
    return total;
  }

  /** Re-walk every inbox now (single-flight); resolves to the total. */
  refreshAll(): Promise<number> {
    this.#refreshing ??= this.#refreshAll().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #refreshAll(): Promise<number> {
    let names: string[];
    try {
      names = (await readdir(this.#opts.inboxesDir, { withFileTypes: true }))
        .filter((d) => d.isDirectory() && isValidName(d.name))
        .map((d) => d.name);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
      names = [];
    }
    const present = new Set(names);
    for (const id of [...this.#usage.keys()]) if (!present.has(id)) this.#usage.delete(id);
    for (const id of names) await this.#measure(id);
    this.#publish();
    return this.totalBytes();
  }

  #measure(agentId: string): Promise<number> {
    let walk = this.#walks.get(agentId);
    if (walk === undefined) {
      walk = (async () => {
        try {
          const bytes = await treeBytes(join(this.#opts.inboxesDir, agentId));
          this.#usage.set(agentId, { bytes, measuredAtMs: this.#nowMs() });
          this.#publish();
          return bytes;
        } catch (err) {
          this.#opts.onError?.(err, agentId);
          // An unreadable inbox keeps its last known size rather than reading as empty.
          return this.#usage.get(agentId)?.bytes ?? 0;
        } finally {
          this.#walks.delete(agentId);
        }
      })();
      this.#walks.set(agentId, walk);
    }
    return walk;
  }

  #publish(): void {
    this.#opts.gauge?.set(this.totalBytes());
  }

  #nowMs(): number {
    return (this.#opts.now ?? Date.now)();
  }
}

/** Apparent bytes of every entry under `dir`, not following symlinks; 0 when `dir` is missing. */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length > 0) {
    const d = stack.pop() as string;
    let entries: Dirent[];
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue; // removed while walking
      throw err;
    }
    for (const ent of entries) {
      const p = join(d, ent.name);
      if (ent.isDirectory()) {
        stack.push(p);
        continue;
      }
      try {
        total += (await lstat(p)).size;
      } catch (err) {
        if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
      }
    }
  }
  return total;
}
