/**
 * sbx vm / ops / agent against the real server (libvirt test driver, local agents): the whole
 * VM lifecycle with --json output checked, progress on stderr, and the exit codes of the
 * failures a user hits (bad name, duplicate, delete while running, unknown VM).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS } from '../support/wait.js';
import { runSbx, runSbxInPty, sbxJson, startCliServer, vmName, waitFor, type CliServer } from './cli-harness.js';

let srv: CliServer;
before(async () => {
  srv = await startCliServer();
});
after(async () => {
  await srv?.stop();
});

interface Op {
  id: string;
  type: string;
  status: string;
  target: string;
  progress_percent: number;
  result?: { vm?: { name: string; state: string } };
}

describe('sbx vm', () => {
  test('create, list, get, agent list, stop, start, destroy, restart, ops wait, delete', async () => {
    const name = vmName('life');

    // create waits for the operation; progress goes to stderr, the final operation to stdout.
    const created = await runSbx(srv, ['vm', 'create', name, '--vcpus', '2', '--memory-mb', '2048', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const op = JSON.parse(created.stdout) as Op;
    assert.deepEqual([op.type, op.status, op.target, op.progress_percent], ['vm_create', 'completed', name, 100]);
    assert.equal(op.result?.vm?.name, name);
    assert.match(created.stderr, new RegExp(`vm_create ${name}: completed 100%`));

    const list = await sbxJson<{ vms: { name: string; state: string; vcpus: number; memory_mb: number }[]; total: number }>(srv, [
      'vm',
      'list',
      '--state',
      'running',
    ]);
    const mine = list.vms.find((v) => v.name === name);
    assert.deepEqual(mine && [mine.state, mine.vcpus, mine.memory_mb], ['running', 2, 2048]);
    assert.equal(list.total, list.vms.length);

    const table = await runSbx(srv, ['vm', 'list']);
    assert.equal(table.code, 0);
    assert.match(table.stdout, /^NAME\s+STATE\s+VCPUS\s+MEMORY\s+IP\s+UPTIME$/m);
    assert.match(table.stdout, new RegExp(`^${name}\\s+running\\s+2\\s+2\\.0 GiB`, 'm'));

    // The VM's local agent connects; sbx sees it in vm get and agent list.
    let seen = '';
    const detail = await waitFor(
      `the agent of VM ${name} to be connected`,
      async () => {
        const d = await sbxJson<{ name: string; agent: { connected: boolean } }>(srv, ['vm', 'get', name]);
        seen = JSON.stringify(d.agent);
        return d.agent.connected ? d : undefined;
      },
      undefined,
      () => Promise.resolve(`vm get shows agent ${seen}`),
    );
    assert.equal(detail.name, name);
    const agents = await waitFor('the agent in agent list', async () => {
      const a = await sbxJson<{ agents: { id: string; status: string; hostname: string }[] }>(srv, ['agent', 'list']);
      return a.agents.length > 0 ? a : undefined;
    });
    assert.ok(agents.agents.every((a) => typeof a.id === 'string' && typeof a.status === 'string'));
    const agentTable = await runSbx(srv, ['agent', 'list']);
    assert.match(agentTable.stdout, /^ID\s+STATUS\s+HOSTNAME\s+IP\s+CPU\s+MEMORY\s+CONNECTED\s+HEARTBEAT$/m);

    // Delete while running is a conflict: exit 4 with the server's code.
    const busy = await runSbx(srv, ['vm', 'delete', name]);
    assert.equal(busy.code, 4);
    assert.match(busy.stderr, /^sbx: VM_RUNNING: /);

    const stopped = await sbxJson<{ vm: { name: string; state: string }; message: string }>(srv, ['vm', 'stop', name]);
    assert.equal(stopped.vm.name, name);
    assert.match(stopped.message, /shutdown/i);
    const started = await sbxJson<{ vm: { state: string } }>(srv, ['vm', 'start', name]);
    assert.equal(started.vm.state, 'running');

    // restart waits; --no-wait returns the operation at once and ops wait finishes it.
    const restarted = await sbxJson<Op>(srv, ['vm', 'restart', name, '--hard']);
    assert.deepEqual([restarted.type, restarted.status], ['vm_restart', 'completed']);
    const accepted = await sbxJson<{ operation: Op; vm: null }>(srv, ['vm', 'restart', name, '--no-wait']);
    assert.equal(accepted.vm, null);
    assert.equal(accepted.operation.type, 'vm_restart');
    const waited = await sbxJson<Op>(srv, ['ops', 'wait', accepted.operation.id]);
    assert.deepEqual([waited.id, waited.status, waited.progress_percent], [accepted.operation.id, 'completed', 100]);
    const fetched = await sbxJson<Op>(srv, ['ops', 'get', accepted.operation.id]);
    assert.equal(fetched.status, 'completed');
    const humanWait = await runSbx(srv, ['ops', 'wait', accepted.operation.id]);
    assert.equal(humanWait.code, 0);
    assert.match(humanWait.stdout, /^status:\s+completed$/m);

    const destroyed = await sbxJson<{ vm: { state: string } }>(srv, ['vm', 'destroy', name]);
    assert.notEqual(destroyed.vm.state, 'running');

    const deleted = await sbxJson<{ deleted: boolean; name: string; disk_deleted: boolean }>(srv, ['vm', 'delete', name, '--delete-disk']);
    assert.deepEqual(deleted, { deleted: true, name, disk_deleted: true });

    const gone = await runSbx(srv, ['vm', 'get', name]);
    assert.equal(gone.code, 3);
    assert.match(gone.stderr, /^sbx: VM_NOT_FOUND: /);
  });

  test('bad input exits 2 and a taken name exits 4, with the server codes', async () => {
    const bad = await runSbx(srv, ['vm', 'create', 'Not_A_Valid_Name']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^sbx: INVALID_VM_NAME: /);

    const name = vmName('dup');
    const first = await runSbx(srv, ['vm', 'create', name, '--no-start', '--no-wait', '--json']);
    assert.equal(first.code, 0, first.stderr);
    const op = (JSON.parse(first.stdout) as { operation: Op }).operation;
    const dup = await runSbx(srv, ['vm', 'create', name, '--no-wait']);
    assert.equal(dup.code, 4, dup.stderr);
    assert.match(dup.stderr, /^sbx: (VM_ALREADY_EXISTS|VM_BUSY): /);
    await sbxJson(srv, ['ops', 'wait', op.id]);
    assert.equal((await runSbx(srv, ['vm', 'delete', name, '--force', '--delete-disk'])).code, 0);
  });

  test('on a terminal, create shows one progress line with a percentage and colours the result', async () => {
    const name = vmName('tty');
    const term = runSbxInPty(srv, ['vm', 'create', name, '--no-start']);
    assert.equal(await term.waitExit(DEADLINE_MS.agent), 0, term.output());
    const shown = term.output();
    // The progress line is redrawn in place (CR + erase line), with a bar.
    // eslint-disable-next-line no-control-regex
    assert.match(shown, /\r\u001b\[2Kvm_create agent-cli-tty-\w+ {2}.*\d+% \[[#-]{24}\]/);
    assert.match(shown, new RegExp(`VM ${name} created`));
    const list = runSbxInPty(srv, ['vm', 'list', '--prefix', name]);
    await list.waitExit();
    // eslint-disable-next-line no-control-regex
    assert.match(list.output(), /\u001b\[1mNAME/, 'headers are bold on a terminal');
    const plain = runSbxInPty(srv, ['vm', 'list', '--prefix', name], { env: { NO_COLOR: '1' } });
    await plain.waitExit();
    assert.ok(!plain.output().includes('\u001b['), 'NO_COLOR turns colour off');
    assert.equal((await runSbx(srv, ['vm', 'delete', name, '--force', '--delete-disk'])).code, 0);
  });
});
