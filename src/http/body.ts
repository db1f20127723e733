/**
 * Request body policy and query-parameter validation, independent of uWS.
 *
 * Body policy: JSON routes take at most `maxBodyBytes` (default 1 MiB; per route and per
 * listener); a larger declared or streamed body is 413 `request.body_too_large`. A non-empty body
 * on a JSON route needs `Content-Type: application/json` (or `application/*+json`, e.g. A2A's
 * `application/a2a+json`), else 400 `request.unsupported_media_type`; bytes that are not UTF-8
 * JSON are 400 `request.malformed_json`; an empty body is `undefined` and the handler decides.
 */
import { SvcError } from '../core/errors.js';
import type { BodyMode } from './types.js';

/** Default body limit of JSON and raw routes: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** Default time to receive a whole body: 30 s (a trickling client is cut off after it). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Check the declared Content-Length before reading: returns the length (undefined when absent,
 * e.g. chunked), or throws 413 when over the limit and 400 when it is not a number.
 */
export function declaredBodyLength(headers: Readonly<Record<string, string>>, maxBodyBytes: number): number | undefined {
  const raw = headers['content-length'];
  if (raw === undefined) return undefined;
  if (!/^\d{1,15}$/.test(raw.trim())) throw new SvcError('request.invalid', 'Content-Length is not a valid length');
  const n = Number(raw.trim());
  if (n > maxBodyBytes) throw tooLarge(maxBodyBytes);
  return n;
}

export function tooLarge(maxBodyBytes: number): SvcError {
  return new SvcError('request.body_too_large', `the request body exceeds ${maxBodyBytes} bytes`, { max_bytes: maxBodyBytes });
}

/**
 * Collects body chunks under a byte limit. uWS neuters each chunk after its callback, so every
 * chunk is copied: into one preallocated buffer when the length is declared, otherwise into a
 * list joined once at the end (never a concat per chunk).
 */
export class BodyCollector {
  readonly #maxBytes: number;
  readonly #fixed: Uint8Array | null;
  readonly #chunks: Uint8Array[] = [];
  #length = 0;

  /** @param declaredLength Content-Length when sent (already checked against the limit). */
  constructor(maxBytes: number, declaredLength?: number) {
    this.#maxBytes = maxBytes;
    this.#fixed = declaredLength === undefined ? null : new Uint8Array(declaredLength);
  }

  get length(): number {
    return this.#length;
  }

