/**
 * The create response's `ws_endpoint` and `join_message` (spec part 2 and 4.18), used exactly as
 * returned, attach to the session on the WebSocket listener: the join is answered, the screen
 * arrives as a keyframe, typed input reaches the real tmux session and its output comes back as
 * session frames. A second connection joining as observer sees the same output and cannot type;
 * start_shell (the reference dashboard's first terminal) attaches with the untagged output
 * stream and its page size; one connection attached to two sessions keeps the second when the
 * first ends.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import type { SessionCreated, SessionList } from '../../src/wire/sessions.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { useSessionsBed } from './sessions-harness.js';

const AGENT = 'sess-ws-join-1';

interface WsLike {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  send(data: string): void;
  terminate(): void;
}
const WebSocketClient = createRequire(import.meta.url)('ws') as new (url: string) => WsLike;

type Msg = Record<string, unknown>;

/** A dashboard WebSocket client that keeps every message and the screen text of each session. */
class DashboardWs {
  readonly got: Msg[] = [];
  readonly #ws: WsLike;
  readonly opened: Promise<void>;
  closedCode: number | undefined;

  constructor(url: string) {
    this.#ws = new WebSocketClient(url);
    this.opened = new Promise((resolve, reject) => {
      this.#ws.on('open', resolve);
      this.#ws.on('error', reject);
    });
    this.#ws.on('message', (d) => this.got.push(JSON.parse(d.toString('utf8')) as Msg));
    this.#ws.on('close', (code) => (this.closedCode = code));
  }

  send(msg: Msg | string): void {
    this.#ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  of(type: string, sessionId?: string): Msg[] {
    return this.got.filter((m) => m['type'] === type && (sessionId === undefined || m['session_id'] === sessionId));
  }

  /** Every output and keyframe byte of `sessionId` received so far, as text. */
  screen(sessionId: string): string {
    return this.of('session_frame', sessionId)
      .filter((m) => m['kind'] === 'output' || m['kind'] === 'keyframe')
      .map((m) => Buffer.from(m['data'] as string, 'base64').toString('utf8'))
      .join('');
  }

  state(): string {
    return `received ${JSON.stringify(this.got.slice(-8)).slice(0, 2000)}`;
  }

  close(): void {
    this.#ws.terminate();
  }
}

/** Types `input` every 2 s until the session's screen on `ws` matches `re` (a shell may still be starting). */
async function typeUntil(ws: DashboardWs, sessionId: string, input: string, re: RegExp, what: string): Promise<void> {
  let typedMs = 0;
  await waitFor(
    what,
    () => {
      if (re.test(ws.screen(sessionId))) return true;
      if (Date.now() - typedMs >= 2000) {
        typedMs = Date.now();
        ws.send({ type: 'session_input', session_id: sessionId, data: input });
      }
      return false;
    },
    { deadlineMs: DEADLINE_MS.process, intervalMs: 100, lastState: () => ws.state() },
  );
}

const bed = useSessionsBed(AGENT);

async function createSession(): Promise<SessionCreated> {
  const created = await bed.srv.json<SessionCreated>('POST', `/api/v1/agents/${AGENT}/sessions`, {});
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return created.body;
}

