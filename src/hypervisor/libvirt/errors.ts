/**
 * libvirt failures → the error table. The binding rejects with libvirt's message text only
 * (virGetLastError's code is lost in its worker), so failures are classified by message, with
 * patterns taken from libvirt 9's test, remote and qemu drivers.
 */
import { SvcError } from '../../core/errors.js';
import { TimeoutError } from '../../util/deadline.js';

export type FailureKind =
  'not-found' | 'already-exists' | 'already-active' | 'not-active' | 'not-paused' | 'unavailable' | 'timeout' | 'other';

const RULES: readonly [FailureKind, RegExp][] = [
  ['not-found', /domain not found|no domain with matching/i],
  ['already-exists', /already exists with uuid|is already defined with uuid|domain '[^']*' already exists/i],
  ['already-active', /is already running|domain is already active|already active/i],
  ['not-paused', /not paused/i],
  ['not-active', /not running|is not active|domain is not in (?:a )?running state/i],
  [
    'unavailable',
    /failed to connect|cannot recv data|cannot write data|end of file while reading|client socket is closed|broken pipe|connection reset|connection refused|no connection driver|invalid connection pointer|unable to connect|connection closed|keepalive timeout|cannot connect|no such file or directory.*sock|transport endpoint/i,
  ],
];

/** The message of anything the binding rejects with (an Error or a bare string). */
export function failureMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  return 'unknown libvirt failure';
}

export function classifyFailure(err: unknown): FailureKind {
  if (err instanceof TimeoutError) return 'timeout';
  // Our own refusals (raised inside a call) are answers, never availability failures.
  if (err instanceof SvcError) return 'other';
  const msg = failureMessage(err);
  for (const [kind, re] of RULES) if (re.test(msg)) return kind;
  return 'other';
}

/** True when the failure says the host (not the domain) is in trouble: it counts for the breaker. */
export function isAvailabilityFailure(kind: FailureKind): boolean {
  return kind === 'unavailable' || kind === 'timeout';
}

/** libvirt's message, one line, bounded (it may quote the XML we sent). */
export function shortMessage(err: unknown): string {
  const first = failureMessage(err).split('\n', 1)[0] ?? '';
  return first.length > 300 ? `${first.slice(0, 300)}…` : first;
}

/**
 * The SvcError for a failed call on domain `name` (on host `host`, already redacted).
 * `retryAfterSeconds` is used for availability failures.
 */
export function toSvcError(err: unknown, ctx: { name?: string; host: string; op: string; retryAfterSeconds: number }): SvcError {
  if (err instanceof SvcError) return err;
  const kind = classifyFailure(err);
  const vm = ctx.name === undefined ? '' : `VM '${ctx.name}' `;
  switch (kind) {
    case 'not-found':
      return new SvcError('VM_NOT_FOUND', ctx.name === undefined ? 'VM not found' : `${vm}not found`);
    case 'already-exists':
      return new SvcError('VM_ALREADY_EXISTS', `${vm}already exists`);
    case 'already-active':
      return new SvcError('VM_RUNNING', `${vm}is already running`);
    case 'not-paused':
      return new SvcError('VM_RUNNING', `${vm}is running, not paused`);
    case 'not-active':
      return new SvcError('VM_NOT_RUNNING', `${vm}is not running`);
    case 'timeout':
    case 'unavailable':
      return new SvcError('HYPERVISOR_UNAVAILABLE', `hypervisor ${ctx.host} unavailable during ${ctx.op}: ${shortMessage(err)}`, {
        host: ctx.host,
        retryAfterSeconds: ctx.retryAfterSeconds,
      });
    case 'other':
      return new SvcError('LIBVIRT_ERROR', `${ctx.op}${ctx.name === undefined ? '' : ` ${ctx.name}`} failed: ${shortMessage(err)}`, {
        host: ctx.host,
      });
  }
}
