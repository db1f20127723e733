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
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { parse } from 'yaml';
import type { CreateParams } from '../../../actors/protocol/vm-frames.js';
import { SvcError } from '../../../src/core/errors.js';
import type { HypervisorPort } from '../../../src/hypervisor/port.js';
import { ensureCa, type CaMaterial } from '../../../src/identity/ca.js';
import { provisioningMaterial } from '../../../src/loadouts/apply.js';
import { parseLoadout } from '../../../src/loadouts/loadout-record.js';
import type { LocalAgentSupervisor } from '../../../src/vms/local-agents.js';
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

  test('a built-image VM cannot take a loadout: PROVISIONING_ERROR, and its definition is removed', async () => {
    const hv = new QemuStandIn();
    const p = provisioner(hv, join(dir, 'state-built'), await fakeBuiltImage(dir, 'debian'));
    await assert.rejects(
      p.define('agent-lo2', params('22222222-2222-4222-8222-222222222222'), AbortSignal.timeout(30_000)),
      (e: unknown) => e instanceof SvcError && e.code === 'PROVISIONING_ERROR' && /built images/.test(e.message),
    );
    assert.equal(hv.specs.has('agent-lo2'), false);
  });
});
