/**
 * The chat projection against recorded-style Claude Code stream-json sessions
 * (test/fixtures/stream-json): the expected events, whatever way the bytes are chunked.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ChatProjector } from '../../../../actors/chat/projector.js';
import { repoRoot } from '../../../support/paths.js';

const dir = join(repoRoot, 'test', 'fixtures', 'stream-json');

interface Expected {
  session_id: string;
  command_id: string;
  events: Array<{ id: string; event: string; data: unknown }>;
}

function load(name: string): { bytes: Uint8Array; expected: Expected } {
  return {
    bytes: new Uint8Array(readFileSync(join(dir, `${name}.ndjson`))),
    expected: JSON.parse(readFileSync(join(dir, `${name}.expected.json`), 'utf8')) as Expected,
  };
}

/** Projects `bytes` delivered in pieces cut at `cuts` (byte positions, any order). */
function project(bytes: Uint8Array, expected: Expected, cuts: number[]) {
  const p = new ChatProjector({ sessionId: expected.session_id, commandId: expected.command_id });
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const events = [];
  let at = 0;
  for (const point of [...points, bytes.byteLength]) {
    // a fresh copy per piece, reused afterwards, as a ring view would be
    const piece = bytes.slice(at, point);
    events.push(...p.push(piece));
    piece.fill(0);
    at = point;
  }
  events.push(...p.end());
  return events.map((e) => ({ id: e.id, event: e.event, data: e.data }));
}

for (const name of ['fix-failing-test', 'api-error', 'noisy-no-result']) {
  void describe(`stream-json fixture ${name}`, () => {
    const { bytes, expected } = load(name);

    void test('whole: the expected events', () => {
      assert.deepEqual(project(bytes, expected, []), expected.events);
    });

    void test('byte by byte: the same events', () => {
      assert.deepEqual(
        project(
          bytes,
          expected,
          Array.from({ length: bytes.byteLength }, (_, i) => i),
        ),
        expected.events,
      );
    });

    void test('fast-check: any chunking gives the same events and ids', () => {
      fc.assert(
        fc.property(fc.array(fc.nat(bytes.byteLength), { maxLength: 60 }), (cuts) => {
          assert.deepEqual(project(bytes, expected, cuts), expected.events);
        }),
        { numRuns: 200 },
      );
    });
  });
}

void describe('fixture content', () => {
  void test('the sessions cover what the projection must handle', () => {
    const all = ['fix-failing-test', 'api-error', 'noisy-no-result'].flatMap((n) => load(n).expected.events);
    const names = new Set(all.filter((e) => e.event === 'tool_call').map((e) => (e.data as { name: string }).name));
    for (const tool of ['Bash', 'Edit', 'Read']) assert.ok(names.has(tool), tool);
    assert.ok(all.some((e) => e.event === 'tool_result' && (e.data as { status: string }).status === 'error'));
    assert.ok(all.some((e) => e.event === 'done' && (e.data as { finish_reason: string }).finish_reason === 'stop'));
    assert.ok(all.some((e) => e.event === 'done' && (e.data as { finish_reason: string }).finish_reason === 'error'));
    assert.ok(all.some((e) => e.event === 'raw'));
    // a multi-byte character split by chunking: cut inside the emoji of the noisy fixture
    const { bytes, expected } = load('noisy-no-result');
    const emoji = Buffer.from(bytes).indexOf(Buffer.from('🎉'));
    assert.ok(emoji > 0);
    assert.deepEqual(project(bytes, expected, [emoji + 1, emoji + 2, emoji + 3]), expected.events);
  });
});
