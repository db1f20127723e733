/**
 * sbx celld against the real server (libvirt test driver, Celld enabled): status, validate (exit 2
 * when invalid), preflight, a start command through stdin that waits for its outcome, the same
 * document again answered from the ledger, the outcome read of a command and of one never sent
 * (exit 3), and plan-upgrade.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AGENT_VERSION } from '../../src/guest-agent/version.js';
import type { CellCommandRecord, CelldStatus, UpgradePlan } from '../../src/wire/celld.js';
import { runSbx, sbxJson, startCliServer, vmName, type CliServer } from './cli-harness.js';

const CELL = 'cli-cell';
let srv: CliServer;
before(async () => {
  srv = await startCliServer({ SVC_CELLD_ENABLED: '1', SVC_CELLD_CELL_ID: CELL });
});
after(async () => {
  await srv?.stop();
});

describe('sbx celld', () => {
  test('status, validate, preflight, command, its replay, outcome and plan-upgrade', async () => {
    const vm = vmName('cli-celld');
    await srv.server.hypervisor.define({ name: vm, vcpus: 1, memoryMiB: 128 });

    const st = await sbxJson<CelldStatus>(srv, ['celld', 'status']);
    assert.deepEqual([st.cell_id, st.backend, st.enabled], [CELL, 'libvirt', true]);
    const human = await runSbx(srv, ['celld', 'status']);
    assert.match(human.stdout, /cell\s+cli-cell \(libvirt\)/);

    const bad = await runSbx(srv, ['celld', 'validate', '-f', '-'], { stdin: '{"schema_version":"sandboxd.celld-command/v1"}' });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stdout, /\/operation_id: must match/);

    const doc = JSON.stringify({
      schema_version: 'sandboxd.celld-command/v1',
      operation_id: 'cli-start-1',
      cell_id: CELL,
      action: 'start',
      targets: [vm],
    });
    const pf = await runSbx(srv, ['celld', 'preflight', '-f', '-'], { stdin: doc });
    assert.equal(pf.code, 0, pf.stdout + pf.stderr);
    assert.match(pf.stdout, /targets\s+pass/);

    const done = await sbxJson<CellCommandRecord>(srv, ['celld', 'command', CELL, '-f', '-'], { stdin: doc });
    assert.equal(done.status, 'succeeded');
    assert.equal((await srv.server.hypervisor.get(vm))?.state, 'running');
    const again = await runSbx(srv, ['celld', 'command', CELL, '-f', '-'], { stdin: doc });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /accepted before: this is its stored answer/);

    const read = await sbxJson<CellCommandRecord>(srv, ['celld', 'outcome', CELL, 'cli-start-1']);
    assert.deepEqual(read.outcome, { action: 'start', effects: [{ vm, outcome: 'changed', state: 'running' }] });
    const never = await runSbx(srv, ['celld', 'outcome', CELL, 'cli-never-sent']);
    assert.equal(never.code, 3);
    assert.match(never.stderr, /celld\.command_not_found/);

    const plan = await sbxJson<UpgradePlan>(srv, ['celld', 'plan-upgrade', AGENT_VERSION]);
    assert.equal(plan.kind, 'none');
  });
});
