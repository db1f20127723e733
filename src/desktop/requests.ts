/**
 * The request bodies of the desktop routes (spec 4.15), checked strictly: a JSON object with only
 * the named fields (unknown fields rejected), each of its type. Enrollment errors are
 * invalid_enrollment, the others invalid_resource_request (spec part 7).
 */
import sshpk from 'sshpk';
import { SvcError, type ErrorCode } from '../core/errors.js';

export interface EnrollmentRequest {
  readonly incarnation: string;
  readonly sshAddress: string;
  readonly sshHostKey: string;
  readonly expectedRevision: number | undefined;
}

/** An incarnation: the guest's boot or image incarnation id, opaque to us. */
const INCARNATION = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** host:port, the host a DNS name, IPv4 or bracketed IPv6. */
const SSH_ADDRESS = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\]):(\d{1,5})$/;
/** An OpenSSH public host key line: type and base64 blob, no comment (sshpk parses it too). */
const SSH_HOST_KEY = /^(ssh-ed25519|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521|ssh-rsa) [A-Za-z0-9+/]{16,4096}={0,3}$/;
const IDEMPOTENCY_KEY = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function object(body: unknown, allowed: readonly string[], code: ErrorCode): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new SvcError(code, 'the body must be a JSON object');
  const o = body as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) throw new SvcError(code, `unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.slice(0, 5).join(', ')}`);
  return o;
}

export function parseEnrollment(body: unknown): EnrollmentRequest {
  const code = 'invalid_enrollment';
  const o = object(body, ['incarnation', 'ssh_address', 'ssh_host_key', 'expected_revision'], code);
  const { incarnation, ssh_address: sshAddress, ssh_host_key: sshHostKey, expected_revision: expected } = o;
  if (typeof incarnation !== 'string' || !INCARNATION.test(incarnation)) {
    throw new SvcError(code, 'incarnation must be 1 to 128 of letters, digits and . _ : -');
  }
  const port = typeof sshAddress === 'string' ? SSH_ADDRESS.exec(sshAddress)?.[1] : undefined;
  if (port === undefined || Number(port) < 1 || Number(port) > 65_535) throw new SvcError(code, 'ssh_address must be host:port');
  if (typeof sshHostKey !== 'string' || !SSH_HOST_KEY.test(sshHostKey) || !isSshKey(sshHostKey)) {
    throw new SvcError(code, 'ssh_host_key must be an OpenSSH public key: "<type> <base64>"');
  }
  if (expected !== undefined && (typeof expected !== 'number' || !Number.isSafeInteger(expected) || expected < 0)) {
    throw new SvcError(code, 'expected_revision must be a non-negative integer');
  }
  return { incarnation, sshAddress: sshAddress as string, sshHostKey, expectedRevision: expected };
}

function isSshKey(line: string): boolean {
  try {
    sshpk.parseKey(line, 'ssh');
    return true;
  } catch {
    return false;
  }
}

export function parseCreate(body: unknown): { readonly idempotencyKey: string } {
  const o = object(body, ['idempotency_key'], 'invalid_resource_request');
  const key = o['idempotency_key'];
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key)) {
    throw new SvcError('invalid_resource_request', 'idempotency_key must be 1 to 128 of letters, digits and . _ : -');
  }
  return { idempotencyKey: key };
}

export function parseClose(body: unknown): { readonly expectedGeneration: number; readonly signOut: boolean } {
  const o = object(body, ['expected_generation', 'sign_out'], 'invalid_resource_request');
  const { expected_generation: g, sign_out: s } = o;
  if (typeof g !== 'number' || !Number.isSafeInteger(g) || g < 1) {
    throw new SvcError('invalid_resource_request', 'expected_generation must be a positive integer');
  }
  if (typeof s !== 'boolean') throw new SvcError('invalid_resource_request', 'sign_out must be a boolean');
  return { expectedGeneration: g, signOut: s };
}
