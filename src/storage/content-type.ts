/**
 * Download headers for stored files: Content-Type from the file extension (a small fixed table;
 * anything else is application/octet-stream) and a Content-Disposition that is always
 * `attachment` with a filename no client can misread.
 */

const TEXT = 'charset=utf-8';

/** Extension (lower case, without the dot) → Content-Type. */
export const CONTENT_TYPES: Readonly<Record<string, string>> = {
  txt: `text/plain; ${TEXT}`,
  log: `text/plain; ${TEXT}`,
  md: `text/markdown; ${TEXT}`,
  json: 'application/json',
  jsonl: 'application/x-ndjson',
  html: `text/html; ${TEXT}`,
  htm: `text/html; ${TEXT}`,
  csv: `text/csv; ${TEXT}`,
  diff: `text/x-diff; ${TEXT}`,
  patch: `text/x-diff; ${TEXT}`,
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  svg: 'image/svg+xml',
  pdf: 'application/pdf',
  zip: 'application/zip',
  tar: 'application/x-tar',
  gz: 'application/gzip',
  tgz: 'application/gzip',
};

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** Content-Type for a file name (`report.tar.gz` → application/gzip: the last extension counts). */
export function contentTypeFor(fileName: string): string {
  const dot = fileName.lastIndexOf('.');
  if (dot <= 0 || dot === fileName.length - 1) return DEFAULT_CONTENT_TYPE;
  const ext = fileName.slice(dot + 1).toLowerCase();
  return Object.hasOwn(CONTENT_TYPES, ext) ? (CONTENT_TYPES[ext] as string) : DEFAULT_CONTENT_TYPE;
}

/** RFC 8187 value-chars: attr-char is ALPHA / DIGIT / "!#$&+-.^_`|~"; everything else is %-encoded UTF-8. */
function encodeRfc8187(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && /[A-Za-z0-9!#$&+\-.^_`|~]/u.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * `attachment; filename="<ascii>"; filename*=UTF-8''<encoded>` for the last segment of a path.
 * The quoted fallback keeps only [A-Za-z0-9._-] (others become `_`), so quotes, backslashes,
 * CR/LF and `;` can never end the header value early; `filename*` carries the exact name.
 */
export function contentDisposition(fileName: string): string {
  const base = fileName.slice(fileName.lastIndexOf('/') + 1) || 'download';
  let ascii = base.replace(/[^A-Za-z0-9._-]/gu, '_').replace(/^\.+/u, '_');
  if (ascii.length > 200) ascii = ascii.slice(-200);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeRfc8187(base)}`;
}

/**
 * Headers every download carries besides Content-Type: the disposition, no MIME sniffing, no
 * caching, and a sandboxing CSP so an HTML or SVG file opened from the API cannot run script
 * against the API's origin.
 */
export function downloadHeaders(fileName: string, sizeBytes: number): Record<string, string> {
  return {
    'content-disposition': contentDisposition(fileName),
    'content-length': String(sizeBytes),
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; sandbox",
  };
}