  /** Copy a chunk in; returns false (and keeps nothing more) once the limit is passed. */
  push(chunk: ArrayBuffer | Uint8Array): boolean {
    const bytes = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
    const next = this.#length + bytes.byteLength;
    if (next > this.#maxBytes) return false;
    if (this.#fixed !== null) {
      if (next > this.#fixed.byteLength) return false;
      this.#fixed.set(bytes, this.#length);
    } else if (bytes.byteLength > 0) {
      this.#chunks.push(bytes.slice());
    }
    this.#length = next;
    return true;
  }

  /** The whole body, or null when empty. */
  finish(): Uint8Array | null {
    if (this.#length === 0) return null;
    if (this.#fixed !== null) return this.#length === this.#fixed.byteLength ? this.#fixed : this.#fixed.subarray(0, this.#length);
    if (this.#chunks.length === 1) return this.#chunks[0] ?? null;
    const out = new Uint8Array(this.#length);
    let at = 0;
    for (const c of this.#chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    return out;
  }
}

/** True for `application/json` and `application/<anything>+json`, with or without parameters. */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const essence = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return essence === 'application/json' || (essence.startsWith('application/') && essence.endsWith('+json'));
}

/** Apply the route's body mode to the received bytes: the parsed JSON, or undefined. Throws SvcError. */
export function parseBody(mode: BodyMode, headers: Readonly<Record<string, string>>, raw: Uint8Array | null): unknown {
  if (mode !== 'json' || raw === null || raw.byteLength === 0) return undefined;
  if (!isJsonContentType(headers['content-type'])) {
    throw new SvcError('request.unsupported_media_type', 'a request body needs Content-Type: application/json');
  }
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new SvcError('request.malformed_json', 'the request body is not valid UTF-8');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const detail = err instanceof SyntaxError ? `: ${err.message.slice(0, 200)}` : '';
    throw new SvcError('request.malformed_json', `the request body is not valid JSON${detail}`);
  }
}

// ---- query parameters -------------------------------------------------------------------------

interface IntOptions {
  min?: number;
  max?: number;
  default?: number;
}

/** The single value of a query parameter; a repeated parameter is 400 `request.invalid`. */
function single(query: URLSearchParams, name: string): string | undefined {
  const all = query.getAll(name);
  if (all.length > 1) throw new SvcError('request.invalid', `query parameter ${name} is given more than once`);
  return all[0];
}

/**
 * An integer query parameter within [min, max] (both inclusive). Absent → `default` (or undefined).
 * Anything else (a fraction, `1e3`, an empty value, out of range) is 400 `request.invalid` naming it.
 */
export function parseIntParam(query: URLSearchParams, name: string, opts: IntOptions & { default: number }): number;
export function parseIntParam(query: URLSearchParams, name: string, opts?: IntOptions): number | undefined;
export function parseIntParam(query: URLSearchParams, name: string, opts: IntOptions = {}): number | undefined {
  const raw = single(query, name);
  if (raw === undefined) return opts.default;
  const n = /^-?\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n)) throw new SvcError('request.invalid', `query parameter ${name} must be an integer`);
  if (opts.min !== undefined && n < opts.min) throw new SvcError('request.invalid', `query parameter ${name} must be at least ${opts.min}`);
  if (opts.max !== undefined && n > opts.max) throw new SvcError('request.invalid', `query parameter ${name} must be at most ${opts.max}`);
  return n;
}

/** A boolean query parameter: `true`/`false`/`1`/`0`. Absent → `default` (or undefined). */
export function parseBoolParam(query: URLSearchParams, name: string, opts: { default: boolean }): boolean;
export function parseBoolParam(query: URLSearchParams, name: string, opts?: { default?: boolean }): boolean | undefined;
export function parseBoolParam(query: URLSearchParams, name: string, opts: { default?: boolean } = {}): boolean | undefined {
  const raw = single(query, name);
  if (raw === undefined) return opts.default;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new SvcError('request.invalid', `query parameter ${name} must be true or false`);
}

/** One of a fixed set of values. Absent → `default` (or undefined). */
export function parseEnumParam<T extends string>(query: URLSearchParams, name: string, values: readonly T[], opts: { default: T }): T;
export function parseEnumParam<T extends string>(
  query: URLSearchParams,
  name: string,
  values: readonly T[],
  opts?: { default?: T },
): T | undefined;
export function parseEnumParam<T extends string>(
  query: URLSearchParams,
  name: string,
  values: readonly T[],
  opts: { default?: T } = {},
): T | undefined {
  const raw = single(query, name);
  if (raw === undefined) return opts.default;
  if ((values as readonly string[]).includes(raw)) return raw as T;
  throw new SvcError('request.invalid', `query parameter ${name} must be one of ${values.join(', ')}`);
}

/** A string query parameter, optionally required, bounded in length (default 1024) and matching a pattern. */
export function parseStringParam(
  query: URLSearchParams,
  name: string,
  opts: { required: true; maxLength?: number; pattern?: RegExp },
): string;
export function parseStringParam(
  query: URLSearchParams,
  name: string,
  opts?: { required?: boolean; maxLength?: number; pattern?: RegExp },
): string | undefined;
export function parseStringParam(
  query: URLSearchParams,
  name: string,
  opts: { required?: boolean; maxLength?: number; pattern?: RegExp } = {},
): string | undefined {
  const raw = single(query, name);
  if (raw === undefined) {
    if (opts.required === true) throw new SvcError('request.invalid', `query parameter ${name} is required`);
    return undefined;
  }
  const maxLength = opts.maxLength ?? 1024;
  if (raw.length > maxLength) throw new SvcError('request.invalid', `query parameter ${name} is longer than ${maxLength} characters`);
  if (opts.pattern !== undefined && !opts.pattern.test(raw))
    throw new SvcError('request.invalid', `query parameter ${name} has an invalid format`);
  return raw;
}
