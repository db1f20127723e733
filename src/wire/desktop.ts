/**
 * The wire shapes of managed desktop sessions (spec part 2 "Desktop capability", "Desktop
 * resource", 4.15; README "Managed desktop sessions"), served only on the desktop listener
 * (SVC_DESKTOP_ADDR). Grant material appears only in the grant response. A leaf: imports nothing
 * outside src/wire.
 */

export const DESKTOP_SCHEMA_VERSION = 'rdp-cockpit.v1';

/** What the resource's owner wants: active until a close. */
export const DESKTOP_DESIRED = ['active', 'closed'] as const;
export type DesktopDesired = (typeof DESKTOP_DESIRED)[number];
/** What the backend last saw of the guest session (unknown until a backend reports). */
export const DESKTOP_OBSERVED = ['unknown', 'connected', 'disconnected', 'gone'] as const;
export type DesktopObserved = (typeof DESKTOP_OBSERVED)[number];
/** Sign-out cleanup of the guest session, asked by a close with sign_out true. */
export const DESKTOP_CLEANUP = ['none', 'pending', 'done', 'failed'] as const;
export type DesktopCleanup = (typeof DESKTOP_CLEANUP)[number];

export type DesktopReadiness = 'unknown' | 'ready' | 'unavailable';

export interface DesktopPolicy {
  observe: boolean;
  control: boolean;
  sharing: boolean;
  clipboard_copy: boolean;
  clipboard_paste: boolean;
  file_transfer: boolean;
  audio: boolean;
  recording: boolean;
  isolation_tier: string;
  generation: number;
}

/** GET /api/v2/instances/{instance_id}/desktop-capability. */
export interface DesktopCapability {
  schema_version: typeof DESKTOP_SCHEMA_VERSION;
  supported: boolean;
  readiness: DesktopReadiness;
  /** Why it is not supported or not ready (`backend_unavailable`, `not_enrolled`, ...); empty when ready. */
  reason_codes: string[];
  instance_id: string;
  /** The enrolled incarnation; null before an enrollment. */
  incarnation: string | null;
  policy: DesktopPolicy;
}

/** POST /api/v2/instances/{instance_id}/desktop-enrollment response. */
export interface DesktopEnrollment {
  instance_id: string;
  incarnation: string;
  revision: number;
}

/** A desktop resource (create, get, close). */
export interface DesktopResource {
  schema_version: typeof DESKTOP_SCHEMA_VERSION;
  desktop_id: string;
  instance_id: string;
  incarnation: string;
  /** ISO 8601 UTC: when the eight-hour authorization epoch began (at the first create). */
  authorization_epoch: string;
  /** ISO 8601 UTC: authorization_epoch + 8 h; no grant is issued or redeemed after it. */
  absolute_expires_at: string;
  generation: number;
  desired: DesktopDesired;
  observed: DesktopObserved;
  cleanup: DesktopCleanup;
  fenced: boolean;
}

/** POST .../attach and .../reconnect: 201, no-store. The grant is usable once. */
export interface DesktopGrant {
  schema_version: typeof DESKTOP_SCHEMA_VERSION;
  grant: string;
  expires_at: string;
}

/** The problem+json body of every desktop error (RFC 9457). */
export interface DesktopProblem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
}
