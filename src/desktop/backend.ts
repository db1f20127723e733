/**
 * The desktop backend port: what turns a redeemed grant into a guest desktop session, reports what
 * it sees of that session, and signs a session out. The server side (resources, authorization,
 * grants, fencing) is the same whatever the backend; the backend alone decides whether the
 * capability says `supported`.
 *
 * The intended first backend is xrdp in a Debian guest, reached through the SSH connector
 * (SVC_GATEWAY_SSH_*); it is not built in this version. The only backend here is `none`: it
 * reports supported false, readiness unknown, with the reason, and never redeems a grant.
 */
import type { DesktopObserved } from '../wire/desktop.js';
import type { EnrollmentRecord, GrantAction } from './desktop-store.js';

/** What the backend says about one instance's desktop. */
export interface BackendCapability {
  readonly supported: boolean;
  readonly readiness: 'unknown' | 'ready' | 'unavailable';
  readonly reasonCodes: readonly string[];
}

/** A grant redeemed: the session it opens, and where the guest is (from its enrollment). */
export interface RedeemedGrant {
  readonly desktopId: string;
  readonly action: GrantAction;
  readonly instanceId: string;
  readonly incarnation: string;
  readonly generation: number;
  readonly sshAddress: string;
  readonly sshHostKey: string;
}

/** What the server gives a backend at start. */
export interface DesktopBackendHooks {
  /**
   * Redeems a grant (the string a client got from attach or reconnect): the one step that uses
   * it. Succeeds once per grant, only before its expiry, only while its resource is active,
   * unfenced, of the grant's generation and inside its absolute expiry; null otherwise (which
   * one is not said).
   */
  redeem(grant: string): RedeemedGrant | null;
  /** The backend saw the guest session change. */
  observe(desktopId: string, observed: DesktopObserved, cause: string): void;
  /** A sign-out asked with requestSignOut finished. */
  cleanupFinished(desktopId: string, ok: boolean): void;
}

export interface DesktopBackend {
  readonly name: string;
  capability(instanceId: string, enrollment: EnrollmentRecord | undefined): BackendCapability;
  start(hooks: DesktopBackendHooks): void;
  /** Close with sign_out true: sign the guest session out; report through hooks.cleanupFinished. */
  requestSignOut(desktopId: string): void;
  stop(): Promise<void>;
}

/** Reason codes of the capability (README "Managed desktop sessions"). */
export const REASON_NO_BACKEND = 'backend_unavailable';
export const REASON_NOT_ENROLLED = 'not_enrolled';

/** The backend of an image without a desktop backend: honest about it. */
export function noneBackend(): DesktopBackend {
  return {
    name: 'none',
    capability: (_instanceId, enrollment) => ({
      supported: false,
      readiness: 'unknown',
      reasonCodes: enrollment === undefined ? [REASON_NO_BACKEND, REASON_NOT_ENROLLED] : [REASON_NO_BACKEND],
    }),
    start: () => undefined,
    // Nothing was ever connected through this backend, but it cannot assert that the guest has no
    // session either: cleanup stays pending (close does not assert guest logout, spec part 3).
    requestSignOut: () => undefined,
    stop: () => Promise.resolve(),
  };
}
