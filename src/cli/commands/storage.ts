/**
 * `sbx storage list|get|put|delete|reviews|approve|reject` (`ls` and `rm` are the usual aliases; README
 * "Scoped storage").
 *
 * AREA is `global`, `inbox/<agent_id>` or `outbox/<task_id>`. PATH is names joined with `/`
 * (each name is percent-encoded on its own on the wire; a name holding a `/` cannot be given
 * here, the API takes it as %2F). `put` and `rm` only request the write: it lands once another
 * operator (or, on the trusted local listener, the same one) runs `sbx storage approve ID`.
 * Replacing an existing object needs --overwrite or --if-match ETAG; `rm` needs --yes or
 * --if-match ETAG.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { StorageAreaRef } from '../../client/api-client.js';
import type { StorageReview } from '../../wire/storage.js';
import { STORAGE_REVIEW_STATES, type StorageReviewState } from '../../wire/storage.js';
import { bool, int, str, UsageError, type FlagSpec, type FlagValues } from '../args.js';
import { bytes, renderFields, renderTable } from '../format.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

const AREA = { name: 'AREA', required: true, description: 'global, inbox/<agent_id> or outbox/<task_id>' };
const KEY: FlagSpec = {
  name: 'idempotency-key',
  type: 'string',
  value: 'KEY',
  description: 'retry-safe key (a retry replays the first answer)',
};
const IF_MATCH: FlagSpec = { name: 'if-match', type: 'string', value: 'ETAG', description: 'act only if the object still has this ETag' };

function areaOf(text: string): StorageAreaRef {
  if (text === 'global') return { area: 'global' };
  const m = /^(inbox|outbox)\/([^/]+)$/u.exec(text);
  if (m === null) throw new UsageError(`bad area ${JSON.stringify(text)}`, 'AREA is global, inbox/<agent_id> or outbox/<task_id>');
  return { area: m[1] as 'inbox' | 'outbox', owner: m[2] as string };
}

function pathOf(text: string | undefined): string[] {
  if (text === undefined || text === '' || text === '/') return [];
  return text.replace(/^\/+|\/+$/gu, '').split('/');
}

const keyOf = (flags: FlagValues): { idempotencyKey?: string } => {
  const k = str(flags, 'idempotency-key');
  return k === undefined ? {} : { idempotencyKey: k };
};

function showReview(ctx: CommandContext, review: StorageReview): void {
  if (ctx.json) return ctx.printJson({ review });
  ctx.out(
    renderFields([
      ['review', review.id],
      ['state', review.state],
      ['write', `${review.op} ${review.area}/${review.owner}/${review.path}`],
      ['size', review.size_bytes === null ? '-' : bytes(review.size_bytes)],
      ['requested by', review.requested_by],
      ['decided by', review.decided_by ?? '-'],
      ...(review.error !== null ? ([['error', `${review.error.code}: ${review.error.message}`]] as Array<[string, string]>) : []),
    ]),
  );
  if (review.state === 'pending') ctx.out(`the write waits for review: sbx storage approve ${review.id}`);
}

const ls: CommandDef = {
  noun: 'storage',
  verb: 'list',
  summary: 'list a directory of a storage area (metadata only; all pages unless --limit)',
  args: [AREA, { name: 'PATH', required: false, description: 'directory (default: the area root)' }],
  flags: [{ name: 'limit', type: 'number', value: 'N', description: 'at most N entries (one page, 1-500)' }],
  async run(ctx, { args, flags }) {
    const area = areaOf(args[0] as string);
    const path = pathOf(args[1]);
    const limit = int(flags, 'limit', 1, 500);
    const entries = [];
    let cursor: string | null = null;
    do {
      const page = await ctx.api.storageList(
        area,
        path,
        { ...(cursor !== null && { cursor }), ...(limit !== undefined && { limit }) },
        { signal: ctx.signal },
      );
      entries.push(...page.entries);
      cursor = limit === undefined ? page.next_cursor : null;
    } while (cursor !== null);
    if (ctx.json) ctx.printJson({ entries });
    else
      ctx.out(
        renderTable(
          entries,
          [
            { header: 'KIND', value: (e) => e.kind },
            { header: 'NAME', value: (e) => e.name },
            { header: 'SIZE', value: (e) => (e.kind === 'dir' ? '-' : bytes(e.size_bytes)), right: true },
            { header: 'MODIFIED', value: (e) => e.modified },
          ],
          { color: ctx.color, empty: 'empty' },
        ),
      );
    return undefined;
  },
};

const get: CommandDef = {
  noun: 'storage',
  verb: 'get',
  summary: 'read an object (at most 1 MiB; bigger files through the download route)',
  args: [AREA, { name: 'PATH', required: true, description: 'the object' }],
  flags: [
    {
      name: 'output',
      short: 'o',
      type: 'string',
      value: 'FILE',
      description: "where to write it (default: its name here; '-' for stdout)",
    },
  ],
  async run(ctx, { args, flags }) {
    const path = pathOf(args[1]);
    if (path.length === 0) throw new UsageError('name an object');
    const obj = await ctx.api.storageGet(areaOf(args[0] as string), path, { signal: ctx.signal });
    const target = str(flags, 'output') ?? basename(path[path.length - 1] as string);
    if (target === '-') {
      ctx.io.stdout.write(obj.bytes);
      return undefined;
    }
    await writeFile(target, obj.bytes);
    if (ctx.json) ctx.printJson({ file: target, size_bytes: obj.bytes.byteLength, etag: obj.etag });
    else ctx.out(`${args[1] as string} → ${target} (${bytes(obj.bytes.byteLength)}, ETag ${obj.etag ?? '-'})`);
    return undefined;
  },
};

const put: CommandDef = {
  noun: 'storage',
  verb: 'put',
  summary: 'request writing a file into an inbox or outbox (lands after review)',
  args: [
    AREA,
    { name: 'PATH', required: true, description: 'the object' },
    { name: 'FILE', required: true, description: "local file, '-' for stdin" },
  ],
  flags: [{ name: 'overwrite', type: 'boolean', description: 'replace an existing object (confirm=overwrite)' }, IF_MATCH, KEY],
  async run(ctx, { args, flags }) {
    const path = pathOf(args[1]);
    if (path.length === 0) throw new UsageError('name an object');
    const file = args[2] as string;
    const data = file === '-' ? await readStdin(ctx) : new Uint8Array(await readFile(file));
    const ifMatch = str(flags, 'if-match');
    const { review } = await ctx.api.storagePut(
      areaOf(args[0] as string),
      path,
      data,
      { confirm: bool(flags, 'overwrite'), ...(ifMatch !== undefined && { ifMatch }) },
      { ...keyOf(flags), signal: ctx.signal },
    );
    showReview(ctx, review);
    return undefined;
  },
};

const rm: CommandDef = {
  noun: 'storage',
  verb: 'delete',
  summary: 'request deleting an object of an inbox or outbox (lands after review)',
  args: [AREA, { name: 'PATH', required: true, description: 'the object (a file, symlink or empty directory)' }],
  flags: [{ name: 'yes', type: 'boolean', description: 'confirm the delete (confirm=delete)' }, IF_MATCH, KEY],
  async run(ctx, { args, flags }) {
    const path = pathOf(args[1]);
    if (path.length === 0) throw new UsageError('name an object');
    const ifMatch = str(flags, 'if-match');
    if (!bool(flags, 'yes') && ifMatch === undefined)
      throw new UsageError('delete needs --yes or --if-match ETAG', 'usage: sbx storage rm AREA PATH --yes');
    const { review } = await ctx.api.storageDelete(
      areaOf(args[0] as string),
      path,
      { confirm: bool(flags, 'yes'), ...(ifMatch !== undefined && { ifMatch }) },
      { ...keyOf(flags), signal: ctx.signal },
    );
    showReview(ctx, review);
    return undefined;
  },
};

const reviews: CommandDef = {
  noun: 'storage',
  verb: 'reviews',
  summary: 'list requested storage writes (newest first)',
  args: [],
  flags: [{ name: 'state', type: 'string', value: 'STATE', description: `${STORAGE_REVIEW_STATES.join(', ')} (default: all)` }],
  async run(ctx, { flags }) {
    const state = str(flags, 'state');
    if (state !== undefined && !(STORAGE_REVIEW_STATES as readonly string[]).includes(state)) throw new UsageError(`bad state ${state}`);
    const res = await ctx.api.storageReviews(state === undefined ? {} : { state: state as StorageReviewState }, { signal: ctx.signal });
    if (ctx.json) ctx.printJson(res);
    else
      ctx.out(
        renderTable(
          res.reviews,
          [
            { header: 'REVIEW', value: (r) => r.id },
            { header: 'STATE', value: (r) => r.state },
            { header: 'OP', value: (r) => r.op },
            { header: 'OBJECT', value: (r) => `${r.area}/${r.owner}/${r.path}` },
            { header: 'BY', value: (r) => r.requested_by },
          ],
          { color: ctx.color, empty: 'no storage writes requested' },
        ),
      );
    return undefined;
  },
};

const decide = (verb: 'approve' | 'reject'): CommandDef => ({
  noun: 'storage',
  verb,
  summary: verb === 'approve' ? 'approve a requested write: it lands now (or fails and says why)' : 'reject a requested write',
  args: [{ name: 'ID', required: true, description: 'review id (srv-…)' }],
  flags: [KEY],
  async run(ctx, { args, flags }) {
    const id = args[0] as string;
    const opts = { ...keyOf(flags), signal: ctx.signal };
    const { review } = verb === 'approve' ? await ctx.api.approveStorageReview(id, opts) : await ctx.api.rejectStorageReview(id, opts);
    showReview(ctx, review);
    return undefined;
  },
});

async function readStdin(ctx: CommandContext): Promise<Uint8Array> {
  const parts: Buffer[] = [];
  for await (const chunk of ctx.io.stdin as AsyncIterable<Buffer | string>)
    parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return new Uint8Array(Buffer.concat(parts));
}

export const STORAGE_COMMANDS: readonly CommandDef[] = [ls, get, put, rm, reviews, decide('approve'), decide('reject')];
