/**
 * sbx loadout / sbx profile against the whole server (DEFAULT_COMPONENTS, libvirt test driver,
 * local agents): a loadout created from a YAML file and listed; a profile created, updated (the
 * revision it read goes with it), used by `sbx vm create --profile`, refused deletion while its VM
 * exists and deleted afterwards; a second create of the loadout is a clean error naming the code.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { StartupProfileJson } from '../../src/wire/profiles.js';
import { runSbx, sbxJson, startCliServer, vmName, type CliServer } from './cli-harness.js';

let srv: CliServer;
let dir: string;
before(async () => {
  srv = await startCliServer();
  dir = await mkdtemp(join(tmpdir(), 'sbx-profiles-'));
});
after(async () => {
  await srv?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('sbx profile and sbx loadout', () => {
  test('loadout create/list/get, profile create/update/list, vm create --profile, delete refused while bound', async () => {
    const file = join(dir, 'cli-tools.yaml');
    await writeFile(file, 'metadata: {name: cli-tools, description: from sbx}\nenvironment: {CLI_MARK: yes-it-is}\n');
    const created = await sbxJson<Record<string, unknown>>(srv, ['loadout', 'create', 'cli-tools', '-f', file]);
    assert.deepEqual([created['name'], created['environment']], ['cli-tools', { CLI_MARK: 'yes-it-is' }]);
    const again = await runSbx(srv, ['loadout', 'create', 'cli-tools', '-f', file]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /loadout\.exists/);
    assert.match((await runSbx(srv, ['loadout', 'ls'])).stdout, /cli-tools\s+0\s+0\s+1\s+from sbx/);

    const p = await sbxJson<StartupProfileJson>(srv, [
      'profile',
      'create',
      'cli-small',
      '--vcpus',
      '1',
      '--memory-mb',
      '512',
      '--disk-gb',
      '2',
      '--loadout',
      'cli-tools',
      '--env',
      'A=1',
    ]);
    assert.deepEqual([p.vcpus, p.memory_mb, p.loadout, p.agent.env, p.revision], [1, 512, 'cli-tools', { A: '1' }, 1]);
    const u = await sbxJson<StartupProfileJson>(srv, ['profile', 'update', 'cli-small', '--memory-mb', '640']);
    assert.deepEqual(
      [u.vcpus, u.memory_mb, u.loadout, u.agent.env, u.revision],
      [1, 640, 'cli-tools', { A: '1' }, 2],
      'the flags over what it held',
    );
    assert.match((await runSbx(srv, ['profile', 'ls'])).stdout, /cli-small\s+1\s+640\s+2\s+cli-tools\s+2/);

    const vm = vmName('cli-prof');
    const op = await sbxJson<{ status: string }>(srv, ['vm', 'create', vm, '--profile', 'cli-small']);
    assert.equal(op.status, 'completed');
    const d = await srv.server.hypervisor.get(vm);
    assert.deepEqual([d?.vcpus, d?.memoryMiB, d?.metadata.labels?.['sandboxd/loadout']], [1, 640, 'cli-tools']);

    const refused = await runSbx(srv, ['profile', 'rm', 'cli-small']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /profile\.in_use/);
    assert.equal((await runSbx(srv, ['vm', 'delete', vm, '--force', '--delete-disk'])).code, 0);
    const deleted = await runSbx(srv, ['profile', 'delete', 'cli-small']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /startup profile cli-small deleted/);
  });
});
