/**
 * The SSH connector's byte protocol (spec 4.14 "SSH connector"; README "SSH connector"), shared
 * by the connector (src/gateway/ssh/connector.ts) and `sbx ssh-proxy` (src/cli/commands/ssh.ts):
 *
 *   client → connector   one JSON line {actor, instance_id, access_mode} ending in "\n"
 *                        (at most kPreludeMaxBytes with the newline), then the raw SSH stream
 *   connector → client   on refusal: one JSON line {error: {code, message}} and the connection
 *                        closes; no byte has reached sshd. Otherwise nothing of its own: the
 *                        next bytes are sshd's ("SSH-2.0-…").
 *
 * A leaf: imports nothing outside src/wire.
 */

/** The prelude's size bound, bytes, newline included. */
export const kPreludeMaxBytes = 4096;
/** Time the whole prelude may take to arrive, ms. */
export const kPreludeTimeoutMs = 5000;

export interface SshPrelude {
  actor: string;
  instance_id: string;
  /** Only `ssh` (spec part 2: a lease's access_mode is ssh). */
  access_mode: 'ssh';
}

/** Refusal codes of the connector, each the `code` of its one error line. */
export type SshConnectorErrorCode =
  | 'ssh.prelude_too_large'
  | 'ssh.prelude_timeout'
  | 'ssh.prelude_invalid'
  | 'ssh.access_mode_unsupported'
  | 'ssh.not_allowed'
  | 'ssh.lease_required'
  | 'ssh.unknown_instance'
  | 'ssh.no_endpoint'
  | 'ssh.target_unreachable'
  | 'ssh.unavailable';

export interface SshConnectorErrorLine {
  error: { code: SshConnectorErrorCode; message: string };
}

/** The prelude line as the client writes it (JSON and the newline). */
export function encodePrelude(p: SshPrelude): string {
  return `${JSON.stringify({ actor: p.actor, instance_id: p.instance_id, access_mode: p.access_mode })}\n`;
}

/** Names and instance ids in a prelude: printable, no spaces, at most 256 characters. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,255}$/;

/** Whether `s` may stand as the actor or instance_id of a prelude. */
export function isPreludeName(s: string): boolean {
  return NAME_RE.test(s);
}

/**
 * Parses one prelude line (without its newline). Returns the prelude, or the refusal code and a
 * message naming what is wrong; never throws.
 */
export function parsePrelude(line: string): SshPrelude | { code: SshConnectorErrorCode; message: string } {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { code: 'ssh.prelude_invalid', message: 'the prelude is not JSON' };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { code: 'ssh.prelude_invalid', message: 'the prelude is not a JSON object' };
  const o = v as Record<string, unknown>;
  for (const k of ['actor', 'instance_id'] as const) {
    const s = o[k];
    if (typeof s !== 'string' || !NAME_RE.test(s))
      return { code: 'ssh.prelude_invalid', message: `${k} must be a name of 1-256 characters [A-Za-z0-9_.@:+-]` };
  }
  if (o['access_mode'] !== 'ssh') return { code: 'ssh.access_mode_unsupported', message: 'access_mode must be "ssh"' };
  return { actor: o['actor'] as string, instance_id: o['instance_id'] as string, access_mode: 'ssh' };
}
