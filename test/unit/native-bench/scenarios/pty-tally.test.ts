import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamTally, tallyDifferences } from '../../../../native-bench/scenarios/pty-tally.js';

/** The session's stream before the first flood, as the pty bench's clients see it. */
const kReadyBytes = '\x1b[2J\x1b[HREADY\r\r\n'.length; // the program's READY line after the PTY's ONLCR: 15 bytes

describe('pty bench: nothing-lost counts Output above one stream position (pty-tally.ts)', () => {
  test('an observer whose join keyframe comes after the base still counts what the controller counts', () => {
    // The controller drew READY (seq 52) and MembershipChanged up to 53 when the base was taken;
    // this observer's join keyframe (anchor 51, made before READY) was still on its way, so READY
    // reaches it after the base. Counting "bytes since the base was taken" gave it 15 bytes more
    // than the controller: the failure seen on a loaded machine ("9 observers did not get the
    // controller's bytes", 15 bytes over).
    const controller = new StreamTally();
    const observer = new StreamTally();
    controller.output(50, 80 - kReadyBytes);
    controller.output(52, kReadyBytes);
    const base = 53;
    controller.rebase(base);
    observer.rebase(base);
    observer.keyframe(51);
    observer.output(52, kReadyBytes);
    for (let seq = 54; seq < 200; seq++) {
      controller.output(seq, 16_384);
      observer.output(seq, 16_384);
    }
    assert.equal(kReadyBytes, 15);
    assert.equal(observer.bytes, controller.bytes);
    assert.equal(observer.keyframes, 0, 'a keyframe anchored at or below the base covers nothing counted');
    assert.deepEqual(tallyDifferences(controller, [observer]), []);
  });

  test('a lost, a duplicated or a skipped Output above the base is still a difference', () => {
    const controller = new StreamTally();
    const lost = new StreamTally();
    const doubled = new StreamTally();
    const skipped = new StreamTally();
    for (const t of [controller, lost, doubled, skipped]) t.rebase(10);
    for (let seq = 11; seq <= 20; seq++) {
      controller.output(seq, 100);
      if (seq !== 15) lost.output(seq, 100);
      doubled.output(seq, 100);
      if (seq === 15) doubled.output(seq, 100);
    }
    // a keyframe drawn above the base stands for the Output it covers (11..17), which is not counted
    skipped.keyframe(17);
    for (let seq = 18; seq <= 20; seq++) skipped.output(seq, 100);
    assert.equal(lost.bytes, controller.bytes - 100);
    assert.equal(doubled.bytes, controller.bytes + 100);
    assert.equal(skipped.keyframes, 1);
    assert.deepEqual(tallyDifferences(controller, [lost, doubled, skipped]), [
      'observer 0 lacks 15 (100 B)',
      'observer 1 got other bytes at 15 (200 B)',
      'observer 2 lacks 11 (100 B), 12 (100 B), 13 (100 B)',
    ]);
  });
});
