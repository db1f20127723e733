/**
 * sbx session against the real server (VM on the test driver, its local agent, tmux): create,
 * list, kill, and `session attach` (the pty-ws.v1 binding) driven through real pseudo-terminals
 * (node-pty): a controller types `echo`, an observer sees the output and cannot type, a second
 * --control request is downgraded and is drawn the screen so far (keyframe), Ctrl-] detaches,
 * killing the session ends the observer's attach.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runSbx, runSbxInPty, sbxJson, startCliServer, vmName, waitFor, type CliServer, type SbxPty } from './cli-harness.js';

let srv: CliServer;
let vm = '';
let agent = '';
const terminals: SbxPty[] = [];

before(async () => {
  srv = await startCliServer();
  vm = vmName('sess');
  const created = await runSbx(srv, ['vm', 'create', vm]);
  assert.equal(created.code, 0, created.stderr);
  let listed = '';
  agent = await waitFor(
    `the agent of VM ${vm} to be Ready`,
    async () => {
      const list = await sbxJson<{ agents: { id: string; hostname: string; status: string }[] }>(srv, ['agent', 'list']);
      listed = JSON.stringify(list.agents.map((a) => [a.id, a.status]));
      return list.agents.find((a) => a.id === vm && a.status === 'Ready')?.id;
    },
    undefined,
    () => Promise.resolve(`agents ${listed}`),
  );
});
after(async () => {
  for (const t of terminals) t.kill();
  if (vm !== '') await runSbx(srv, ['vm', 'delete', vm, '--force', '--delete-disk']);
  await srv?.stop();
});

interface Created {
  session_id: string;
  session_name: string;
  pty_ws_subprotocol: string;
}

describe('sbx session', () => {
  test('create, list, attach as controller and observer, detach, kill', async () => {
    const created = await sbxJson<Created>(srv, ['session', 'create', agent, '--name', 'cli-term', '--idempotency-key', 'cli-k1']);
    assert.equal(created.session_name, 'cli-term');
    assert.equal(created.pty_ws_subprotocol, 'pty-ws.v1');
    // The same key again is the same session.
    const again = await sbxJson<Created>(srv, ['session', 'create', agent, '--name', 'cli-term', '--idempotency-key', 'cli-k1']);
    assert.equal(again.session_id, created.session_id);

    const list = await sbxJson<{ agent_id: string; sessions: { session_id: string; session_name: string }[] }>(srv, [
      'session',
      'list',
      agent,
    ]);
    assert.ok(list.sessions.some((s) => s.session_id === created.session_id && s.session_name === 'cli-term'));
    const table = await runSbx(srv, ['session', 'list', agent]);
    assert.match(table.stdout, new RegExp(`^${created.session_id}\\s+cli-term\\s`, 'm'));

    // The observer attaches by name, the controller by id.
    const observer = runSbxInPty(srv, ['session', 'attach', agent, 'cli-term']);
    terminals.push(observer);
    await observer.waitFor(/attached to \S+ as observer \(read-only; --control to type\); Ctrl-\] detaches/);
    const controller = runSbxInPty(srv, ['session', 'attach', agent, created.session_id, '--control']);
    terminals.push(controller);
    await controller.waitFor(/attached to \S+ as controller; Ctrl-\] detaches/);

    await controller.typeUntil('echo "shell-$((40+2))"\r', /shell-42/, "the session's shell to run a command");
    controller.write('echo hello-$((6*7))\r');
    await controller.waitFor(/hello-42/);
    await observer.waitFor(/hello-42/);

    // Observers cannot type: a hint, and nothing reaches the shell.
    observer.write('echo observer-$((7*7))\r');
    await observer.waitFor(/observer: typing is ignored/);

    // A second controller request while the lease is held is granted as observer, and says so.
    const second = runSbxInPty(srv, ['session', 'attach', agent, created.session_id, '--control']);
    terminals.push(second);
    await second.waitFor(/controller lease is held by another client: attached to \S+ as observer/);
    // A late attach is drawn the session's screen (the join's keyframe), earlier output included.
    await second.waitFor(/hello-42/);
    second.write('\u001d');
    assert.equal(await second.waitExit(), 0);

    // Ctrl-] detaches the controller; the session keeps running.
    controller.write('\u001d');
    assert.equal(await controller.waitExit(), 0);
    assert.match(controller.output(), /detached from \S+ \(the session keeps running\)/);
    assert.doesNotMatch(observer.output(), /observer-49/);

    // Killing the session ends the observer's attach with exit 0.
    const killed = await sbxJson<{ killed: boolean }>(srv, ['session', 'kill', agent, created.session_id, '--signal', 'KILL']);
    assert.equal(killed.killed, true);
    assert.equal(await observer.waitExit(), 0, observer.output().slice(-500));
    assert.match(observer.output(), /session \S+ (ended|closed)/);

    const gone = await runSbx(srv, ['session', 'attach', agent, created.session_id]);
    assert.equal(gone.code, 3);
    assert.match(gone.stderr, /^sbx: session\.not_found: /);
  });
});
