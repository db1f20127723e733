/**
 * A minimal ISO 9660 image writer: one root directory of small files, no Rock Ridge or Joliet.
 * Enough for a cloud-init NoCloud seed (volume label `cidata`, files user-data, meta-data,
 * network-config) without genisoimage, xorriso or cloud-localds on the host.
 *
 * Layout, in 2048-byte sectors:
 *   0-15  system area (zeros)
 *   16    primary volume descriptor
 *   17    volume descriptor set terminator
 *   18    L path table (little-endian)      19  M path table (big-endian)
 *   20    root directory (one sector: '.', '..', then the files sorted by name)
 *   21…   file contents, each starting on a sector boundary
 *
 * Names are written upper-case as `NAME.;1` (the period ISO 9660 requires; Linux shows
 * `user-data`, dropping `.;1` and lower-casing). Interchange-level purists would object to `-`
 * and long names; the Linux isofs driver, which is what reads the seed, accepts them.
 */

export const SECTOR_BYTES = 2048;
const ROOT_LBA = 20;
const FIRST_FILE_LBA = 21;

export interface IsoFile {
  /** 1-30 characters of A-Z a-z 0-9 _ - (upper-cased in the image). */
  readonly name: string;
  readonly data: Uint8Array;
}

function bothU16(buf: Buffer, at: number, v: number): void {
  buf.writeUInt16LE(v, at);
  buf.writeUInt16BE(v, at + 2);
}

function bothU32(buf: Buffer, at: number, v: number): void {
  buf.writeUInt32LE(v, at);
  buf.writeUInt32BE(v, at + 4);
}

function padded(text: string, len: number): string {
  return text.slice(0, len).padEnd(len, ' ');
}

/** The 7-byte directory-record date (UTC). */
function recordDate(d: Date): Buffer {
  return Buffer.from([
    d.getUTCFullYear() - 1900,
    d.getUTCMonth() + 1,
    d.getUTCDate(),
    d.getUTCHours(),
    d.getUTCMinutes(),
    d.getUTCSeconds(),
    0,
  ]);
}

/** The 17-byte volume-descriptor date (UTC). */
function volumeDate(d: Date): Buffer {
  const p = (n: number, w: number): string => String(n).padStart(w, '0');
  const text = `${p(d.getUTCFullYear(), 4)}${p(d.getUTCMonth() + 1, 2)}${p(d.getUTCDate(), 2)}${p(d.getUTCHours(), 2)}${p(d.getUTCMinutes(), 2)}${p(d.getUTCSeconds(), 2)}00`;
  return Buffer.concat([Buffer.from(text, 'ascii'), Buffer.from([0])]);
}

function dirRecord(name: Buffer, lba: number, size: number, isDir: boolean, date: Date): Buffer {
  const len = 33 + name.length + (name.length % 2 === 0 ? 1 : 0);
  const r = Buffer.alloc(len);
  r[0] = len;
  bothU32(r, 2, lba);
  bothU32(r, 10, size);
  recordDate(date).copy(r, 18);
  r[25] = isDir ? 2 : 0;
  bothU16(r, 28, 1);
  r[32] = name.length;
  name.copy(r, 33);
  return r;
}

