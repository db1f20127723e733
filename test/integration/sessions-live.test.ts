/**
 * Interactive sessions end to end with the real parts: the agents server and the sessions
 * component wired as in src/main.ts, a real sandbox-agent over mTLS gRPC, real tmux, the pty-ws.v1
 * binding over real WebSockets (JSON and binary subprotocols). Roles, input, resize, keyframes,
 * idempotent create, verified kill, bad input, a client that stops reading, and sandboxd's own
 * client (src/client/pty-ws.ts) resuming after a drop.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createRequire } from 'node:module';
import { ApiClient } from '../../src/client/api-client.js';
import type { WebSocketConstructor } from '../../src/client/http-transport.js';
import type { PtyConnection } from '../../src/client/pty-ws.js';
import { BINDING_URI } from '../../src/sessions/binding/codes.js';
import type { SessionResizeFrame } from '../../src/sessions/binding/frames.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { PtyClient, pidAlive, tmuxOn, useSessionsBed } from './sessions-harness.js';

const AGENT = 'sess-live-1';
/** The `ws` package's WebSocket, as sbx session attach uses it. */
const WsClientCtor = (createRequire(import.meta.url)('ws') as { WebSocket: WebSocketConstructor }).WebSocket;
const clients: PtyClient[] = [];

interface Created {
  session_id: string;
  session_name: string;
  agent_id: string;
}

async function open(sessionId: string, protocols?: string[]): Promise<PtyClient> {
  const c = await PtyClient.open(bed.srv.wsBase, sessionId, protocols);
  clients.push(c);
  return c;
}

async function create(body: Record<string, unknown>, key?: string): Promise<{ status: number; body: Created & Record<string, unknown> }> {
  return await bed.srv.json<Created & Record<string, unknown>>(
    'POST',
    `/api/v1/agents/${AGENT}/sessions`,
    body,
    key === undefined ? {} : { 'idempotency-key': key },
  );
}

const bed = useSessionsBed(AGENT, () => {
  for (const c of clients) c.ws.terminate();
});

