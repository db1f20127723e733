/**
 * The conformance scenarios of pty-extensions/v1 (§9) about joining, roles and membership (1-5,
 * with 5.1's first-joiner rule), plus the binding's subprotocol negotiation, 404 at the upgrade,
 * unsupported A2A op, malformed frame and ping checks, against a real sandboxd with a real agent.
 * pty-conformance-stream.test.ts has scenarios 6-10 (replay, keyframes, resize, close). Each
 * scenario runs on a tmux session created through REST and on a native/direct session started by
 * its first join (skipped, with the reason, while the server does not offer it).
 *
 * sandboxd's specifics (src/sessions/binding/README.md, "How the session hub speaks it"):
 * max_controllers is 1, the first joiner of a fresh session controls, the replay buffer keeps at
 * least 1000 frames, the keyframe cadence is in binding_hello's extension_params. Every frame is
 * checked against the project's schema and the sequence rules (pty-conformance-rules.ts) as it
 * arrives; each scenario ends with assertConformant over its clients.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BINDING_URI, BINDING_VERSION, PTY_CLIENT_OPS } from '../../src/sessions/binding/codes.js';
import { newFrameId, nowTs } from '../../src/sessions/binding/values.js';
import { forEachVariant, useConformanceBed, joinFully } from './pty-conformance-bed.js';
import { BINARY_TOO, JSON_ONLY, assertConformant, kindsOf, upgradeStatus } from './pty-conformance-kit.js';
import { describeFrame, payloadOf } from './pty-conformance-rules.js';
import { drawScreen, snapshotScreen } from './pty-conformance-screen.js';
import { clientIdOf, errorOf, expectMembership, leave, marker, membersOf, roleOf } from './pty-conformance-steps.js';

const bedOf = useConformanceBed('pty-conf-1');

forEachVariant('pty-extensions §9 conformance (joins, roles, membership)', bedOf, (scenario) => {
  scenario(
    '1 single controller: join, input, output, resize, leave; RoleAssigned, MembershipChanged, Keyframe in order',
    async (s, note) => {
      const ctl = await s.open('controller');
      const hello = ctl.hello;
      assert.equal(hello.binding_uri, BINDING_URI);
      assert.equal(hello.binding_version, BINDING_VERSION);
      assert.equal(hello.session.session_id, s.id);
      for (const op of PTY_CLIENT_OPS) assert.ok(hello.supported_operations.includes(op), `supported_operations lists ${op}`);
      assert.ok(!hello.supported_operations.includes('SendMessage'), 'A2A core ops are not advertised');
      assert.deepEqual([hello.payload_modes.subprotocol, hello.payload_modes.binary], ['pty-ws.v1', false]);
      assert.equal(ctl.params.max_controllers, 1);
      assert.ok(ctl.params.replay_buffer_frames >= 1000, `replay_buffer_frames ${ctl.params.replay_buffer_frames}`);

      const joined = await joinFully(
        ctl,
        'controller',
        s.start === undefined ? { label: 'controller' } : { label: 'controller', start: s.start },
      );
      assert.deepEqual(kindsOf(ctl.seen.slice(0, 4)), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe']);
      assert.equal(roleOf(joined), 'controller');
      assert.deepEqual(membersOf(joined.membership), { controllers: [clientIdOf(joined)], observers: [] });
      assert.equal(payloadOf(joined.membership, 'MembershipChanged').controllers[0]?.label, 'controller');
      assert.ok(payloadOf(joined.keyframe, 'Keyframe').anchor_sequence >= 0);

      await ctl.waitForShell();
      const m = marker('conf');
      ctl.type(m.input);
      await ctl.waitText(m.re);
      ctl.send('pty.session_resize', { cols: 101, rows: 31 });
      const r = payloadOf(await ctl.nextKind('Resize'), 'Resize');
      assert.deepEqual([r.cols, r.rows], [101, 31]);
      await ctl.askUntil('stty size\r', /31 101/, 'stty size to show the new size 31 101');
      note(`leave: binding_goodbye ${(await leave(ctl)).goodbye ? 'sent' : 'not sent'} before close 1000`);
      assertConformant(ctl);
    },
  );

  scenario('1 single controller over pty-ws.v1.binary: PW1I input, PW1O output, resize, leave', async (s) => {
    const { client: ctl } = await s.firstController('binary-controller', BINARY_TOO);
    assert.equal(ctl.protocol, 'pty-ws.v1.binary');
    assert.deepEqual([ctl.hello.payload_modes.subprotocol, ctl.hello.payload_modes.binary], ['pty-ws.v1.binary', true]);
    assert.deepEqual(kindsOf(ctl.seen.slice(0, 4)), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe']);
    const viaJson = marker('json-in');
    ctl.type(viaJson.input);
    await ctl.waitText(viaJson.re);
    const viaBinary = marker('pw1i-in');
    ctl.typeBinary(viaBinary.input);
    await ctl.waitText(viaBinary.re);
    const outputs = ctl.seen.filter((f) => f.kind === 'Output');
    assert.ok(outputs.length > 0);
    assert.deepEqual(
      outputs.filter((f) => f.op !== 'PW1O').map((f) => f.sequence),
      [],
      'every Output travels as PW1O on pty-ws.v1.binary',
    );
    ctl.send('pty.session_resize', { cols: 90, rows: 25 });
    const r = payloadOf(await ctl.nextKind('Resize'), 'Resize');
    assert.deepEqual([r.cols, r.rows], [90, 25]);
    await leave(ctl);
    assertConformant(ctl);
  });

  scenario('2 observer cannot write: input and resize get PERMISSION_DENIED with the request id; the connection stays open', async (s) => {
    const { client: ctl } = await s.firstController();
    const obs = await s.member('observer', 'observer');
    assert.equal(roleOf(obs), 'observer');
    const inputId = obs.client.type('echo "observer-$((5*5))"\r');
    const e1 = await obs.client.nextError('PERMISSION_DENIED');
    assert.equal(e1.json?.id, inputId, 'the Error echoes the input frame id');
    assert.deepEqual(errorOf(e1).a2a_error, { type: 'PermissionDenied' });
    assert.equal(errorOf(e1).retryable, false);
    const resizeId = obs.client.send('pty.session_resize', { cols: 77, rows: 22 });
    const e2 = await obs.client.nextError('PERMISSION_DENIED');
    assert.equal(e2.json?.id, resizeId, 'the Error echoes the resize frame id');

    const m = marker('after');
    ctl.type(m.input);
    await obs.client.waitText(m.re);
    assert.doesNotMatch(obs.client.text(), /observer-25/, "the observer's input never reached the PTY");
    const resized = [...ctl.seen, ...obs.client.seen].filter((f) => f.kind === 'Resize' && payloadOf(f, 'Resize').cols === 77);
    assert.deepEqual(resized, [], "the observer's resize was not applied");
    const pingId = obs.client.send('ping', { client_ts: nowTs() });
    await obs.client.next('pong', (f) => f.op === 'pong' && f.json?.id === pingId);
    assert.equal(obs.client.closed, undefined, 'the observer is still connected');
    assertConformant(ctl, obs.client);
  });

  scenario(
    '3 capacity downgrade: a second controller request gets RoleAssigned observer, downgraded; the lease frees when the controller leaves',
    async (s) => {
      const ctl = await s.firstController();
      const second = await s.member('second', 'controller');
      const p = payloadOf(second.assigned, 'RoleAssigned');
      assert.equal(p.role, 'observer');
      assert.equal(p.downgraded, true);
      assert.deepEqual(membersOf(second.membership), { controllers: [clientIdOf(ctl)], observers: [clientIdOf(second)] });
      second.client.type('true\r');
      await second.client.nextError('PERMISSION_DENIED');

      await leave(ctl.client);
      await expectMembership([second.client], [], [clientIdOf(second)]);
      const reqId = second.client.send('pty.request_role', { role: 'controller' });
      const promoted = await second.client.nextKind('RoleAssigned');
      assert.equal(payloadOf(promoted, 'RoleAssigned').role, 'controller', 'the free lease goes to the requester');
      assert.equal(promoted.json?.id, reqId, 'RoleAssigned answers the request_role id');
      await expectMembership([second.client], [clientIdOf(second)], []);
      await second.client.waitForShell();
      assertConformant(ctl.client, second.client);
    },
  );

  scenario('5.1 the first joiner of a fresh session controls whatever it asked for', async (s) => {
    const c = await s.open('first');
    const j = await joinFully(c, 'observer', s.start === undefined ? {} : { start: s.start });
    assert.equal(roleOf(j), 'controller');
    await c.waitForShell();
    assertConformant(c);
  });

  scenario('4 membership broadcast: every join and leave reaches every attached client', async (s) => {
    const ctl = await s.firstController('ctl');
    const a = await s.member('obs-a', 'observer');
    assert.deepEqual(membersOf(a.membership), { controllers: [clientIdOf(ctl)], observers: [clientIdOf(a)] });
    await expectMembership([ctl.client], [clientIdOf(ctl)], [clientIdOf(a)]);
    const b = await s.member('obs-b', 'observer');
    assert.deepEqual(membersOf(b.membership), { controllers: [clientIdOf(ctl)], observers: [clientIdOf(a), clientIdOf(b)].sort() });
    assert.deepEqual(
      payloadOf(b.membership, 'MembershipChanged')
        .observers.map((o) => o.label)
        .sort(),
      ['obs-a', 'obs-b'],
    );
    await expectMembership([ctl.client, a.client], [clientIdOf(ctl)], [clientIdOf(a), clientIdOf(b)]);
    await leave(a.client);
    await expectMembership([ctl.client, b.client], [clientIdOf(ctl)], [clientIdOf(b)]);
    b.client.terminate();
    await expectMembership([ctl.client], [clientIdOf(ctl)], []);
    assertConformant(ctl.client, a.client, b.client);
  });

  scenario('5 mid-session join: RoleAssigned, MembershipChanged, Keyframe (the screen so far), then live frames', async (s, note) => {
    const ctl = await s.firstController();
    const before = marker('mid');
    ctl.client.type(before.input);
    await ctl.client.waitText(before.re);
    const late = await s.member('late', 'observer');
    assert.deepEqual(kindsOf(late.client.seen.slice(0, 4)), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe']);
    assert.equal(late.keyframe.kind, 'Keyframe', `the join is answered by a Keyframe, not ${describeFrame(late.keyframe)}`);
    const k = payloadOf(late.keyframe, 'Keyframe');
    assert.ok(k.anchor_sequence >= 0);
    assert.equal(k.snapshot_format, 'vt100-screen-state-v1');
    const screen = (await snapshotScreen(late.keyframe)).join('\n');
    assert.match(screen, before.re, `the keyframe shows what the controller typed before; screen:\n${screen}`);

    const live = marker('live');
    ctl.client.type(live.input);
    await late.client.waitText(live.re);
    assert.doesNotMatch(late.client.text(), before.re, 'output from before the join comes only in the snapshot');
    // Both clients draw the same screen at a sequence both have reached.
    const upto = Math.min(ctl.client.rules.position ?? 0, late.client.rules.position ?? 0);
    if (ctl.keyframe.kind === 'Keyframe') {
      const [a, b] = await Promise.all([
        drawScreen(ctl.client.seen, ctl.keyframe, upto),
        drawScreen(late.client.seen, late.keyframe, upto),
      ]);
      assert.deepEqual(b, a, `the late observer's screen at sequence ${upto} equals the controller's`);
    } else note(`screens not compared: the controller's join got ${describeFrame(ctl.keyframe)}`);
    assertConformant(ctl.client, late.client);
  });

  scenario('binding: subprotocol negotiation (none or unknown → 400; pty-ws.v1.binary chosen when offered)', async (s) => {
    assert.equal((await upgradeStatus(s.url)).status, 400, 'no subprotocol');
    assert.equal((await upgradeStatus(s.url, ['pty-ws.v2'])).status, 400, 'an unknown subprotocol');
    assert.deepEqual(await upgradeStatus(s.url, JSON_ONLY), { status: 101, protocol: 'pty-ws.v1' });
    assert.deepEqual(await upgradeStatus(s.url, BINARY_TOO), { status: 101, protocol: 'pty-ws.v1.binary' });
    assert.deepEqual(await upgradeStatus(s.url, ['pty-ws.v1.binary']), { status: 101, protocol: 'pty-ws.v1.binary' });
    const json = await s.open('json');
    const binary = await s.open('binary', BINARY_TOO);
    assert.deepEqual([json.hello.payload_modes.subprotocol, json.hello.payload_modes.binary], ['pty-ws.v1', false]);
    assert.deepEqual([binary.hello.payload_modes.subprotocol, binary.hello.payload_modes.binary], ['pty-ws.v1.binary', true]);
    assertConformant(json, binary);
  });

  scenario(
    'binding: ping → pong with the same id; SendMessage → UNSUPPORTED_OPERATION; a malformed frame → INVALID_REQUEST and close 4400',
    async (s) => {
      const ctl = await s.firstController();
      const c = await s.open('probe');
      const clientTs = nowTs();
      const pingId = c.send('ping', { client_ts: clientTs });
      const pong = await c.next('pong', (f) => f.op === 'pong');
      assert.equal(pong.json?.id, pingId);
      assert.equal(pong.json?.op === 'pong' && pong.json.payload.client_ts, clientTs);
      const sendId = c.send('SendMessage', { message: { role: 'user', parts: [{ text: 'hi' }], message_id: newFrameId() } });
      const unsupported = await c.nextError('UNSUPPORTED_OPERATION');
      assert.equal(unsupported.json?.id, sendId);
      assert.deepEqual(errorOf(unsupported).a2a_error, { type: 'UnsupportedOperation' });
      await joinFully(c, 'observer', { label: 'probe' });
      c.sendRaw('{not json');
      const invalid = await c.nextError('INVALID_REQUEST');
      assert.equal((await c.waitClosed()).code, 4400);
      assert.equal(c.seen[c.seen.length - 1], invalid, 'the Error is the last frame before the close');

      const other = await s.member('sequence-sender', 'observer');
      const badId = newFrameId();
      other.client.sendRaw(JSON.stringify({ op: 'ping', id: badId, ts: nowTs(), sequence: 3, payload: { client_ts: nowTs() } }));
      const refused = await other.client.nextError('INVALID_REQUEST');
      assert.equal(refused.json?.id, badId, 'the Error echoes a usable id');
      assert.equal((await other.client.waitClosed()).code, 4400);

      const m = marker('still');
      ctl.client.type(m.input);
      await ctl.client.waitText(m.re);
      assertConformant(ctl.client, c, other.client);
    },
  );
});

void describe('pty-ws.v1 upgrade of unknown sessions', () => {
  test('404 at the upgrade on both URL patterns', async () => {
    assert.equal((await upgradeStatus(bedOf().ptyUrl(newFrameId()), JSON_ONLY)).status, 404, 'unknown id on /api/v1/sessions/{id}/pty');
    assert.equal((await upgradeStatus(bedOf().ptyUrl('nope'), JSON_ONLY)).status, 404, 'non-UUID id on /api/v1/sessions/{id}/pty');
    assert.equal(
      (await upgradeStatus(bedOf().attachUrl(newFrameId(), 'no-such-agent'), JSON_ONLY)).status,
      404,
      'unknown instance on the attach URL',
    );
    assert.equal((await upgradeStatus(bedOf().attachUrl('nope'), JSON_ONLY)).status, 404, 'non-UUID session on the attach URL');
    const s = await bedOf().session('tmux');
    assert.equal(
      (await upgradeStatus(bedOf().attachUrl(s.id, 'no-such-agent'), JSON_ONLY)).status,
      404,
      "a session under another instance's URL",
    );
    const viaAttach = await s.open('via-attach', JSON_ONLY, bedOf().attachUrl(s.id));
    assert.equal(viaAttach.hello.session.session_id, s.id, 'a tmux session is reachable on its agent-scoped URL too');
    assertConformant(viaAttach);
  });
});
