/**
 * The conformance scenarios of pty-extensions/v1 (§9) about the session stream (6-10): replay
 * within and out of the window, keyframe cadence, resize broadcast, the close lifecycle; against
 * a real sandboxd with a real agent, on tmux and native/direct sessions like
 * pty-conformance.test.ts (which has scenarios 1-5 and says what is checked on every frame).
 */
import assert from 'node:assert/strict';
import { DEADLINE_MS } from '../support/wait.js';
import { forEachVariant, useConformanceBed } from './pty-conformance-bed.js';
import { BINARY_TOO, assertConformant, kindsOf } from './pty-conformance-kit.js';
import { describeFrame, payloadOf, type SeenFrame } from './pty-conformance-rules.js';
import { drawScreen, snapshotScreen } from './pty-conformance-screen.js';
import { clientIdOf, errorOf, expectMembership, marker, membersOf } from './pty-conformance-steps.js';

const bedOf = useConformanceBed('pty-conf-2');

forEachVariant('pty-extensions §9 conformance (replay, keyframes, resize, close)', bedOf, (scenario) => {
  scenario(
    '6 replay within the window: a rejoin with replay_from gets exactly the missed frames, then its Keyframe, then live frames',
    async (s) => {
      const ctl = await s.firstController();
      const first = await s.member('first-visit', 'observer');
      await expectMembership([ctl.client], [clientIdOf(ctl)], [clientIdOf(first)]);
      const m1 = marker('seen');
      ctl.client.type(m1.input);
      await first.client.waitText(m1.re);
      const lastSeen = first.client.lastSequence;
      first.client.terminate();
      await expectMembership([ctl.client], [clientIdOf(ctl)], []);
      const missed = marker('gap');
      ctl.client.type(missed.input);
      await ctl.client.waitText(missed.re);

      // The rejoin speaks pty-ws.v1.binary: replayed Output comes as PW1O, the same bytes.
      const again = await s.open('second-visit', BINARY_TOO);
      const { assigned } = await again.join('observer', { label: 'second-visit', replayFrom: lastSeen });
      assert.equal(assigned.sequence, lastSeen, 'RoleAssigned repeats the position replay_from sets');
      const mc = await again.nextKind('MembershipChanged', (f) =>
        membersOf(f).observers.includes(payloadOf(assigned, 'RoleAssigned').client_id),
      );
      const keyframe = await again.nextKeyframe();
      assert.equal(keyframe.kind, 'Keyframe', `a Keyframe follows the replay, not ${describeFrame(keyframe)}`);
      assert.equal(keyframe.index, mc.index + 1, 'the Keyframe follows the join MembershipChanged at once');
      const replayed = again.seen.slice(assigned.index + 1, mc.index);
      const seqs = replayed.map((f) => f.sequence);
      assert.ok(replayed.length > 0, 'frames were missed');
      assert.deepEqual(
        seqs,
        replayed.map((_, i) => lastSeen + 1 + i),
        'the replay is (replay_from, newest] without gaps',
      );
      const lastReplayed = lastSeen + replayed.length;
      const controllerSaw = ctl.client.seen.filter(
        (f) => !f.local && f.sequence !== undefined && f.sequence > lastSeen && f.sequence <= lastReplayed,
      );
      assert.deepEqual(kindsOf(replayed), kindsOf(controllerSaw), 'the replay is what the controller saw in that range');
      assert.ok(
        replayed.some((f) => f.kind === 'MembershipChanged'),
        "the replay holds the MembershipChanged of the first visit's end",
      );
      const replayedText = Buffer.concat(replayed.filter((f) => f.kind === 'Output').map((f) => f.bytes!)).toString('utf8');
      assert.match(replayedText, missed.re, 'the replay holds the output produced meanwhile');
      assert.ok(
        replayed.every((f) => f.kind !== 'Output' || f.op === 'PW1O'),
        'replayed Output is PW1O on the binary subprotocol',
      );

      const live = marker('back');
      ctl.client.type(live.input);
      await again.waitText(live.re);
      assertConformant(ctl.client, first.client, again);
    },
  );

  scenario(
    '7 replay out of range: REPLAY_OUT_OF_RANGE then a Keyframe, for a cursor beyond the newest frame and one the window has left',
    async (s, note) => {
      const ctl = await s.firstController();
      const early = await s.member('early', 'observer');
      const stale = early.client.lastSequence;
      early.client.terminate();

      const future = await s.open('future');
      const { id, assigned } = await future.join('observer', { replayFrom: ctl.client.lastSequence + 1_000_000 });
      const err = await future.nextError('REPLAY_OUT_OF_RANGE');
      assert.equal(err.json?.id, id, 'the Error echoes the join id');
      assert.deepEqual([errorOf(err).a2a_error, errorOf(err).retryable], [null, false]);
      const keyframe = await future.nextKeyframe();
      assert.deepEqual(kindsOf(future.seen.slice(assigned.index, keyframe.index + 1)), [
        'RoleAssigned',
        'Error:REPLAY_OUT_OF_RANGE',
        'MembershipChanged',
        'Keyframe',
      ]);
      const live = marker('future-live');
      ctl.client.type(live.input);
      await future.waitText(live.re);

      // Output until the window no longer holds the stale cursor. A round prints 600 lines of
      // 1500 characters, paced so that tmux forwards every line (it redraws instead when its
      // client falls behind): ~900 KB in ~600 frames. A rejoin from the cursor after rounds 1, 2,
      // 4, 8 and 16 replays (in range, checked like scenario 6) until it is refused; the window
      // must move after 16 rounds (~14 MB, the rounds' frames 10 times the 1000 retained).
      for (let round = 1; ; round++) {
        const done = marker(`round${round}`);
        ctl.client.type(`for i in $(seq 1 600); do printf '%01500d\\n' $i; sleep 0.003; done; ${done.input}`);
        await ctl.client.waitText(done.re, DEADLINE_MS.endToEnd);
        if ((round & (round - 1)) !== 0) continue;
        const rejoin = await s.open(`rejoin-${round}`);
        const r = await rejoin.join('observer', { replayFrom: stale });
        const k = await rejoin.nextKeyframe(DEADLINE_MS.endToEnd);
        const answer = rejoin.seen.slice(r.assigned.index + 1, k.index + 1);
        if (answer[0]?.op === 'Error') await rejoin.nextKind('MembershipChanged').catch(() => undefined);
        rejoin.terminate();
        assertConformant(rejoin);
        if (answer[0]?.op === 'Error') {
          assert.deepEqual(
            kindsOf(answer),
            ['Error:REPLAY_OUT_OF_RANGE', 'MembershipChanged', 'Keyframe'],
            `nothing is replayed, the join's MembershipChanged comes before its Keyframe; ${rejoin.describe()}`,
          );
          assert.equal(answer[0].json?.id, r.id);
          note(`the window moved past sequence ${stale} within ${round} rounds (${ctl.client.lastSequence} frames)`);
          break;
        }
        assert.ok(round < 16, `the replay window still holds sequence ${stale} after ${round} rounds (${ctl.client.lastSequence} frames)`);
      }
      assertConformant(ctl.client, early.client, future);
    },
  );

  scenario(
    '8 keyframe cadence: at least every keyframe_interval_frames Output frames and every keyframe_interval_seconds',
    async (s, note) => {
      const ctl = await s.firstController();
      const watcher = await s.member('watcher', 'observer');
      const { keyframe_interval_frames: everyFrames, keyframe_interval_seconds: everySeconds } = watcher.client.params;
      const isSlot = (f: SeenFrame): boolean =>
        !f.local && (f.kind === 'Keyframe' || (f.kind === 'Error' && payloadOf(f, 'Error').code === 'KEYFRAME_UNAVAILABLE'));

      // Sustained output: count the Output frames between cadence slots.
      const from = watcher.client.seen.length;
      for (let blast = 1; watcher.client.seen.slice(from).filter((f) => f.kind === 'Output').length < 3 * everyFrames; blast++) {
        assert.ok(blast <= 10, `fewer than ${3 * everyFrames} Output frames after ${blast - 1} blasts`);
        const done = marker(`blast${blast}`);
        ctl.client.type(`seq 1 200000; ${done.input}`);
        await watcher.client.waitText(done.re, DEADLINE_MS.endToEnd);
      }
      const stream = watcher.client.seen.slice(from).filter((f) => !f.local);
      const slots = stream.filter(isSlot);
      assert.ok(slots.length >= 2, `cadence slots under sustained output: ${slots.length}`);
      let outputsSince: number | undefined;
      let lastOutputOrResize: number | undefined;
      for (const f of stream) {
        if (isSlot(f)) {
          if (outputsSince !== undefined)
            assert.ok(outputsSince <= everyFrames, `${outputsSince} Output frames before the slot at ${f.sequence} (every ${everyFrames})`);
          outputsSince = 0;
          if (f.kind === 'Keyframe' && lastOutputOrResize !== undefined)
            assert.equal(
              payloadOf(f, 'Keyframe').anchor_sequence,
              lastOutputOrResize,
              `cadence Keyframe #${f.sequence} describes the stream at its slot`,
            );
        } else if (f.kind === 'Output' && outputsSince !== undefined) outputsSince++;
        if (f.kind === 'Output' || f.kind === 'Resize') lastOutputOrResize = f.sequence;
      }
      assert.ok(outputsSince! <= everyFrames, `${outputsSince} Output frames after the last slot`);
      const keyframes = slots.filter((f) => f.kind === 'Keyframe');
      assert.ok(keyframes.length > 0, 'at least one cadence slot holds a Keyframe');
      note(
        `sustained output: ${stream.filter((f) => f.kind === 'Output').length} Output frames, ${keyframes.length} Keyframes, ${slots.length - keyframes.length} KEYFRAME_UNAVAILABLE`,
      );
      // The last cadence Keyframe draws what an earlier one plus the Output between draws.
      const lastKeyframe = keyframes[keyframes.length - 1]!;
      const base = [watcher.keyframe, ...keyframes].find((f) => f.kind === 'Keyframe' && f !== lastKeyframe);
      const anchor = payloadOf(lastKeyframe, 'Keyframe').anchor_sequence;
      if (base !== undefined)
        assert.deepEqual(
          await snapshotScreen(lastKeyframe),
          await drawScreen(watcher.client.seen, base, anchor),
          `the cadence Keyframe's screen is the stream's at its anchor ${anchor}`,
        );
      else note('cadence snapshot not compared: no earlier Keyframe to draw from');

      // Paced output (one line every 0.5 s for 3 intervals): slots come by time.
      const paced = watcher.client.seen.length;
      const ticks = Math.ceil((3 * everySeconds) / 0.5);
      const done = marker('ticks');
      ctl.client.type(`for i in $(seq 1 ${ticks}); do echo "tick-$i"; sleep 0.5; done; ${done.input}`);
      await watcher.client.waitText(done.re, DEADLINE_MS.endToEnd + 3 * everySeconds * 1000);
      const timed = watcher.client.seen.slice(paced).filter((f) => !f.local && f.json !== undefined);
      const outputs = timed.filter((f) => f.kind === 'Output');
      const times = [
        Date.parse(outputs[0]!.json!.ts),
        ...timed.filter(isSlot).map((f) => Date.parse(f.json!.ts)),
        Date.parse(outputs[outputs.length - 1]!.json!.ts),
      ].sort((x, y) => x - y);
      // Slack for the snapshot (up to 1 s before KEYFRAME_UNAVAILABLE) and a loaded event loop.
      const slackMs = 2500;
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      assert.ok(
        gaps.every((g) => g <= everySeconds * 1000 + slackMs),
        `gaps between cadence slots during paced output (ms): ${JSON.stringify(gaps)}, interval ${everySeconds} s`,
      );
      note(`paced output: ${outputs.length} Output frames, slot gaps ${JSON.stringify(gaps)} ms`);
      assertConformant(ctl.client, watcher.client);
    },
  );

  scenario('9 resize broadcast: a controller resize reaches every attached client as Resize', async (s) => {
    const ctl = await s.firstController();
    const o1 = await s.member('o1', 'observer');
    const o2 = await s.member('o2', 'observer', BINARY_TOO);
    ctl.client.send('pty.session_resize', { cols: 97, rows: 29 });
    const seqs = new Set<number | undefined>();
    for (const c of [ctl.client, o1.client, o2.client]) {
      const r = await c.nextKind('Resize', (f) => payloadOf(f, 'Resize').cols === 97);
      assert.equal(payloadOf(r, 'Resize').rows, 29);
      seqs.add(r.sequence);
    }
    assert.equal(seqs.size, 1, 'one Resize, one sequence');
    await ctl.client.askUntil('stty size\r', /29 97/, 'stty size to show 29 97');
    const kid = o1.client.send('pty.request_keyframe', {});
    const k = await o1.client.nextKeyframe();
    assert.equal(k.kind, 'Keyframe', `pty.request_keyframe is answered by a Keyframe, not ${describeFrame(k)}`);
    assert.equal(k.json?.id, kid, 'the Keyframe answers the request id');
    assert.deepEqual([payloadOf(k, 'Keyframe').snapshot_cols, payloadOf(k, 'Keyframe').snapshot_rows], [97, 29]);
    const late = await s.open('late');
    const size = late.hello.session.terminal_size;
    if (size !== undefined) assert.deepEqual(size, { cols: 97, rows: 29 }, "binding_hello reports the session's size");
    assertConformant(ctl.client, o1.client, o2.client, late);
  });

  scenario(
    '10 close lifecycle: the process exits 7 → Closed with the exit code, binding_goodbye, close 1000 on every connection',
    async (s, note) => {
      const ctl = await s.firstController();
      const obs = await s.member('obs', 'observer');
      ctl.client.type('exit 7\r');
      for (const c of [ctl.client, obs.client]) {
        const closed = await c.nextKind('Closed');
        const p = payloadOf(closed, 'Closed');
        note(`${c.name}: Closed ${JSON.stringify(p)}`);
        if (s.variant === 'native') assert.equal(p.exit_code, 7);
        else assert.ok(p.exit_code === 7 || p.exit_code === null, `exit_code ${p.exit_code}: 7, or null when unknown`);
        assert.ok(p.reason === 'normal' || p.reason === 'error', `reason ${p.reason}`);
        const bye = await c.next('binding_goodbye', (f) => f.op === 'binding_goodbye');
        assert.ok(bye.index > closed.index);
        assert.equal(bye.json?.op === 'binding_goodbye' && bye.json.payload.reason, 'session_closed');
        assert.equal((await c.waitClosed()).code, 1000);
        assert.equal(c.seen[c.seen.length - 1], bye, `${c.name}: binding_goodbye is the last frame`);
      }
      assertConformant(ctl.client, obs.client);
    },
  );
});
