import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import xtermHeadless from '@xterm/headless';
import { startScreenStates } from '../../../actors/terminal/screen-states.js';
import { bindingDialect } from '../../../src/sessions/binding-dialect.js';
import { SessionHub, StartError, type JoinRequest, type JoinSelection, type SessionHubOptions } from '../../../src/sessions/session-hub.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';
import { FakeSink, TEST_BINDING_PARAMS, TEST_HOST, type Frame } from './fake-sink.js';

const screens = startScreenStates();
after(() => screens.stop());

let nextSession = 1;

interface Rig {
  hub: SessionHub;
  inputs: string[];
  resizes: string[];
  clock: { now: number };
  open: (binary?: boolean) => FakeSink;
  /** Opens a connection and joins; resolves once its join keyframe (or keyframe error) arrived. */
  joined: (req: Partial<JoinRequest>, binary?: boolean) => Promise<FakeSink>;
}

function rig(over: Partial<SessionHubOptions> = {}): Rig {
  const inputs: string[] = [];
  const resizes: string[] = [];
  const clock = { now: 1_000_000 };
  const hub = new SessionHub({
    sessionId: `s${nextSession++}`,
    agentId: 'a1',
    state: 'running',
    agentConnected: true,
    terminalSize: { cols: 80, rows: 24 },
    sessionBackend: 'tmux',
    sessionClass: 'managed',
    host: () => TEST_HOST,
    screen: screens,
    pingIntervalMs: 0,
    now: () => clock.now,
    pty: { input: (d) => inputs.push(Buffer.from(d).toString()), resize: (c, r) => resizes.push(`${c}x${r}`) },
    ...over,
  });
  const open = (binary = false): FakeSink => {
    const sink = new FakeSink();
    hub.open(sink, bindingDialect(binary, TEST_BINDING_PARAMS));
    return sink;
  };
  return {
    hub,
    inputs,
    resizes,
    clock,
    open,
    joined: async (req, binary) => {
      const sink = open(binary);
      const before = sink.all('Keyframe').length;
      hub.join(sink, { role: 'observer', ...req }, `join-${sink.id}`);
      await keyframeAfter(sink, before);
      return sink;
    },
  };
}

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

async function keyframeAfter(sink: FakeSink, before: number): Promise<Frame> {
  return waitFor(
    'a keyframe',
    () => (sink.all('Keyframe').length > before ? sink.last('Keyframe') : sink.closed ? new Error(`closed ${sink.closeCode}`) : undefined),
    { deadlineMs: DEADLINE_MS.local, intervalMs: 5, lastState: () => sink.describe() },
  ).then((f) => {
    if (f instanceof Error) throw f;
    return f;
  });
}

/** The screen a keyframe describes, as text lines (trailing blanks trimmed). */
async function screenOf(keyframe: Frame): Promise<string[]> {
  const p = keyframe.payload;
  const term = new xtermHeadless.Terminal({
    cols: p['snapshot_cols'] as number,
    rows: p['snapshot_rows'] as number,
    allowProposedApi: true,
  });
  await new Promise<void>((resolve) => term.write(Buffer.from(p['snapshot'] as string, 'base64'), resolve));
  const lines: string[] = [];
  for (let i = 0; i < term.rows; i++) lines.push(term.buffer.active.getLine(i)?.translateToString(true) ?? '');
  term.dispose();
  return lines;
}

/** The session frames a connection saw never go back, and the broadcast ones advance by one. */
function assertSequenceRules(sink: FakeSink): void {
  const seqs = sink.sequences();
  for (let i = 1; i < seqs.length; i++)
    assert.ok((seqs[i] as number) >= (seqs[i - 1] as number), `sequences went back: ${JSON.stringify(seqs)}`);
}