/** Builds the image. Throws RangeError for a bad name, duplicate names, or a root directory over one sector. */
export function buildIso9660(opts: { volumeId: string; files: readonly IsoFile[]; date?: Date }): Buffer {
  const date = opts.date ?? new Date();
  if (!/^[A-Za-z0-9_]{1,32}$/.test(opts.volumeId)) throw new RangeError('volume id must be 1-32 characters of A-Z 0-9 _');
  const files = [...opts.files].sort((a, b) => (a.name.toUpperCase() < b.name.toUpperCase() ? -1 : 1));
  const names = new Set<string>();
  for (const f of files) {
    if (!/^[A-Za-z0-9_-]{1,30}$/.test(f.name))
      throw new RangeError(`file name ${JSON.stringify(f.name)} must be 1-30 characters of A-Z 0-9 _ -`);
    if (names.has(f.name.toUpperCase())) throw new RangeError(`duplicate file name ${f.name}`);
    names.add(f.name.toUpperCase());
  }
  // File extents.
  let lba = FIRST_FILE_LBA;
  const placed = files.map((f) => {
    const at = lba;
    lba += Math.max(1, Math.ceil(f.data.byteLength / SECTOR_BYTES));
    return { ...f, lba: at };
  });
  const totalSectors = lba;
  const root = Buffer.alloc(SECTOR_BYTES);
  let off = 0;
  const records = [
    dirRecord(Buffer.from([0]), ROOT_LBA, SECTOR_BYTES, true, date),
    dirRecord(Buffer.from([1]), ROOT_LBA, SECTOR_BYTES, true, date),
    ...placed.map((f) => dirRecord(Buffer.from(`${f.name.toUpperCase()}.;1`, 'ascii'), f.lba, f.data.byteLength, false, date)),
  ];
  for (const r of records) {
    if (off + r.length > SECTOR_BYTES) throw new RangeError('too many files for a one-sector root directory');
    r.copy(root, off);
    off += r.length;
  }

  const image = Buffer.alloc(totalSectors * SECTOR_BYTES);
  // Primary volume descriptor.
  const pvd = Buffer.alloc(SECTOR_BYTES);
  pvd[0] = 1;
  pvd.write('CD001', 1, 'ascii');
  pvd[6] = 1;
  pvd.write(padded('LINUX', 32), 8, 'ascii');
  pvd.write(padded(opts.volumeId.toUpperCase(), 32), 40, 'ascii');
  bothU32(pvd, 80, totalSectors);
  bothU16(pvd, 120, 1);
  bothU16(pvd, 124, 1);
  bothU16(pvd, 128, SECTOR_BYTES);
  bothU32(pvd, 132, 10); // path table bytes: one 10-byte entry (the root)
  pvd.writeUInt32LE(18, 140);
  pvd.writeUInt32BE(19, 148);
  dirRecord(Buffer.from([0]), ROOT_LBA, SECTOR_BYTES, true, date).copy(pvd, 156);
  pvd.write(padded('', 128 * 4), 190, 'ascii'); // volume set, publisher, preparer, application
  pvd.write(padded('', 37 * 3), 702, 'ascii'); // copyright, abstract, bibliographic files
  volumeDate(date).copy(pvd, 813);
  volumeDate(date).copy(pvd, 830);
  Buffer.concat([Buffer.from('0000000000000000', 'ascii'), Buffer.from([0])]).copy(pvd, 847);
  volumeDate(date).copy(pvd, 864);
  pvd[881] = 1;
  pvd.copy(image, 16 * SECTOR_BYTES);
  // Terminator.
  const term = image.subarray(17 * SECTOR_BYTES, 18 * SECTOR_BYTES);
  term[0] = 255;
  term.write('CD001', 1, 'ascii');
  term[6] = 1;
  // Path tables: the root only (name 0x00, parent 1).
  const pathEntry = (bigEndian: boolean): Buffer => {
    const e = Buffer.alloc(10);
    e[0] = 1;
    if (bigEndian) e.writeUInt32BE(ROOT_LBA, 2);
    else e.writeUInt32LE(ROOT_LBA, 2);
    if (bigEndian) e.writeUInt16BE(1, 6);
    else e.writeUInt16LE(1, 6);
    return e;
  };
  pathEntry(false).copy(image, 18 * SECTOR_BYTES);
  pathEntry(true).copy(image, 19 * SECTOR_BYTES);
  root.copy(image, ROOT_LBA * SECTOR_BYTES);
  for (const f of placed) image.set(f.data, f.lba * SECTOR_BYTES);
  return image;
}

/** Reads back the volume id and root files of an image made by buildIso9660 (tests, diagnostics). */
export function readIso9660(image: Uint8Array): { volumeId: string; files: Map<string, Buffer> } {
  const buf = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const pvd = buf.subarray(16 * SECTOR_BYTES, 17 * SECTOR_BYTES);
  if (pvd[0] !== 1 || pvd.toString('ascii', 1, 6) !== 'CD001') throw new RangeError('no primary volume descriptor');
  const volumeId = pvd.toString('ascii', 40, 72).trimEnd();
  const rootLba = pvd.readUInt32LE(156 + 2);
  const rootSize = pvd.readUInt32LE(156 + 10);
  const dir = buf.subarray(rootLba * SECTOR_BYTES, rootLba * SECTOR_BYTES + rootSize);
  const files = new Map<string, Buffer>();
  for (let off = 0; off < dir.length && dir[off]! > 0; off += dir[off]!) {
    const nameLen = dir[off + 32]!;
    const raw = dir.toString('ascii', off + 33, off + 33 + nameLen);
    if ((dir[off + 25]! & 2) !== 0) continue;
    const lba = dir.readUInt32LE(off + 2);
    const size = dir.readUInt32LE(off + 10);
    files.set(raw.replace(/\.?;1$/, '').toLowerCase(), buf.subarray(lba * SECTOR_BYTES, lba * SECTOR_BYTES + size));
  }
  return { volumeId, files };
}
