/**
 * The one table of frame kinds (actors/protocol/frame-kinds.ts): every kind is a distinct byte
 * other than 0, sits in its owner's range, and the per-owner views agree with the table.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AgentFrameKind,
  FRAME_KIND_RANGES,
  FRAME_KINDS,
  FrameKind,
  PublishFrameKind,
  VmFrameKind,
  type FrameKindSpec,
} from '../../../../actors/protocol/frame-kinds.js';

const entries = Object.entries(FRAME_KINDS) as [string, FrameKindSpec][];

void describe('frame kinds', () => {
  void test('no two kinds share a number, and every number is a byte other than 0', () => {
    const byNumber = new Map<number, string>();
    for (const [name, spec] of entries) {
      assert.ok(Number.isInteger(spec.kind) && spec.kind >= 1 && spec.kind <= 255, `${name}: ${spec.kind} is not 1..255`);
      const other = byNumber.get(spec.kind);
      assert.equal(other, undefined, `${name} and ${other} are both kind ${spec.kind}`);
      byNumber.set(spec.kind, name);
    }
  });

  void test("every kind sits in its owner's range, and the owners' ranges do not overlap", () => {
    for (const [name, spec] of entries) {
      const ranges = FRAME_KIND_RANGES[spec.owner];
      assert.ok(
        ranges.some(([lo, hi]) => spec.kind >= lo && spec.kind <= hi),
        `${name} (${spec.kind}) is outside the ${spec.owner} ranges ${JSON.stringify(ranges)}`,
      );
    }
    const all = Object.entries(FRAME_KIND_RANGES).flatMap(([owner, ranges]) => ranges.map(([lo, hi]) => ({ owner, lo, hi })));
    for (const a of all) {
      assert.ok(a.lo >= 1 && a.hi <= 255 && a.lo <= a.hi, `${a.owner} range ${a.lo}-${a.hi}`);
      for (const b of all)
        if (a !== b) assert.ok(a.hi < b.lo || b.hi < a.lo, `${a.owner} ${a.lo}-${a.hi} overlaps ${b.owner} ${b.lo}-${b.hi}`);
    }
  });

  void test('every kind names its direction, key and payload', () => {
    for (const [name, spec] of entries) {
      assert.ok(spec.direction === 'to-actor' || spec.direction === 'from-actor', name);
      assert.ok(spec.key.length > 0 && spec.payload.length > 0, name);
    }
  });

  void test('FrameKind and the per-owner views are the table, nothing more and nothing less', () => {
    assert.deepEqual(FrameKind, Object.fromEntries(entries.map(([name, spec]) => [name, spec.kind])));
    const views = { agent: AgentFrameKind, output: PublishFrameKind, vm: VmFrameKind };
    for (const [owner, view] of Object.entries(views)) {
      const expected = Object.fromEntries(entries.filter(([, spec]) => spec.owner === owner).map(([name, spec]) => [name, spec.kind]));
      assert.deepEqual({ ...view }, expected, owner);
    }
  });
});
