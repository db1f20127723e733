/**
 * Loadouts on qemu hosts, sandboxd's side (src/vms/provisioner.ts, src/loadouts/apply.ts): a VM
 * of a cloud-init base image gets its loadout in its seed (files under the agent's workspace,
 * packages, the environment file its agent unit reads), kept in <vm>/loadout.json so a
 * deploy-agent writes the same again; a VM of a built image (fw_cfg) cannot take one and its
 * create fails with PROVISIONING_ERROR, leaving no definition. The hypervisor is the qemu-driver
 * stand-in (as in provisioner-ssh.test.ts); the CA, qemu-img and the files are real.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { parse } from 'yaml';
import type { CreateParams } from '../../../actors/protocol/vm-frames.js';
import { applyMaterialFile } from '../../../src/core/loadout-apply.js';
import type { HypervisorPort } from '../../../src/hypervisor/port.js';
import { ensureCa, type CaMaterial } from '../../../src/identity/ca.js';
import { provisioningMaterial } from '../../../src/loadouts/apply.js';
import { parseLoadout } from '../../../src/loadouts/loadout-record.js';
import type { LocalAgentSupervisor } from '../../../src/vms/local-agents.js';
import { LOADOUT_FW_CFG } from '../../../src/vms/fw-cfg.js';
import { LOADOUT_LABEL, Provisioner } from '../../../src/vms/provisioner.js';
import { fakeBuiltImage, QemuStandIn } from '../../support/qemu-stand-in.js';

const LOADOUT = parseLoadout(
  'metadata: {name: tools}\npackages: [jq]\nenvironment: {TOOLS_HOME: /opt/tools}\nfiles: [{path: notes/readme.txt, content: "hi\\n", mode: "0640"}]\n',
  'tools',
  0,
);

const params = (uuid: string): CreateParams => ({
  uuid,
  vcpus: 1,
  memoryMiB: 256,
  diskGiB: 1,
  profile: 'basic',
  agentshare: false,
  start: false,
  sshKeys: [],
  loadout: 'tools',
});

void describe('loadouts on qemu hosts', () => {
  let dir: string;
  let ca: CaMaterial;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-prov-loadout-'));
    ca = await ensureCa({ secretsDir: join(dir, 'secrets'), trustDomain: 'sandbox.local' });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function provisioner(hv: QemuStandIn, state: string, baseImage: string): Provisioner {
    return new Provisioner({
      hypervisor: hv as unknown as HypervisorPort,
      stateDir: state,
      caProvider: () => Promise.resolve(ca),
      localAgents: {} as LocalAgentSupervisor,
      agents: { byVm: () => null },
      qemu: { baseImage, network: 'default', agentServer: '192.168.122.1:8120' },
      writeBudgetMs: 30_000,
      logger: pino({ level: 'silent' }),
      loadoutMaterial: (loadout) => (loadout === 'tools' ? provisioningMaterial(LOADOUT, { PROFILE_SET: '1' }) : null),
    });
  }

  test('a cloud-init VM carries its loadout in its seed; the copy is kept for deploy-agent', async () => {
    const base = join(dir, 'base.qcow2');
    await promisify(execFile)('qemu-img', ['create', '-q', '-f', 'qcow2', base, '1G']);
    const hv = new QemuStandIn();
    const state = join(dir, 'state-ci');
    const p = provisioner(hv, state, base);
    await p.define('agent-lo1', params('11111111-1111-4111-8111-111111111111'), AbortSignal.timeout(30_000));
    assert.equal(hv.specs.get('agent-lo1')?.metadata?.labels?.[LOADOUT_LABEL], 'tools');
    const userData = await readFile(join(state, 'vms', 'agent-lo1', 'cloud-init', 'user-data'), 'utf8');
    const cfg = parse(userData.replace(/^#cloud-config\n/, '')) as {
      write_files: { path: string; content: string; permissions: string }[];
      packages?: string[];
      runcmd: string[][];
    };
    const file = cfg.write_files.find((f) => f.path === '/home/agent/workspace/notes/readme.txt');
    assert.deepEqual([file?.content, file?.permissions], ['hi\n', '0640']);
    assert.deepEqual(cfg.packages, ['jq']);
    assert.equal(
      cfg.write_files.find((f) => f.path === '/etc/sandbox-agent/loadout.env')?.content,
      'TOOLS_HOME="/opt/tools"\nPROFILE_SET="1"\n',
    );
    assert.ok(cfg.runcmd.some((c) => c.join(' ') === 'chown -R agent:agent /home/agent/workspace'));
    const kept = JSON.parse(await readFile(join(state, 'vms', 'agent-lo1', 'loadout.json'), 'utf8')) as { loadout: string };
    assert.equal(kept.loadout, 'tools');
  });

  test('a built-image VM gets its loadout by fw_cfg; the guest agent applies it once per material, never outside its work directory', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-built');
    const p = provisioner(hv, state, await fakeBuiltImage(dir, 'debian'));
    await p.define('agent-lo2', params('22222222-2222-4222-8222-222222222222'), AbortSignal.timeout(30_000));
    const fwFile = join(state, 'vms', 'agent-lo2', 'fwcfg', LOADOUT_FW_CFG);
    assert.equal(
      hv.specs.get('agent-lo2')?.qemu?.fwCfgFiles?.[`opt/sandboxd/${LOADOUT_FW_CFG}`],
      fwFile,
      'the domain hands the file to the guest',
    );
    const material = JSON.parse(await readFile(fwFile, 'utf8')) as { loadout: string; environment: Record<string, string> };
    assert.equal(material.loadout, 'tools');
    assert.deepEqual(material.environment, { TOOLS_HOME: '/opt/tools', PROFILE_SET: '1' });

    // What the guest agent does with it at start (--loadout-file), on a work directory of its own.
    const work = join(dir, 'guest-work');
    await mkdir(work);
    const first = await applyMaterialFile(fwFile, work, { pathEnv: '', dpkgStatusFile: join(dir, 'no-dpkg') });
    assert.deepEqual(first?.material.environment, { TOOLS_HOME: '/opt/tools', PROFILE_SET: '1' });
    assert.deepEqual(first?.applied?.packages.missing, ['jq'], 'packages are reported, never installed');
    const readme = join(work, 'notes', 'readme.txt');
    assert.equal(await readFile(readme, 'utf8'), 'hi\n');
    assert.equal((await stat(readme)).mode & 0o777, 0o640);
    // A restart: the same material is not written again over what the VM's commands changed.
    await writeFile(readme, 'edited\n');
    const again = await applyMaterialFile(fwFile, work, { pathEnv: '' });
    assert.equal(again?.applied, null);
    assert.equal(await readFile(readme, 'utf8'), 'edited\n');
    // Other material (a redeploy with a changed loadout) is applied; a symbolic link a command left
    // in the work directory is not followed out of it.
    const outside = join(dir, 'outside');
    await mkdir(outside);
    await rm(join(work, 'notes'), { recursive: true });
    await symlink(outside, join(work, 'notes'));
    const changed = join(dir, 'changed.json');
    await writeFile(
      changed,
      JSON.stringify({ ...material, packages: [], tools: [], files: [{ path: 'notes/readme.txt', content: 'x', mode: 0o644 }] }),
    );
    await assert.rejects(applyMaterialFile(changed, work, { pathEnv: '' }), /not a directory/);
    assert.deepEqual(await readdir(outside), [], 'nothing written through the link');
    // Material that names a path out of the work directory is refused whole.
    await writeFile(changed, JSON.stringify({ ...material, files: [{ path: '../escape', content: 'x', mode: 0o644 }] }));
    await assert.rejects(applyMaterialFile(changed, work, { pathEnv: '' }), /outside the work directory/);
    // No loadout: an empty file (every built-image VM lists one).
    await writeFile(changed, '');
    assert.equal(await applyMaterialFile(changed, work, { pathEnv: '' }), null);
  });
});
