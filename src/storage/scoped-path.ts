/**
 * Paths of the scoped storage API (spec 4.13): individually percent-encoded segments.
 *
 * The client encodes each name on its own and joins the encoded names with `/`. So `/` in the
 * request path is the only separator, and `%2F` inside a segment is part of the name: the name
 * `a/b` (sent as `a%2Fb`) is one entry, stored on disk as `a∕b` (U+2215 DIVISION SLASH, see
 * {@link toDiskName}). Every segment of the still-encoded request path is decoded exactly once,
 * strictly, and then refused when it is:
 * - empty, `.` or `..`, or a `/`-separated part of the name is (`..%2Fetc`, `%2F..`);
 * - a dot segment after any further decoding (`%252e%252e`, double encoded), or holds an escape
 *   that decodes to `/`, `\` or NUL (`%252F`): a name that another decoder would read as a path
 *   is never stored;
 * - invalid percent-encoding or invalid UTF-8 (overlong `%C0%AE`, lone surrogates);
 * - holding NUL, another control character, a backslash or U+2215 (reserved for `/`);
 * - longer than 255 bytes on disk; the whole path is at most 4096 bytes and 64 segments.
 * Each refusal is 400 `storage.invalid_path`.
 */
import { SvcError } from '../core/errors.js';

/** Longest path (decoded, UTF-8 bytes, separators included). */
export const MAX_SCOPED_PATH_BYTES = 4096;
/** Longest name on disk, bytes (the file system's NAME_MAX). */
export const MAX_NAME_BYTES = 255;
/** Most segments in a path. */
export const MAX_SCOPED_SEGMENTS = 64;

/** How a `/` inside a name is stored on disk (a file system name cannot hold `/`). */
export const DISK_SLASH = '\u2215';

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const CONTROL_RE = /[\u0000-\u001f\u007f]/u;
const ESCAPE_RE = /%[0-9A-Fa-f]{2}/u;
const STRICT_ENCODED_RE = /^(?:[^%]|%[0-9A-Fa-f]{2})*$/u;

function invalid(message: string): SvcError {
  return new SvcError('storage.invalid_path', message);
}

/** True for a name (or a `/`-part of one) that a path resolver would treat as navigation. */
function isDotName(s: string): boolean {
  return s === '' || s === '.' || s === '..';
}

/** Decode one still-encoded segment and check it (see the file comment). Throws 400. */
export function decodeSegment(raw: string): string {
  if (raw === '') throw invalid('the path has an empty segment (// or a leading or trailing /)');
  if (!STRICT_ENCODED_RE.test(raw)) throw invalid('a path segment has a % that does not start a %XX escape');
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    throw invalid('a path segment is not valid UTF-8 once decoded (overlong or truncated sequence)');
  }
  checkName(name);
  return name;
}

/** Check a decoded name. Throws 400 `storage.invalid_path`. */
export function checkName(name: string): void {
  if (isDotName(name)) throw invalid('the path has an empty, . or .. segment');
  if (name.includes('\u0000')) throw invalid('the path contains a NUL byte');
  if (CONTROL_RE.test(name)) throw invalid('the path contains a control character');
  if (name.includes('\\')) throw invalid('the path contains a backslash');
  if (name.includes(DISK_SLASH)) throw invalid('names cannot contain U+2215 (it stores a / inside a name)');
  if (name.includes('/') && name.split('/').some(isDotName)) {
    throw invalid('a name with an encoded / cannot have an empty, . or .. part');
  }
  // Double (or deeper) encoding: what another decoder would make of the name.
  let layer = name;
  for (let depth = 0; depth < 4 && ESCAPE_RE.test(layer); depth++) {
    try {
      layer = decodeURIComponent(layer);
    } catch {
      // An escape sequence that is not valid UTF-8 at a deeper layer (`%25C0%25AE`: an overlong
      // dot once decoded again) is refused rather than guessed about.
      throw invalid('a path segment holds invalid UTF-8 once decoded again (double-encoded overlong sequence)');
    }
    // eslint-disable-next-line no-control-regex -- refusing NUL is the point
    if (isDotName(layer) || /[/\\\u0000]/u.test(layer)) {
      throw invalid('a path segment is a dot segment, /, \\ or NUL once decoded again (double encoding)');
    }
  }
  if (Buffer.byteLength(toDiskName(name), 'utf8') > MAX_NAME_BYTES) throw invalid(`a name is longer than ${MAX_NAME_BYTES} bytes`);
}

/**
 * Split and decode the still-encoded tail of a request path (after `.../objects/` or
 * `.../list/`). `allowEmpty`: an empty tail is the area's root (listing). One trailing slash is
 * ignored. Throws 400 `storage.invalid_path`.
 */
export function parseScopedPath(rawTail: string, opts: { allowEmpty: boolean }): string[] {
  let tail = rawTail;
  if (tail.endsWith('/')) tail = tail.slice(0, -1);
  if (tail === '') {
    if (opts.allowEmpty) return [];
    throw invalid('an object path is required');
  }
  const raw = tail.split('/');
  if (raw.length > MAX_SCOPED_SEGMENTS) throw invalid(`the path has more than ${MAX_SCOPED_SEGMENTS} segments`);
  const names = raw.map(decodeSegment);
  if (Buffer.byteLength(names.join('/'), 'utf8') > MAX_SCOPED_PATH_BYTES) {
    throw invalid(`the path is longer than ${MAX_SCOPED_PATH_BYTES} bytes`);
  }
  return names;
}

/** The name on disk of an API name (`/` → U+2215). */
export function toDiskName(name: string): string {
  return name.includes('/') ? name.replaceAll('/', DISK_SLASH) : name;
}

/** The API name of a name on disk (U+2215 → `/`). */
export function fromDiskName(name: string): string {
  return name.includes(DISK_SLASH) ? name.replaceAll(DISK_SLASH, '/') : name;
}

/** The canonical encoded form of a path (each name encoded on its own), for records and Location. */
export function encodeScopedPath(names: readonly string[]): string {
  return names.map((n) => encodeURIComponent(n)).join('/');
}

/**
 * The still-encoded tail of `rawPath` after its first `skip` segments (the route's prefix), for
 * routes whose last pattern segment is `*`: the router decodes `*` and joins it with `/`, which
 * would turn `%2F` into a separator, so the handler takes the tail from the raw path instead.
 */
export function rawTail(rawPath: string, skip: number): string {
  const parts = rawPath.split('/');
  // parts[0] is '' (the path starts with /)
  return parts.slice(skip + 1).join('/');
}
