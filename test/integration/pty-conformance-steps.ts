/**
 * Steps the conformance scenarios share (pty-conformance*.test.ts): markers the shell computes,
 * membership and role accessors, the membership broadcast check, the leave and its close.
 */
import assert from 'node:assert/strict';
import type { Role } from '../../src/sessions/binding/codes.js';
import type { ConformanceClient } from './pty-conformance-kit.js';
import { payloadOf, type SeenFrame } from './pty-conformance-rules.js';

/** A command whose output (computed by the shell) the typed line does not contain. */
export function marker(prefix: string): { input: string; re: RegExp } {
  const a = 1000 + Math.floor(Math.random() * 9000);
  const b = 1 + Math.floor(Math.random() * 99);
  return { input: `echo "${prefix}-$((${a}+${b}))"\r`, re: new RegExp(`${prefix}-${a + b}`) };
}

/** client_ids of a MembershipChanged, sorted per role. */
export function membersOf(f: SeenFrame): { controllers: string[]; observers: string[] } {
  const p = payloadOf(f, 'MembershipChanged');
  return { controllers: p.controllers.map((c) => c.client_id).sort(), observers: p.observers.map((c) => c.client_id).sort() };
}

export const clientIdOf = (j: { assigned: SeenFrame }): string => payloadOf(j.assigned, 'RoleAssigned').client_id;
export const roleOf = (j: { assigned: SeenFrame }): Role => payloadOf(j.assigned, 'RoleAssigned').role;

/** Each client's next MembershipChanged states these members; all at one sequence. */
export async function expectMembership(clients: ConformanceClient[], controllers: string[], observers: string[]): Promise<void> {
  const want = { controllers: [...controllers].sort(), observers: [...observers].sort() };
  const seqs = new Set<number | undefined>();
  for (const c of clients) {
    const f = await c.nextKind('MembershipChanged');
    assert.deepEqual(membersOf(f), want, `${c.name}: MembershipChanged #${f.sequence}`);
    seqs.add(f.sequence);
  }
  assert.equal(seqs.size, 1, `one MembershipChanged, one sequence: ${JSON.stringify([...seqs])}`);
}

/** The Error frame's payload (binding Error). */
export function errorOf(f: SeenFrame): { code: string; a2a_error: { type: string } | null; retryable: boolean } {
  assert.equal(f.json?.op, 'Error');
  return f.json.payload;
}

/** Leaves and checks the close: 1000, a binding_goodbye only as the last frame. */
export async function leave(c: ConformanceClient): Promise<{ goodbye: boolean }> {
  const from = c.seen.length;
  c.send('pty.leave_session', {});
  const closed = await c.waitClosed();
  assert.equal(closed.code, 1000, `${c.name}: leave closes with 1000`);
  const after = c.seen.slice(from);
  const bye = after.findIndex((f) => f.op === 'binding_goodbye');
  if (bye >= 0) assert.equal(bye, after.length - 1, `${c.name}: binding_goodbye is the last frame`);
  assert.deepEqual(
    after.filter((f) => f.op === 'Error'),
    [],
    `${c.name}: no Error answers the leave`,
  );
  return { goodbye: bye >= 0 };
}
