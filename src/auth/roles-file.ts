/**
 * The operator roles file (SVC_OPERATOR_ROLES): a JSON object of operator names to roles,
 * `{"alice":"admin","ci-bot":"operator"}`. Names not in it are `viewer` (src/auth/operator-identity.ts).
 *
 * The file is asked on every mTLS request, so an operator's role changes without a restart:
 * `table()` stats the file and re-reads it only when its identity changed (inode, size, mtime or
 * ctime, in nanoseconds), so an edit in place and an atomic rename are both seen at the next
 * request, and an unchanged file costs one stat. Only the admin listener asks (the trusted local
 * listener has a fixed role), and no hot path runs there, so the stat and the read are synchronous.
 *
 * A file that cannot be used — missing, unreadable, larger than 1 MiB, not JSON, not an object,
 * an invalid name or an unknown role — gives `{ok: false, reason}`: mTLS callers then resolve to
 * no permissions (fail closed). Nothing throws. Each change of state is logged once; the log
 * line and the reason carry the path and positions, never the file's content.
 */
import { readFileSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import { isValidName } from '../identity/spiffe.js';
import type { RolesTable } from './operator-identity.js';
import { isRole, ROLES, type Role } from './permissions.js';

/** Largest roles file read (bytes): 1 MiB. */
export const MAX_ROLES_FILE_BYTES = 1024 * 1024;

/** The table of an unset SVC_OPERATOR_ROLES: nobody listed, everybody a viewer. */
export const EMPTY_ROLES: RolesTable = Object.freeze({ ok: true, roles: new Map<string, Role>() });

/**
 * Parses the text of a roles file. Reasons name positions (entry 2), never names or values: the
 * file's content stays out of logs and responses.
 */
export function parseRolesFile(text: string): RolesTable {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text: do not pass it on.
    return { ok: false, reason: 'the roles file is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'the roles file must be a JSON object of operator names to roles' };
  }
  const roles = new Map<string, Role>();
  let position = 0;
  for (const [name, role] of Object.entries(value)) {
    position++;
    if (!isValidName(name)) {
      return { ok: false, reason: `entry ${position} of the roles file: the name is not an operator name (1-128 of [A-Za-z0-9._-])` };
    }
    if (!isRole(role)) {
      return { ok: false, reason: `entry ${position} of the roles file: the role is not one of ${ROLES.join(', ')}` };
    }
    roles.set(name, role);
  }
  return { ok: true, roles };
}

export interface RolesFileOptions {
  /** The file (SVC_OPERATOR_ROLES). */
  readonly path: string;
  /** Gets one line per change of state (loaded, or why the file cannot be used). */
  readonly logger: Logger;
}

/** The roles file as last read; see the file comment. */
export class RolesFile {
  readonly #path: string;
  readonly #log: Logger;
  /** What the file looked like when `#table` was computed ('' before the first look). */
  #seen = '';
  #table: RolesTable = EMPTY_ROLES;

  constructor(opts: RolesFileOptions) {
    this.#path = opts.path;
    this.#log = opts.logger;
  }

  get path(): string {
    return this.#path;
  }

  /** The table as the file says now (re-read when it changed). Never throws. */
  table(): RolesTable {
    let seen: string;
    let size = 0;
    try {
      const st = statSync(this.#path, { bigint: true });
      if (!st.isFile()) seen = 'not a regular file';
      else {
        size = Number(st.size);
        seen = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
      }
    } catch (err) {
      seen = `stat:${errorCode(err)}`;
    }
    if (seen === this.#seen) return this.#table;
    this.#seen = seen;
    this.#table = this.#read(seen, size);
    if (this.#table.ok) this.#log.info({ path: this.#path, operators: this.#table.roles.size }, 'operator roles loaded');
    else this.#log.warn({ path: this.#path, reason: this.#table.reason }, 'operator roles file cannot be used: mTLS callers fail closed');
    return this.#table;
  }

  #read(seen: string, size: number): RolesTable {
    if (seen === 'not a regular file') return { ok: false, reason: 'the roles file is not a regular file' };
    if (seen.startsWith('stat:')) return { ok: false, reason: `the roles file cannot be read (${seen.slice(5)})` };
    if (size > MAX_ROLES_FILE_BYTES) return { ok: false, reason: `the roles file is larger than ${MAX_ROLES_FILE_BYTES} bytes` };
    let text: string;
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch (err) {
      return { ok: false, reason: `the roles file cannot be read (${errorCode(err)})` };
    }
    if (Buffer.byteLength(text) > MAX_ROLES_FILE_BYTES)
      return { ok: false, reason: `the roles file is larger than ${MAX_ROLES_FILE_BYTES} bytes` };
    return parseRolesFile(text);
  }
}

/** `ENOENT`, `EACCES`, … (the code only: messages may quote paths, which is fine, but codes are enough). */
function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
}
