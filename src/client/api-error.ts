/**
 * The one error type of the client. A non-2xx response becomes an ApiError carrying the HTTP
 * status and the v1 envelope's `{error: {code, message}}` (or, when the body is not an envelope,
 * a code derived from the status and its text). Failures below HTTP have status 0 and the code
 * `network` (connection refused, DNS, reset) or `timeout` (the client's own deadline).
 */

/** Codes the client itself produces (never sent by the server). */
export const CLIENT_ERROR_CODES = ['network', 'timeout', 'protocol'] as const;

export class ApiError extends Error {
  /** HTTP status; 0 when no response was received. */
  readonly status: number;
  /** The server's machine code (`VM_NOT_FOUND`), or a client code (`network`, `timeout`, `protocol`). */
  readonly code: string;
  /** Seconds from a Retry-After header, when the server sent one. */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, code: string, message: string, opts: { retryAfterSeconds?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }

  /** True for failures a retry may fix: no response, a timeout, or a 5xx/429. */
  get retryable(): boolean {
    return this.status === 0 ? this.code !== 'protocol' : this.status >= 500 || this.status === 429;
  }
}

/** Standard reason phrases for the statuses the API uses (fetch's statusText is empty over HTTP/2 and often in browsers). */
const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Payload Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  507: 'Insufficient Storage',
};

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const n = Number(value.trim());
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/**
 * The ApiError for a non-2xx response whose body text was read. Envelope fields win; otherwise the
 * code is `http_<status>` and the message the status text (or the body's first line when short).
 */
export function errorFromResponse(status: number, statusText: string, bodyText: string, retryAfter: string | null): ApiError {
  const retryAfterSeconds = parseRetryAfter(retryAfter);
  const opts = retryAfterSeconds === undefined ? {} : { retryAfterSeconds };
  try {
    const parsed: unknown = JSON.parse(bodyText);
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
      const e = parsed.error;
      if (typeof e === 'object' && e !== null) {
        const { code, message } = e as { code?: unknown; message?: unknown };
        if (typeof code === 'string' && code !== '') {
          return new ApiError(status, code, typeof message === 'string' ? message : code, opts);
        }
      }
    }
  } catch {
    // Not JSON: fall through to the status text.
  }
  const reason = statusText !== '' ? statusText : (REASONS[status] ?? 'HTTP error');
  const firstLine = bodyText.split('\n', 1)[0]?.trim() ?? '';
  const message = firstLine !== '' && firstLine.length <= 200 && !firstLine.startsWith('{') ? `${reason}: ${firstLine}` : reason;
  return new ApiError(status, `http_${status}`, message, opts);
}

/** True for the error an aborted fetch or stream read rejects with (DOMException AbortError). */
export function isAbortError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError';
}

/** A network-level failure (fetch rejected without a response) as an ApiError. */
export function networkError(baseUrl: string, err: unknown): ApiError {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  const detail =
    typeof cause?.code === 'string'
      ? cause.code
      : typeof cause?.message === 'string'
        ? cause.message
        : err instanceof Error
          ? err.message
          : String(err);
  return new ApiError(0, 'network', `cannot reach ${baseUrl}: ${detail}`, { cause: err });
}

/** Whether a signal has fired (a call, so TypeScript does not narrow it across awaits). */
export function aborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}
