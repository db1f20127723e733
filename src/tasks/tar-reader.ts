/**
 * A tar reader for archives that come from a guest (a task's outbox): it yields regular files
 * only, with names that stay inside the destination, and never hands the host's `tar` bytes a
 * hostile guest wrote. Understood: ustar and old-GNU headers (name + prefix), GNU long names
 * (`L`), pax headers (`x`, their `path=` and `size=`), octal and base-256 sizes. Directories are
 * implied by file paths; symlinks, hard links, devices and FIFOs are skipped and reported, so an
 * archive cannot make the host write or read through a link.
 *
 * Errors (a bad checksum, a truncated archive, a name with `..` or an absolute path) reject the
 * whole archive: partial trust in a guest's archive buys nothing.
 */
import { posix } from 'node:path';

const BLOCK = 512;

export interface TarFile {
  /** Normalised relative path, `/`-separated, no `.`/`..` segments. */
  readonly name: string;
  readonly data: Buffer;
}

export interface TarContents {
  readonly files: TarFile[];
  /** Entries that are not regular files (links, devices, FIFOs), as `name (type X)`. */
  readonly skipped: string[];
}

/** A regular file of an archive, as the byte range of its contents. */
export interface TarEntry {
  /** Normalised relative path, `/`-separated, no `.`/`..` segments. */
  readonly name: string;
  /** Its contents are archive bytes [start, end). */
  readonly start: number;
  readonly end: number;
}

/** What scanTar finds: the regular files as byte ranges, and what was skipped. */
export interface TarIndex {
  readonly entries: TarEntry[];
  /** Entries that are not regular files (links, devices, FIFOs), as `name (type X)`. */
  readonly skipped: string[];
}

/** Thrown for an archive that is corrupt or names a path outside the destination. */
export class TarError extends Error {}

function cString(buf: Buffer, start: number, length: number): string {
  const field = buf.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? field.length : end).toString('utf8');
}

function octal(buf: Buffer, start: number, length: number, what: string): number {
  const field = buf.subarray(start, start + length);
  if (((field[0] ?? 0) & 0x80) !== 0) {
    // base-256 (GNU): big-endian, the top bit of the first byte marks it.
    let n = (field[0] ?? 0) & 0x7f;
    for (let i = 1; i < field.length; i++) n = n * 256 + (field[i] ?? 0);
    if (!Number.isSafeInteger(n)) throw new TarError(`${what} is too large`);
    return n;
  }
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError(`${what} is not an octal number: ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

function checksumOk(header: Buffer): boolean {
  const want = octal(header, 148, 8, 'header checksum');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] ?? 0);
  return sum === want;
}

/** `path=` and `size=` of a pax extended header. */
function paxRecords(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const len = Number(data.subarray(at, space).toString('latin1'));
    if (!Number.isInteger(len) || len <= 0 || at + len > data.length) throw new TarError('malformed pax header');
    const record = data.subarray(space + 1, at + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    at += len;
  }
  return out;
}

/**
 * The safe relative form of an entry name: `./a/b` → `a/b`. Throws for an absolute name, a `..`
 * segment, a NUL or backslash; returns '' for the archive root itself (`./`).
 */
export function safeEntryName(raw: string): string {
  if (raw.includes('\0') || raw.includes('\\')) throw new TarError(`unsafe name in archive: ${JSON.stringify(raw)}`);
  if (raw.startsWith('/')) throw new TarError(`absolute name in archive: ${JSON.stringify(raw)}`);
  if (raw.split('/').includes('..')) throw new TarError(`name leaving the archive root: ${JSON.stringify(raw)}`);
  const n = posix.normalize(raw).replace(/\/+$/, '');
  return n === '.' ? '' : n;
}

/**
 * Reads a whole archive; each file's data is a copy. `maxFiles` bounds the number of regular files
 * (default 10,000). Throws TarError for anything corrupt or unsafe.
 */
export function readTar(archive: Buffer, opts: { maxFiles?: number } = {}): TarContents {
  const { entries, skipped } = scanTar(archive, opts);
  return { files: entries.map((e) => ({ name: e.name, data: Buffer.from(archive.subarray(e.start, e.end)) })), skipped };
}

/**
 * Checks a whole archive and finds its regular files as byte ranges, copying nothing (what the
 * job pool runs: the archive's buffer goes to the job and comes back with the ranges). Same rules,
 * bound and errors as readTar.
 */
export function scanTar(bytes: Uint8Array, opts: { maxFiles?: number } = {}): TarIndex {
  const archive = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const maxFiles = opts.maxFiles ?? 10_000;
  const files: TarEntry[] = [];
  const skipped: string[] = [];
  const seen = new Set<string>();
  let at = 0;
  let longName: string | null = null;
  let pax = new Map<string, string>();
  while (at + BLOCK <= archive.length) {
    const header = archive.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) return { entries: files, skipped }; // end of archive
    if (!checksumOk(header)) throw new TarError(`bad header checksum at byte ${at}`);
    const type = String.fromCharCode(header[156] ?? 0);
    const paxSize = pax.get('size');
    const size = paxSize !== undefined ? Number(paxSize) : octal(header, 124, 12, 'entry size');
    if (!Number.isSafeInteger(size) || size < 0) throw new TarError(`bad entry size at byte ${at}`);
    const dataStart = at + BLOCK;
    const dataEnd = dataStart + size;
    if (dataEnd > archive.length) throw new TarError('the archive is truncated');
    const data = archive.subarray(dataStart, dataEnd);
    at = dataStart + Math.ceil(size / BLOCK) * BLOCK;

    if (type === 'L') {
      longName = cString(data, 0, data.length);
      continue;
    }
    if (type === 'x') {
      pax = paxRecords(data);
      continue;
    }
    if (type === 'g' || type === 'K') continue; // global pax header, long link target: nothing we use
    const magic = header.subarray(257, 262).toString('latin1');
    const prefix = magic === 'ustar' ? cString(header, 345, 155) : '';
    const plain = cString(header, 0, 100);
    const raw = pax.get('path') ?? longName ?? (prefix !== '' ? `${prefix}/${plain}` : plain);
    longName = null;
    pax = new Map();
    const name = safeEntryName(raw);
    if (type === '5') continue; // directories follow from the files in them
    if (type !== '0' && type !== '\0' && type !== '7') {
      skipped.push(`${name} (type ${type})`);
      continue;
    }
    if (name === '') throw new TarError('a file entry names the archive root');
    if (seen.has(name)) throw new TarError(`${name} appears twice in the archive`);
    seen.add(name);
    if (files.length >= maxFiles) throw new TarError(`more than ${maxFiles} files in the archive`);
    files.push({ name, start: dataStart, end: dataEnd });
  }
  throw new TarError('the archive has no end marker (truncated)');
}