void describe('sessions with a real agent and real tmux', () => {
  test('controller types, observer reads; a second controller is downgraded; observer input is refused; resize reaches the PTY', async () => {
    const r = await create({ session_name: 'live-one' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const sid = r.body.session_id;
    // The controller on pty-ws.v1.binary (PW1O output, PW1I input), the observers on JSON.
    const ctl = await open(sid, ['pty-ws.v1.binary', 'pty-ws.v1']);
    assert.equal(ctl.ws.protocol, 'pty-ws.v1.binary');
    const hello = await ctl.next('binding_hello');
    assert.equal((hello['payload'] as { binding_uri: string }).binding_uri, BINDING_URI);
    assert.equal((await ctl.join('controller'))['role'], 'controller');
    const obs = await open(sid);
    assert.equal((await obs.join('observer'))['role'], 'observer');
    const second = await open(sid);
    const granted = await second.join('controller');
    assert.equal(granted['role'], 'observer', 'a second controller is downgraded');
    assert.equal(granted['downgraded'], true);

    await ctl.waitForShell();
    ctl.type('echo "hello-$((6*7))"\r');
    await obs.waitText(/hello-42/);

    obs.type('echo "observer-typed-$((5*5))"\r');
    const err = await obs.next('Error');
    assert.equal((err['payload'] as { code: string }).code, 'PERMISSION_DENIED');
    ctl.type('echo "after-$((2*2))"\r');
    await obs.waitText(/after-4/);
    assert.doesNotMatch(obs.text(), /observer-typed-25/, 'observer input never reached the PTY');
    // A late viewer is drawn the screen as it is: the join's Keyframe holds what was typed before.
    const late = await open(sid);
    await late.join('observer');
    const keyframe = await late.nextKind('Keyframe');
    assert.equal(keyframe['snapshot_format'], 'vt100-screen-state-v1');
    assert.match(Buffer.from(String(keyframe['snapshot']), 'base64').toString('utf8'), /after-4/);

    ctl.send<SessionResizeFrame>('pty.session_resize', { cols: 101, rows: 31 });
    await ctl.nextKind('Resize');
    // The frame says the hub resized; the pane follows asynchronously (PTY → tmux client → tmux server).
    await ctl.askUntil('stty size\r', /31 101/, 'stty size to show the new size 31 101');
  });

  test('an idempotent retry returns the same session; a different body with the key conflicts', async () => {
    const a = await create({ session_name: 'idem-one' }, 'key-1');
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const b = await create({ session_name: 'idem-one' }, 'key-1');
    assert.equal(b.status, 200);
    assert.equal(b.body.session_id, a.body.session_id);
    const c = await create({ session_name: 'idem-two' }, 'key-1');
    assert.equal(c.status, 409);
    assert.equal((c.body as unknown as { error: { code: string } }).error.code, 'idempotency.key_conflict');
    const list = await bed.srv.json<{ sessions: { session_id: string }[] }>('GET', `/api/v1/agents/${AGENT}/sessions`);
    assert.equal(list.body.sessions.filter((s) => s.session_id === a.body.session_id).length, 1);
  });

  test('DELETE kills the whole process tree, verified', async () => {
    const r = await create({ session_name: 'kill-me', command: 'sleep 1000 & sleep 1001 & wait' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const panes = await waitFor(
      'the tmux session kill-me',
      async () => {
        const l = await tmuxOn(bed.agent, ['list-panes', '-t', '=kill-me', '-F', '#{pane_pid}']);
        return l.code === 0 && l.stdout.trim() !== '' ? l.stdout.trim().split('\n').map(Number) : undefined;
      },
      {
        deadlineMs: DEADLINE_MS.process,
        lastState: async () => `sessions on the agent's tmux: ${JSON.stringify((await tmuxOn(bed.agent, ['list-sessions'])).stdout)}`,
      },
    );
    let pids: number[] = [];
    const tree = await waitFor(
      "the shell and both sleeps in the pane's session",
      async () => {
        const { execFileSync } = await import('node:child_process');
        pids = panes.flatMap((p) =>
          execFileSync('pgrep', ['-s', String(p)], { encoding: 'utf8' })
            .trim()
            .split('\n')
            .filter((x) => x !== '')
            .map(Number),
        );
        return pids.length >= 3 ? pids : undefined;
      },
      { deadlineMs: DEADLINE_MS.process, lastState: () => `pids ${JSON.stringify(pids)}` },
    );
    const del = await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${r.body.session_id}?signal=TERM`);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.deepEqual(del.body, { killed: true });
    for (const pid of tree) assert.equal(pidAlive(pid), false, `pid ${pid} is gone`);
    assert.notEqual((await tmuxOn(bed.agent, ['has-session', '-t', '=kill-me'])).code, 0);
    const list = await bed.srv.json<{ sessions: { session_id: string }[] }>('GET', `/api/v1/agents/${AGENT}/sessions`);
    assert.equal(
      list.body.sessions.some((s) => s.session_id === r.body.session_id),
      false,
    );
  });

  test('unknown agent and session ids are 404 envelopes; a malformed frame closes that client only', async () => {
    const noAgent = await bed.srv.json<{ error: { code: string } }>('GET', '/api/v1/agents/nobody/sessions');
    assert.equal(noAgent.status, 404);
    assert.equal(noAgent.body.error.code, 'agent.not_found');
    const noSession = await bed.srv.json<{ error: { code: string } }>(
      'DELETE',
      `/api/v1/agents/${AGENT}/sessions/00000000-0000-0000-0000-000000000000`,
    );
    assert.equal(noSession.status, 404);
    assert.equal(noSession.body.error.code, 'session.not_found');
    assert.equal(await PtyClient.refusedStatus(`${bed.srv.wsBase}/api/v1/sessions/nope/pty`), 404);

    const r = await create({ session_name: 'bad-frames' });
    assert.equal(r.status, 200);
    const good = await open(r.body.session_id);
    await good.join('controller');
    const bad = await open(r.body.session_id);
    await bad.join('observer');
    bad.ws.send('{not json');
    assert.equal(await bad.waitClosed(), 4400);
    await good.waitForShell();
    good.type('echo "still-$((3*3))"\r');
    await good.waitText(/still-9/);
  });

  test('a client that stops reading is dropped; the other viewers get everything', async () => {
    const r = await create({ session_name: 'slow-one' });
    assert.equal(r.status, 200);
    const ctl = await open(r.body.session_id);
    await ctl.join('controller');
    const slow = await open(r.body.session_id);
    await slow.join('observer');
    await ctl.waitForShell();
    slow.ws.pause();
    // A big terminal makes tmux send big redraws: megabytes reach the clients in seconds.
    ctl.send<SessionResizeFrame>('pty.session_resize', { cols: 400, rows: 200 });
    await ctl.nextKind('Resize');
    ctl.type('yes "$(printf %0390d 0)" | head -n 600000; echo "done-$((7*8))"\r');
    // Dropped while the output still runs (membership loses it), and the controller saw it all.
    const membership = async (): Promise<unknown> =>
      (
        await bed.srv.json<{ sessions: { session_id: string; membership: { attachment_count: number } }[] }>(
          'GET',
          `/api/v1/agents/${AGENT}/sessions`,
        )
      ).body.sessions.find((s) => s.session_id === r.body.session_id)?.membership;
    await waitFor(
      'the stalled client to be dropped (one attachment left)',
      async () => ((await membership()) as { attachment_count?: number } | undefined)?.attachment_count === 1,
      {
        deadlineMs: DEADLINE_MS.endToEnd,
        intervalMs: 100,
        lastState: async () => `membership ${JSON.stringify(await membership())}; controller ${ctl.describe()}`,
      },
    );
    await ctl.waitText(/done-56/, DEADLINE_MS.endToEnd);
    slow.ws.resume();
    // 4413 when the close frame still fits behind the queued bytes; a stalled socket may only
    // see the connection end (1006).
    assert.ok([4413, 1006].includes(await slow.waitClosed()));
  });

  test("sandboxd's own client resumes after a drop with replay_from, and joins fresh when the server's counter is behind it", async () => {
    const r = await create({ session_name: 'resume-one' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const sid = r.body.session_id;
    const ctl = await open(sid);
    await ctl.join('controller');
    await ctl.waitForShell();
    const api = new ApiClient({ baseUrl: bed.srv.base, WebSocket: WsClientCtor });
    const seen: string[] = [];
    const keyframes: string[] = [];
    const errors: string[] = [];
    const watch = (replayFrom?: number): PtyConnection =>
      api.openPty(sid, {
        role: 'observer',
        cols: 80,
        rows: 24,
        ...(replayFrom !== undefined ? { replayFrom } : {}),
        onKeyframe: (k) => keyframes.push(new TextDecoder().decode(k.snapshot)),
        onOutput: (b) => seen.push(new TextDecoder().decode(b)),
        onError: (code) => errors.push(code),
      });
    const state = (c: PtyConnection) => (): string =>
      `role ${c.role}, lastSequence ${c.lastSequence}, keyframes ${keyframes.length}, errors ${JSON.stringify(errors)}, output ${JSON.stringify(seen.join('').slice(-300))}`;

    const first = watch();
    await waitFor('the first connection to be drawn the screen', () => keyframes.length > 0 && first.role === 'observer', {
      deadlineMs: DEADLINE_MS.process,
      lastState: state(first),
    });
    assert.match(keyframes.join(''), /shell-42/);
    ctl.type('echo "one-$((1+1))"\r');
    await waitFor('one-2 live', () => seen.join('').includes('one-2'), { deadlineMs: DEADLINE_MS.process, lastState: state(first) });
    first.close();
    await first.closed();

    ctl.type('echo "two-$((2+1))"\r');
    await ctl.waitText(/two-3/);
    seen.length = 0;
    keyframes.length = 0;
    const resumed = watch(first.lastSequence);
    await waitFor('the missed output', () => [...seen, ...keyframes].join('').includes('two-3'), {
      deadlineMs: DEADLINE_MS.process,
      lastState: state(resumed),
    });
    assert.doesNotMatch(seen.join(''), /one-2/, 'what the screen showed before the drop is not sent again');
    assert.deepEqual(errors, [], 'the cursor was still retained');
    resumed.close();
    await resumed.closed();

    // A cursor beyond the session's counter (what a restarted server looks like): a fresh join, a redraw.
    keyframes.length = 0;
    const ahead = watch(resumed.lastSequence + 1_000_000);
    await waitFor('a redraw of the whole screen', () => keyframes.some((k) => /two-3/.test(k)), {
      deadlineMs: DEADLINE_MS.process,
      lastState: state(ahead),
    });
    assert.ok(ahead.lastSequence < resumed.lastSequence + 1_000_000);
    ahead.close();
    await ahead.closed();
  });
});
