/**
 * Startup profiles and loadouts on real parts (README "Startup profiles and loadouts"): a real
 * sandboxd on the libvirt test driver with its local sandbox-agent processes, SQLite stores and
 * the idempotency middleware. A loadout is created from YAML (create-only, its name checked, no
 * secrets), listed in the reference dashboard's shape; a profile naming it is created with an
 * Idempotency-Key (the replay answers the stored response); a VM created with the profile gets
 * the profile's vcpus and memory in its libvirt domain and, read back through the agent's Exec
 * path, the loadout's file and the environment; the profile cannot be deleted while the VM
 * exists, and can afterwards; updates need the current revision; everything survives a restart.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { AgentCommandClient } from '../../src/agent-link/command-client.js';
import type { Config } from '../../src/config/schema.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import { loadoutsComponent } from '../../src/loadouts/component.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { runCommandForMcp } from '../../src/mcp/run-command.js';
import { profilesComponent } from '../../src/profiles/component.js';
import type { Component } from '../../src/component/component.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName, vmServerComponents } from './vms-harness.js';

type Json = Record<string, unknown>;

const components = (): Component[] => vmServerComponents({ afterVms: [loadoutsComponent, profilesComponent] });

const LOADOUT = `apiVersion: sandboxd.loadout/v1
kind: Loadout
metadata:
  name: dev-tools
  description: shell tooling
  labels: {category: development}
packages: [coreutils, no-such-package-here]
tools: [sh, no-such-tool-here]
environment:
  LOADOUT_GREETING: hello from the loadout
  EDITOR: vi
files:
  - path: .config/dev-tools/settings.toml
    content: "color = true\\n"
    mode: "0600"
`;

describe('startup profiles and loadouts', () => {
  let dir: string;
  let config: Config;
  let server: ServerHandle;

  const req = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<InjectResponse> =>
    inject(server.router, { method, url, headers, ...(body !== undefined ? { body } : {}) });
  const yaml = (url: string, text: string): Promise<InjectResponse> =>
    inject(server.router, { method: 'POST', url, headers: { 'content-type': 'application/yaml' }, body: text });
  const codeOf = (r: InjectResponse): string => String(((r.json() as Json)['error'] as Json | undefined)?.['code']);

  async function createVm(body: Json): Promise<Json> {
    const r = await req('POST', '/api/v1/vms', body);
    assert.equal(r.status, 202, r.text);
    const id = (r.json() as { operation: { id: string } }).operation.id;
    return waitFor(
      `create of ${String(body['name'])}`,
      async () => {
        const o = (await req('GET', `/api/v1/operations/${id}`)).json() as Json;
        return o['status'] === 'completed' || o['status'] === 'failed' ? o : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
    );
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-profiles-'));
    config = loopbackConfig(dir, { SVC_ACTORS: 'inline', SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000' });
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('loadouts: create-only from YAML, metadata.name is the key, no secrets, listed in the reference shape', async () => {
    const created = await yaml('/api/v2/loadouts/dev-tools', LOADOUT);
    assert.equal(created.status, 201, created.text);
    const l = created.json() as Json;
    assert.equal(l['name'], 'dev-tools');
    assert.deepEqual(l['tools'], ['sh', 'no-such-tool-here']);
    assert.deepEqual((l['files'] as Json[])[0], {
      path: '.config/dev-tools/settings.toml',
      mode: '0600',
      size_bytes: 13,
      content: 'color = true\n',
    });

    const again = await yaml('/api/v2/loadouts/dev-tools', LOADOUT);
    assert.deepEqual([again.status, codeOf(again)], [409, 'loadout.exists']);
    const mismatch = await yaml('/api/v2/loadouts/other', LOADOUT);
    assert.deepEqual([mismatch.status, codeOf(mismatch)], [400, 'loadout.name_mismatch']);
    const secret = await yaml('/api/v2/loadouts/leaky', 'metadata: {name: leaky}\nenvironment: {GITHUB_TOKEN: abc}\n');
    assert.deepEqual([secret.status, codeOf(secret)], [400, 'loadout.secret_field']);
    assert.match(String(((secret.json() as Json)['error'] as Json)['message']), /environment\.GITHUB_TOKEN/);
    const escape = await yaml('/api/v2/loadouts/escape', 'metadata: {name: escape}\nfiles: [{path: ../../etc/x, content: y}]\n');
    assert.deepEqual([escape.status, codeOf(escape)], [400, 'loadout.invalid']);
    assert.equal((await req('GET', '/api/v2/loadouts/leaky')).status, 404, 'a refused loadout is not stored');

    const v1 = (await req('GET', '/api/v1/loadouts')).json() as { loadouts: Json[] };
    // `development` is not one of the reference picker's categories: left out, it files the loadout under Other.
    assert.deepEqual(v1.loadouts, [{ name: 'dev-tools', path: 'profiles/dev-tools.yaml', description: 'shell tooling' }]);
    const v2 = (await req('GET', '/api/v2/loadouts')).json() as { loadouts: Json[]; total: number };
    assert.equal(v2.total, 1);
    assert.equal(v2.loadouts[0]?.['document'], undefined, 'the list leaves the documents out');
  });

  test('a VM created with a profile gets its resources, its loadout files and environment; the profile is bound until the VM goes', async () => {
    const body = {
      name: 'small-dev',
      vcpus: 2,
      memory_mb: 1024,
      disk_gb: 3,
      loadout: 'dev-tools',
      agent: { agentshare: false, env: { PROFILE_MARK: 'from-profile', EDITOR: 'nano' } },
    };
    const key = { 'idempotency-key': `create-small-dev-${Date.now()}` };
    const created = await req('POST', '/api/v2/startup-profiles', body, key);
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers['etag'], '"1"');
    const replay = await req('POST', '/api/v2/startup-profiles', body, key);
    assert.equal(replay.status, 201, 'the replay answers the stored response, not profile.exists');
    assert.equal(replay.headers['idempotency-replayed'], 'true');
    assert.equal(replay.text, created.text);
    const dup = await req('POST', '/api/v2/startup-profiles', body);
    assert.deepEqual([dup.status, codeOf(dup)], [409, 'profile.exists']);
    const badLoadout = await req('POST', '/api/v2/startup-profiles', { ...body, name: 'x', loadout: 'nope' });
    assert.deepEqual([badLoadout.status, codeOf(badLoadout)], [400, 'loadout.unknown']);
    const badVcpus = await req('POST', '/api/v2/startup-profiles', { ...body, name: 'x', vcpus: 0 });
    assert.deepEqual([badVcpus.status, codeOf(badVcpus)], [400, 'profile.invalid']);
    assert.match(String(((badVcpus.json() as Json)['error'] as Json)['message']), /^vcpus/);

    const unknown = await req('POST', '/api/v1/vms', { name: uniqueName('pl'), profile: 'nope' });
    assert.deepEqual([unknown.status, codeOf(unknown)], [400, 'profile.unknown']);
    const unknownLoadout = await req('POST', '/api/v1/vms', { name: uniqueName('pl'), loadout: 'nope' });
    assert.deepEqual([unknownLoadout.status, codeOf(unknownLoadout)], [400, 'loadout.unknown']);
    // The reference dashboard's create body: its picker's value is the listed path.
    const refVm = uniqueName('ref');
    const refOp = await createVm({
      name: refVm,
      profile: '',
      loadout: 'profiles/dev-tools.yaml',
      vcpus: 1,
      memory_mb: 512,
      disk_gb: 2,
      agentshare: false,
      start: false,
    });
    assert.equal(refOp['status'], 'completed', JSON.stringify(refOp));
    assert.equal((await server.hypervisor.get(refVm))?.metadata.labels?.['sandboxd/loadout'], 'dev-tools');
    assert.equal((await req('DELETE', `/api/v1/vms/${refVm}?delete_disk=true`)).status, 200);

    const vm = uniqueName('prof');
    const op = await createVm({ name: vm, profile: 'small-dev' });
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    const domain = await server.hypervisor.get(vm);
    assert.deepEqual([domain?.vcpus, domain?.memoryMiB, domain?.metadata.profile], [2, 1024, 'small-dev']);
    assert.equal(domain?.metadata.labels?.['sandboxd/loadout'], 'dev-tools');
    assert.equal(domain?.metadata.labels?.['sandboxd/agentshare'], 'false');

    // Read back through the agent's Exec path.
    const agents = server.agents;
    const commands = new AgentCommandClient(server.service('actors'), agents);
    try {
      await waitFor(`agent of ${vm}`, () => agents.registry.get(vm)?.status === 'Ready' || null, { deadlineMs: DEADLINE_MS.endToEnd });
      const run = await runCommandForMcp(commands, agents.registry, {
        agentId: vm,
        command: 'sh',
        args: [
          '-c',
          'cat .config/dev-tools/settings.toml; stat -c %a .config/dev-tools/settings.toml; echo "$LOADOUT_GREETING|$PROFILE_MARK|$EDITOR"',
        ],
        cwd: '',
        env: {},
        timeoutSeconds: 30,
        maxOutputBytes: 4096,
        signal: AbortSignal.timeout(60_000),
      });
      assert.equal(run.exit_code, 0, run.stderr.text);
      assert.equal(run.stdout.text, 'color = true\n600\nhello from the loadout|from-profile|nano\n');
      const report = await runCommandForMcp(commands, agents.registry, {
        agentId: vm,
        command: 'cat',
        args: ['.sandboxd/loadout-report.json'],
        cwd: '',
        env: {},
        timeoutSeconds: 30,
        maxOutputBytes: 4096,
        signal: AbortSignal.timeout(60_000),
      });
      const r = JSON.parse(report.stdout.text) as Json;
      assert.deepEqual(r['tools'], { present: ['sh'], missing: ['no-such-tool-here'] });
      assert.deepEqual((r['packages'] as Json)['missing'], ['no-such-package-here']);
    } finally {
      commands.stop();
    }

    const refused = await req('DELETE', '/api/v2/startup-profiles/small-dev');
    assert.deepEqual([refused.status, codeOf(refused)], [409, 'profile.in_use']);
    const stale = await req('PUT', '/api/v2/startup-profiles/small-dev', { ...body, vcpus: 3 }, { 'if-match': '"7"' });
    assert.deepEqual([stale.status, codeOf(stale)], [409, 'profile.revision_mismatch']);
    const noRevision = await req('PUT', '/api/v2/startup-profiles/small-dev', { ...body, vcpus: 3 });
    assert.deepEqual([noRevision.status, codeOf(noRevision)], [400, 'profile.invalid']);
    const updated = await req('PUT', '/api/v2/startup-profiles/small-dev', { ...body, vcpus: 3, expected_revision: 1 });
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual([(updated.json() as Json)['revision'], (updated.json() as Json)['vcpus'], updated.headers['etag']], [2, 3, '"2"']);
    assert.equal((await server.hypervisor.get(vm))?.vcpus, 2, 'an update changes VMs created afterwards only');

    const builtin = await req('DELETE', '/api/v2/startup-profiles/svc-dev');
    assert.deepEqual([builtin.status, codeOf(builtin)], [409, 'profile.builtin']);

    assert.equal((await req('DELETE', `/api/v1/vms/${vm}?force=true&delete_disk=true`)).status, 200);
    const deleted = await req('DELETE', '/api/v2/startup-profiles/small-dev');
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await req('GET', '/api/v2/startup-profiles/small-dev')).status, 404);
  });

  test('explicit request fields override the profile; the profile cannot be deleted once a create naming it is accepted', async () => {
    assert.equal((await req('POST', '/api/v2/startup-profiles', { name: 'tiny', vcpus: 1, memory_mb: 512, disk_gb: 1 })).status, 201);
    const vm = uniqueName('over');
    const r = await req('POST', '/api/v1/vms', { name: vm, profile: 'tiny', memory_mb: 768 });
    assert.equal(r.status, 202, r.text);
    // From the moment the create is accepted: launching, then bound (profile-routes.test.ts tells the two apart).
    const launching = await req('DELETE', '/api/v2/startup-profiles/tiny');
    assert.deepEqual([launching.status, codeOf(launching)], [409, 'profile.in_use']);
    await server.vms.operations.waitFor((r.json() as { operation: { id: string } }).operation.id, { timeoutMs: DEADLINE_MS.endToEnd });
    const d = await server.hypervisor.get(vm);
    assert.deepEqual([d?.vcpus, d?.memoryMiB], [1, 768]);
    assert.equal((await req('DELETE', `/api/v1/vms/${vm}?force=true&delete_disk=true`)).status, 200);
    assert.equal((await req('DELETE', '/api/v2/startup-profiles/tiny')).status, 200);
  });

  test('profiles and loadouts survive a restart', async () => {
    assert.equal((await req('POST', '/api/v2/startup-profiles', { name: 'kept', loadout: 'dev-tools' })).status, 201);
    await server.stop();
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
    const p = (await req('GET', '/api/v2/startup-profiles/kept')).json() as Json;
    assert.deepEqual([p['loadout'], p['revision'], p['vcpus']], ['dev-tools', 1, 4]);
    const names = ((await req('GET', '/api/v2/startup-profiles')).json() as { startup_profiles: Json[] }).startup_profiles.map(
      (x) => x['name'],
    );
    assert.deepEqual(names, ['svc-dev', 'basic', 'kept']);
    assert.equal((await req('GET', '/api/v2/loadouts/dev-tools')).status, 200);
  });
});
