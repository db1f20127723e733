import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { CommandOutput, FLUSH_INTERVAL_MS, MAX_CHUNK_BYTES } from '../../../src/guest-agent/command-output.js';
import type { ChunkEntry, OutputStreamName } from '../../../src/guest-agent/output-buffer.js';

function collector(max?: number): { out: CommandOutput; chunks: ChunkEntry[] } {
  const chunks: ChunkEntry[] = [];
  const out = new CommandOutput({ commandId: 'c1', emit: (c) => chunks.push(c), ...(max !== undefined ? { maxChunkBytes: max } : {}) });
  return { out, chunks };
}

describe('CommandOutput', () => {
  test('coalesces the reads of one event-loop turn into one chunk', async () => {
    const { out, chunks } = collector();
    for (let i = 0; i < 10; i++) out.write('stdout', Buffer.from(`line ${i}\n`));
    assert.equal(chunks.length, 0, 'nothing leaves before the turn ends');
    await nextTurn();
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0]?.data.toString(), Array.from({ length: 10 }, (_, i) => `line ${i}\n`).join(''));
    assert.deepEqual([chunks[0]?.seq, chunks[0]?.offset, chunks[0]?.commandId], [1, 0, 'c1']);
  });

  describe('continuing output is flushed once per interval', () => {
    // A clock that stands still unless moved: the interval's timer then waits its whole length, so
    // what joins is decided by the test, not by how fast the machine runs the turns.
    const kInterval = 300;
    function paced(): { out: CommandOutput; chunks: ChunkEntry[]; clock: { t: number } } {
      const chunks: ChunkEntry[] = [];
      const clock = { t: 1_000 };
      const out = new CommandOutput({ commandId: 'c1', emit: (c) => chunks.push(c), flushIntervalMs: kInterval, now: () => clock.t });
      return { out, chunks, clock };
    }
    async function until(what: string, cond: () => boolean): Promise<void> {
      const deadline = Date.now() + 10_000;
      while (!cond()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    }

    test('the default interval is short: a partial chunk of a flood waits at most a few ms', () => {
      assert.ok(FLUSH_INTERVAL_MS > 0 && FLUSH_INTERVAL_MS <= 5, `${FLUSH_INTERVAL_MS}`);
    });

    test('reads of later turns within the interval join one chunk, sent when the interval is up', async () => {
      const { out, chunks } = paced();
      out.write('stdout', Buffer.from('a'));
      await nextTurn();
      assert.deepEqual(
        chunks.map((c) => c.data.toString()),
        ['a'],
        'the first output after a quiet spell leaves within its turn',
      );
      const started = Date.now();
      out.write('stdout', Buffer.from('b'));
      await nextTurn();
      out.write('stdout', Buffer.from('c'));
      await nextTurn();
      assert.equal(chunks.length, 1, 'reads right after a chunk wait for the interval');
      await until('the paced chunk', () => chunks.length === 2);
      const waited = Date.now() - started;
      assert.deepEqual(
        chunks.map((c) => [c.seq, c.offset, c.data.toString()]),
        [
          [1, 0, 'a'],
          [2, 1, 'bc'],
        ],
      );
      assert.ok(waited >= kInterval - 20, `the paced chunk left after ${waited} ms, before the ${kInterval} ms interval`);
    });

    test('after a quiet spell as long as the interval, output leaves within its turn again', async () => {
      const { out, chunks, clock } = paced();
      out.write('stdout', Buffer.from('a'));
      await nextTurn();
      clock.t += kInterval;
      out.write('stdout', Buffer.from('b'));
      await nextTurn();
      assert.deepEqual(
        chunks.map((c) => c.data.toString()),
        ['a', 'b'],
      );
    });

    test('a full chunk does not wait, and end() sends what waits at once and cancels the timer', async () => {
      const { out, chunks } = paced();
      out.write('stdout', Buffer.from('a'));
      await nextTurn();
      out.write('stdout', Buffer.alloc(MAX_CHUNK_BYTES + 5, 7));
      assert.deepEqual(
        chunks.map((c) => c.data.length),
        [1, MAX_CHUNK_BYTES],
        'the full 64 KiB went at once; its 5 left-over bytes wait',
      );
      out.end('stdout');
      assert.deepEqual(
        chunks.map((c) => [c.data.length, c.eof]),
        [
          [1, false],
          [MAX_CHUNK_BYTES, false],
          [5, true],
        ],
      );
      await new Promise((r) => setTimeout(r, kInterval + 50));
      assert.equal(chunks.length, 3, 'nothing is emitted after the end');
    });
  });

  test('cuts chunks at 64 KiB', () => {
    const { out, chunks } = collector();
    out.write('stdout', Buffer.alloc(MAX_CHUNK_BYTES * 2 + 10, 1));
    out.end('stdout');
    assert.deepEqual(
      chunks.map((c) => [c.seq, c.offset, c.data.length, c.eof]),
      [
        [1, 0, MAX_CHUNK_BYTES, false],
        [2, MAX_CHUNK_BYTES, MAX_CHUNK_BYTES, false],
        [3, MAX_CHUNK_BYTES * 2, 10, true],
      ],
    );
  });

  test('keeps stdout/stderr interleaving, one seq counter, separate offsets', () => {
    const { out, chunks } = collector();
    out.write('stdout', Buffer.from('a'));
    out.write('stderr', Buffer.from('bb'));
    out.write('stdout', Buffer.from('ccc'));
    out.end('stdout');
    out.end('stderr');
    assert.deepEqual(
      chunks.map((c) => [c.stream, c.seq, c.offset, c.data.toString(), c.eof]),
      [
        ['stdout', 1, 0, 'a', false],
        ['stderr', 2, 0, 'bb', false],
        ['stdout', 3, 1, 'ccc', true],
        ['stderr', 4, 2, '', true],
      ],
    );
  });

  test('property: bytes of every stream arrive intact, seqs are 1..n, offsets contiguous, one eof last', () => {
    const streams: OutputStreamName[] = ['stdout', 'stderr', 'log'];
    fc.assert(
      fc.property(
        fc.array(fc.record({ s: fc.constantFrom(...streams), data: fc.uint8Array({ maxLength: 300 }), flush: fc.boolean() }), {
          maxLength: 60,
        }),
        fc.integer({ min: 1, max: 200 }),
        (writes, max) => {
          const { out, chunks } = collector(max);
          const want: Record<string, number[]> = { stdout: [], stderr: [], log: [] };
          for (const w of writes) {
            out.write(w.s, Buffer.from(w.data));
            want[w.s]?.push(...w.data);
            if (w.flush) out.flush();
          }
          for (const s of streams) out.end(s);
          assert.deepEqual(
            chunks.map((c) => c.seq),
            chunks.map((_, i) => i + 1),
          );
          for (const s of streams) {
            const mine = chunks.filter((c) => c.stream === s);
            let offset = 0;
            for (const c of mine) {
              assert.equal(c.offset, offset);
              assert.ok(c.data.length <= max);
              offset += c.data.length;
            }
            assert.deepEqual([...Buffer.concat(mine.map((c) => c.data))], want[s]);
            assert.deepEqual(
              mine.map((c) => c.eof),
              mine.map((_, i) => i === mine.length - 1),
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