describe('SessionHub on pty-ws.v1', () => {
  test('binding_hello first: binding URI, the PTY verbs without A2A core ops, session_host, extension params', () => {
    const { open } = rig();
    const c = open();
    const hello = c.frames[0];
    assert.equal(hello?.op, 'binding_hello');
    assert.equal(hello?.sequence, 0);
    assert.equal(hello?.payload['binding_uri'], 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1');
    const ops = hello?.payload['supported_operations'] as string[];
    assert.ok(ops.includes('pty.join_session') && ops.includes('pty.request_keyframe'));
    assert.ok(!ops.includes('SendMessage'));
    assert.deepEqual(hello?.payload['session_host'], TEST_HOST);
    assert.deepEqual((hello?.payload['session'] as Record<string, unknown>)['current_sequence'], 0);
    const ext = Object.values(hello?.payload['extension_params'] as Record<string, Record<string, number>>)[0];
    assert.equal(ext?.['max_controllers'], 1);
  });

  test('join order: RoleAssigned, MembershipChanged, Keyframe; the first joiner controls, a second controller is downgraded', async () => {
    const { hub, inputs, joined } = rig();
    hub.output(1, text('before anyone joined\r\n'));
    const first = await joined({ role: 'observer', clientLabel: 'alice' });
    assert.deepEqual(first.names(), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe']);
    const role = first.last('RoleAssigned');
    assert.deepEqual([role?.payload['role'], role?.payload['reason'], role?.id], ['controller', 'first_joiner', `join-${first.id}`]);
    assert.deepEqual((await screenOf(first.last('Keyframe') as Frame))[0], 'before anyone joined');
    const second = await joined({ role: 'controller' });
    const r2 = second.last('RoleAssigned')?.payload;
    assert.deepEqual([r2?.['role'], r2?.['downgraded'], r2?.['reason']], ['observer', true, 'lease_held']);
    const m = first.last('MembershipChanged')?.payload;
    assert.deepEqual(m?.['controllers'], [{ client_id: `c-${first.id}`, label: 'alice' }]);
    assert.deepEqual(m?.['observers'], [{ client_id: `c-${second.id}` }]);
    hub.input(first, text('echo hi\r'), 'in-1');
    hub.output(2, text('hi\r\n'));
    assert.deepEqual(inputs, ['echo hi\r']);
    assert.equal(second.output(), 'hi\r\n');
    assert.equal(first.output(), 'hi\r\n');
    assertSequenceRules(first);
    assertSequenceRules(second);
  });

  test('an exact observer (the orchestrate observer URL) is not made controller by being first', async () => {
    const { hub, joined } = rig();
    const orchestrator = await joined({ role: 'observer', exactRole: true });
    assert.deepEqual([orchestrator.last('RoleAssigned')?.payload['role'], hub.membership().controllers], ['observer', []]);
    const human = await joined({ role: 'controller' });
    assert.equal(human.last('RoleAssigned')?.payload['role'], 'controller');
  });

  test("an observer's input and resize are refused with PERMISSION_DENIED (id echoed); the connection stays", async () => {
    const { hub, inputs, resizes, joined } = rig();
    await joined({ role: 'controller' });
    const obs = await joined({});
    hub.input(obs, text('rm -rf /\r'), 'bad-input');
    hub.resize(obs, 10, 10, 'bad-resize');
    assert.deepEqual([inputs, resizes], [[], []]);
    assert.deepEqual(
      obs.all('Error').map((e) => [e.payload['code'], e.id, e.payload['retryable']]),
      [
        ['PERMISSION_DENIED', 'bad-input', false],
        ['PERMISSION_DENIED', 'bad-resize', false],
      ],
    );
    assert.equal(obs.closed, false);
  });

  test("the controller's resize reaches the PTY and every client gets Resize; the keyframe follows the size", async () => {
    const { hub, resizes, joined } = rig();
    const obs = await joined({});
    const ctl = await joined({ role: 'controller' });
    hub.requestRole(obs, 'observer');
    hub.requestRole(ctl, 'controller', 'take');
    hub.resize(ctl, 100, 30);
    assert.deepEqual(resizes, ['100x30']);
    assert.deepEqual(
      [obs, ctl].map((c) => c.all('Resize').map((f) => `${String(f.payload['cols'])}x${String(f.payload['rows'])}`)),
      [['100x30'], ['100x30']],
    );
    const late = await joined({});
    const k = late.last('Keyframe')?.payload;
    assert.deepEqual([k?.['snapshot_cols'], k?.['snapshot_rows']], [100, 30]);
  });

  test('replay within the window: exactly the missed frames, then MembershipChanged, Keyframe, live', async () => {
    const { hub, joined } = rig();
    const watcher = await joined({});
    for (let i = 1; i <= 5; i++) hub.output(i, text(`line-${i}\r\n`));
    const seen = watcher.sequences();
    const cursor = watcher.all('Output')[1]?.sequence as number;
    const back = await joined({ replayFrom: cursor });
    hub.output(6, text('line-6\r\n'));
    assert.equal(back.output(), 'line-3\r\nline-4\r\nline-5\r\nline-6\r\n');
    const names = back.names();
    assert.deepEqual(names.slice(0, 5), ['binding_hello', 'RoleAssigned', 'Output', 'Output', 'Output']);
    assert.deepEqual(names.slice(5), ['MembershipChanged', 'Keyframe', 'Output']);
    const replayed = back.all('Output').map((f) => f.sequence);
    assert.deepEqual(
      replayed.slice(0, 3),
      seen.filter((s) => s > cursor && watcher.frames.some((f) => f.sequence === s && f.payload['kind'] === 'Output')),
    );
    assertSequenceRules(back);
  });

  test('replay out of range: Error REPLAY_OUT_OF_RANGE, then a Keyframe with the current screen', async () => {
    const { hub, joined } = rig({ replay: { minFrames: 4, softBytes: 0 } });
    for (let i = 1; i <= 20; i++) hub.output(i, text(`row ${i}\r\n`));
    const stale = await joined({ replayFrom: 2 });
    assert.deepEqual(stale.names(), ['binding_hello', 'RoleAssigned', 'Error', 'MembershipChanged', 'Keyframe']);
    assert.equal(stale.last('Error')?.payload['code'], 'REPLAY_OUT_OF_RANGE');
    assert.ok((await screenOf(stale.last('Keyframe') as Frame)).includes('row 20'));
    const future = await joined({ replayFrom: 10_000 });
    assert.equal(future.last('Error')?.payload['code'], 'REPLAY_OUT_OF_RANGE');
  });

  test('cadence keyframes: one after every N outputs, in the stream, anchored at the output before it', async () => {
    const { hub, joined } = rig({ keyframeIntervalFrames: 5 });
    const c = await joined({});
    for (let i = 1; i <= 12; i++) hub.output(i, text(`${i} `));
    await waitFor('two cadence keyframes', () => c.all('Keyframe').length >= 3, {
      deadlineMs: DEADLINE_MS.local,
      intervalMs: 5,
      lastState: () => c.describe(),
    });
    const session = c.frames.filter((f) => f.op === 'pty.session_frame').slice(3);
    const seqs = session.map((f) => f.sequence as number);
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => (seqs[0] as number) + i),
      'no gaps',
    );
    for (const k of c.all('Keyframe').slice(1)) {
      const before = c.frames.find((f) => f.sequence === (k.sequence as number) - 1);
      assert.equal(k.payload['anchor_sequence'], before?.sequence);
      assert.equal(before?.payload['kind'], 'Output');
    }
    assert.equal(c.output(), Array.from({ length: 12 }, (_, i) => `${i + 1} `).join(''));
  });

  test('a join while a cadence keyframe is pending still gets RoleAssigned, MembershipChanged, Keyframe in that order', async () => {
    const { hub, joined, open } = rig({ keyframeIntervalFrames: 1 });
    const first = await joined({});
    for (let i = 1; i <= 3; i++) hub.output(i, text(`out-${i} `));
    const late = open();
    hub.join(late, { role: 'observer' }, 'late');
    hub.output(4, text('out-4 '));
    await keyframeAfter(late, 0);
    await waitFor('out-4 for the late joiner or in its keyframe', () => late.frames.length >= 5 || undefined, {
      deadlineMs: DEADLINE_MS.local,
      intervalMs: 5,
    });
    const names = late.names();
    assert.deepEqual(names.slice(0, 4), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe'], late.describe());
    assert.ok((await screenOf(late.all('Keyframe')[0] as Frame))[0]?.startsWith('out-1 out-2 out-3'));
    assertSequenceRules(late);
    assertSequenceRules(first);
  });

  test('pty.request_keyframe: a fresh keyframe to that client only, live frames after it', async () => {
    const { hub, joined } = rig();
    const a = await joined({});
    const b = await joined({});
    hub.output(1, text('x'));
    hub.requestKeyframe(b, 'kf');
    hub.output(2, text('y'));
    const k = await keyframeAfter(b, 1);
    assert.equal(k.id, 'kf');
    await waitFor('y after the keyframe', () => b.output().endsWith('y'), { deadlineMs: DEADLINE_MS.local, intervalMs: 5 });
    assert.deepEqual(b.names().slice(-2), ['Keyframe', 'Output']);
    assert.equal(a.all('Keyframe').length, 1);
  });

  test('leave: the last MembershipChanged to everyone, binding_goodbye, close 1000; the lease is free', async () => {
    const { hub, joined } = rig();
    const a = await joined({ role: 'controller' });
    const b = await joined({});
    hub.leave(a, 'bye');
    assert.deepEqual(a.names().slice(-2), ['MembershipChanged', 'binding_goodbye']);
    assert.equal(a.closeCode, 1000);
    assert.deepEqual(b.last('MembershipChanged')?.payload['controllers'], []);
    hub.requestRole(b, 'controller', 'take');
    assert.equal(b.last('RoleAssigned')?.payload['role'], 'controller');
  });

  test('liveness: a Ping after 30 s of silence; no answer within 10 s closes 1011 and frees the lease', async () => {
    const { hub, joined, clock } = rig({ pingIntervalMs: 30_000, pongTimeoutMs: 10_000 });
    const dead = await joined({ role: 'controller' });
    const alive = await joined({});
    dead.answerPings = false;
    clock.now += 30_000;
    hub.tick();
    assert.deepEqual([dead.pings, alive.pings], [1, 1]);
    clock.now += 10_000;
    hub.tick();
    assert.equal(dead.closeCode, 1011);
    assert.equal(alive.closed, false);
    assert.deepEqual(hub.membership().controllers, []);
  });

  test('a client that stops reading is cut off (SLOW_CONSUMER, 4413) without slowing the others', async () => {
    const { hub, joined } = rig({ maxQueuedBytes: 64 * 1024 });
    const slow = await joined({});
    const fast = await joined({});
    slow.stopReading();
    const chunk = new Uint8Array(4096).fill(0x61);
    for (let seq = 1; seq <= 100; seq++) hub.output(seq, chunk);
    assert.equal(slow.closeCode, 4413);
    assert.equal(slow.last('Error')?.payload['code'], 'SLOW_CONSUMER');
    assert.equal(fast.output().length, 100 * 4096);
  });

  test('the session ends: Closed with the exit code, binding_goodbye, close 1000; later opens get 4404', async () => {
    const { hub, joined, open } = rig();
    const a = await joined({});
    const b = await joined({}, true);
    hub.close(7, 'exited');
    for (const c of [a, b]) {
      assert.deepEqual(c.names().slice(-2), ['Closed', 'binding_goodbye']);
      assert.deepEqual([c.last('Closed')?.payload['exit_code'], c.last('Closed')?.payload['reason']], [7, 'normal']);
      assert.equal(c.last('binding_goodbye')?.payload['reason'], 'session_closed');
      assert.equal(c.closeCode, 1000);
    }
    assert.equal(open().closeCode, 4404);
  });

  test('binary dialect: Output travels as PW1O with the same sequences as JSON clients see', async () => {
    const { hub, joined } = rig();
    const json = await joined({});
    const bin = await joined({}, true);
    hub.output(1, text('bytes'));
    assert.equal(bin.last('Output')?.binary, true);
    assert.equal(bin.output(), 'bytes');
    assert.equal(bin.last('Output')?.sequence, json.last('Output')?.sequence);
  });

  test('a selection on an existing session: unavailable pairs fail closed, argv is refused, the pair it runs is fine', async () => {
    const { open, hub, inputs } = rig();
    const c = open();
    hub.join(c, { role: 'controller', sessionBackend: 'zellij' }, 'z');
    hub.join(c, { role: 'controller', sessionBackend: 'screen' }, 's');
    hub.join(c, { role: 'controller', argv: ['/bin/sh'] }, 'argv');
    assert.deepEqual(
      c.all('Error').map((e) => [e.id, e.payload['code']]),
      [
        ['z', 'session_backend.not_implemented'],
        ['s', 'session_backend.not_implemented'],
        ['argv', 'INVALID_REQUEST'],
      ],
    );
    assert.equal(c.last('RoleAssigned'), undefined);
    hub.join(c, { role: 'controller', sessionBackend: 'tmux', sessionClass: 'managed' }, 'ok');
    await keyframeAfter(c, 0);
    assert.equal(c.last('RoleAssigned')?.payload['role'], 'controller');
    assert.deepEqual(inputs, []);
  });

  test('a pending session: a join without a backend is refused (4404); one with a selection starts it, then joins', async () => {
    const starts: JoinSelection[] = [];
    let fail = false;
    const { open, hub } = rig({
      state: 'pending',
      start: (sel) => {
        starts.push(sel);
        return fail ? Promise.reject(new StartError('session_backend.not_implemented', 'no')) : Promise.resolve();
      },
    });
    const none = open();
    hub.join(none, { role: 'controller' }, 'j0');
    assert.equal(none.closeCode, 4404);
    const c = open();
    hub.join(c, { role: 'controller', sessionBackend: 'native', argv: ['/bin/sh'], cols: 90, rows: 20 }, 'j1');
    await keyframeAfter(c, 0);
    assert.deepEqual(starts, [{ backend: 'native', class: 'direct', argv: ['/bin/sh'], cols: 90, rows: 20 }]);
    assert.deepEqual(hub.terminalSize, { cols: 90, rows: 20 });
    assert.deepEqual(c.names(), ['binding_hello', 'RoleAssigned', 'MembershipChanged', 'Keyframe'], 'the start size is no Resize frame');
    assert.deepEqual([c.last('Keyframe')?.payload['snapshot_cols'], c.last('Keyframe')?.payload['snapshot_rows']], [90, 20]);
    assert.equal(c.last('RoleAssigned')?.payload['role'], 'controller');
    fail = true;
    const other = rig({ state: 'pending', start: () => Promise.reject(new StartError('session_class.not_implemented', 'nope')) });
    const d = other.open();
    other.hub.join(d, { role: 'controller', sessionBackend: 'native' }, 'j2');
    await waitFor('the failed start to close the joiner', () => d.closed, { deadlineMs: DEADLINE_MS.local, intervalMs: 5 });
    assert.deepEqual([d.last('Error')?.payload['code'], d.last('Error')?.id, d.closeCode], ['session_class.not_implemented', 'j2', 4404]);
  });
});