void describe('join_session on the WebSocket listener', () => {
  test('ws_endpoint + join_message exactly as returned: joined as controller, keyframe, typed output comes back', async () => {
    const created = await createSession();
    const id = created.session_id;
    const ws = new DashboardWs(created.ws_endpoint);
    const observer = new DashboardWs(created.ws_endpoint);
    try {
      await ws.opened;
      ws.send(JSON.stringify(created.join_message));
      const joined = await waitFor('session_joined', () => ws.of('session_joined', id)[0], {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => ws.state(),
      });
      assert.equal(joined['role'], 'controller', 'join_message asks for the controller role and the lease is free');
      assert.equal(typeof joined['current_seq'], 'number');
      await waitFor('the join keyframe', () => ws.of('session_frame', id).find((m) => m['kind'] === 'keyframe'), {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => ws.state(),
      });
      await typeUntil(ws, id, 'echo "joined-$((40+2))"\r', /joined-42/, 'the typed command to print joined-42');
      for (const f of ws.of('session_frame', id)) {
        assert.equal(typeof f['seq'], 'number');
        assert.equal(typeof f['ts'], 'number', 'ts is Unix ms');
      }

      await observer.opened;
      observer.send({ type: 'join_session', session_id: id, role: 'controller' });
      const second = await waitFor('the second join', () => observer.of('session_joined', id)[0], {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => observer.state(),
      });
      assert.equal(second['role'], 'observer', 'the lease is held: downgraded');
      ws.send({ type: 'session_input', session_id: id, data: 'echo "both-$((6*7))"\r' });
      await waitFor('the observer to see the output', () => /both-42/.test(observer.screen(id)), {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => observer.state(),
      });
      observer.send({ type: 'session_input', session_id: id, data: 'echo "observer-$((1+1))"\r' });
      await waitFor('the observer to be told it may not type', () => observer.of('error').find((e) => e['code'] === 'PERMISSION_DENIED'), {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => observer.state(),
      });
      await new Promise((r) => setTimeout(r, 500));
      assert.doesNotMatch(ws.screen(id), /observer-2/, "the observer's keystrokes never reached the shell");
    } finally {
      ws.close();
      observer.close();
      await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${id}?signal=KILL`);
    }
  });

  test("start_shell (the reference's first terminal): untagged output as text, send_input by command id, the page's size", async () => {
    const ws = new DashboardWs(`ws://127.0.0.1:${bed.srv.ws}/`);
    await ws.opened;
    ws.send({ type: 'start_shell', agent_id: AGENT, cols: 111, rows: 33 });
    const started = await waitFor('shell_started', () => ws.of('shell_started')[0], {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => ws.state(),
    });
    assert.equal(started['session_name'], 'main');
    const text = (): string =>
      ws
        .of('output')
        .filter((m) => m['command_id'] === started['command_id'])
        .map((m) => m['data'] as string)
        .join('');
    let typedMs = 0;
    try {
      // The size the page sent reaches the PTY once the shell runs (a resize while it starts is dropped).
      await waitFor(
        'stty size to show 33 111',
        () => {
          if (/33 111/.test(text())) return true;
          if (Date.now() - typedMs >= 2000) {
            typedMs = Date.now();
            ws.send({ type: 'send_input', agent_id: AGENT, command_id: started['command_id'], data: 'stty size\r' });
          }
          return false;
        },
        { deadlineMs: DEADLINE_MS.process, lastState: () => `${ws.state()}; text ${JSON.stringify(text().slice(-300))}` },
      );
      const listed = await bed.srv.json<SessionList>('GET', `/api/v1/agents/${AGENT}/sessions`);
      assert.deepEqual(
        listed.body.sessions.filter((x) => x.session_name === 'main').map((x) => x.session_id),
        [started['session_id']],
        'the session REST lists',
      );
    } finally {
      ws.close();
      await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${started['session_id'] as string}?signal=KILL`);
    }
  });

  test('one connection on two sessions: killing one ends that attachment only', async () => {
    const one = await createSession();
    const two = await createSession();
    const ws = new DashboardWs(one.ws_endpoint);
    try {
      await ws.opened;
      ws.send(one.join_message);
      ws.send(two.join_message);
      await waitFor('both joins', () => ws.of('session_joined').length === 2, {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => ws.state(),
      });
      assert.equal((await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${one.session_id}?signal=KILL`)).status, 200);
      await waitFor('the closed frame of the first', () => ws.of('session_frame', one.session_id).find((m) => m['kind'] === 'closed'), {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => ws.state(),
      });
      await waitFor('the first attachment to end', () => ws.of('session_left', one.session_id)[0], {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => ws.state(),
      });
      assert.equal(ws.closedCode, undefined, 'the connection stays open');
      await typeUntil(ws, two.session_id, 'echo "still-$((40+2))"\r', /still-42/, 'the second session to answer');
    } finally {
      ws.close();
      await bed.srv.json('DELETE', `/api/v1/agents/${AGENT}/sessions/${two.session_id}?signal=KILL`);
    }
  });
});
