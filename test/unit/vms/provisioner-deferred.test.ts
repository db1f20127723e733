/**
 * Deferred enrollment for qemu guests, sandboxd's side (src/vms/provisioner.ts, fw-cfg.ts): a
 * deferred VM of the minimal image is defined with no certificate and a fixed-size bootstrap
 * fw_cfg placeholder its agent waits on, its agent is not awaited, a deferred VM of the debian
 * image gets its identity at boot, and the address of a checkpointed VM (its folder without a
 * domain) is not handed out again, also by a sandboxd started afresh. The hypervisor is a
 * stand-in for libvirt's qemu driver (as in provisioner-ssh.test.ts); the CA, qemu-img and the
 * files are real. The guest's side, end to end: realvm-checkpoint.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import type { CreateParams } from '../../../actors/protocol/vm-frames.js';
import type { DomainSpec, HypervisorPort } from '../../../src/hypervisor/port.js';
import { qemuDomainXml } from '../../../src/hypervisor/libvirt/domain-xml.js';
import { fakeBuiltImage, QemuStandIn } from '../../support/qemu-stand-in.js';
import { ensureCa, type CaMaterial } from '../../../src/identity/ca.js';
import type { LocalAgentSupervisor } from '../../../src/vms/local-agents.js';
import { BOOTSTRAP_FW_CFG_BYTES } from '../../../src/vms/fw-cfg.js';
import { ENROLLMENT_LABEL, Provisioner } from '../../../src/vms/provisioner.js';

const params = (uuid: string, deferred: boolean): CreateParams => ({
  uuid,
  vcpus: 1,
  memoryMiB: 256,
  diskGiB: 1,
  profile: 'basic',
  agentshare: false,
  start: false,
  sshKeys: [],
  ...(deferred && { enrollment: 'deferred' as const }),
});

void describe('qemu guests with deferred enrollment: fw_cfg files, agent, addresses', () => {
  let dir: string;
  let ca: CaMaterial;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-prov-deferred-'));
    ca = await ensureCa({ secretsDir: join(dir, 'secrets'), trustDomain: 'sandbox.local' });
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const image = (kind: 'debian' | 'minimal'): Promise<string> => fakeBuiltImage(dir, kind);

  function provisioner(hv: QemuStandIn, state: string, baseImage: string): Provisioner {
    return new Provisioner({
      hypervisor: hv as unknown as HypervisorPort,
      stateDir: state,
      caProvider: () => Promise.resolve(ca),
      localAgents: {} as LocalAgentSupervisor,
      agents: { byVm: () => null },
      qemu: { baseImage, network: 'sandboxd-iso', agentServer: '192.168.213.1:8120' },
      writeBudgetMs: 30_000,
      logger: pino({ level: 'silent' }),
    });
  }

  const signal = (): AbortSignal => AbortSignal.timeout(30_000);

  void test('a minimal-image VM: no certificate, SBX_ENROLLMENT=deferred, an 8 KiB bootstrap placeholder listed for QEMU, and no agent to wait for', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-a');
    const p = provisioner(hv, state, await image('minimal'));
    await p.define('vm-a', params('11111111-1111-4111-8111-111111111111', true), signal());
    const spec = hv.specs.get('vm-a') as DomainSpec;
    assert.equal(spec.metadata?.labels?.[ENROLLMENT_LABEL], 'deferred');
    const fw = join(state, 'vms', 'vm-a', 'fwcfg');
    assert.ok(qemuDomainXml(spec, 'qemu').includes(`<entry name='opt/sandboxd/bootstrap.json' file='${join(fw, 'bootstrap.json')}'/>`));
    for (const f of ['ca.pem', 'agent.pem', 'agent-key.pem']) assert.equal(await readFile(join(fw, f), 'utf8'), '', f);
    assert.match(await readFile(join(fw, 'agent.env'), 'utf8'), /^SBX_ENROLLMENT=deferred$/m);
    const placeholder = await readFile(join(fw, 'bootstrap.json'), 'utf8');
    assert.equal(Buffer.byteLength(placeholder), BOOTSTRAP_FW_CFG_BYTES);
    assert.equal(placeholder.trim(), '{}');
    assert.equal((await stat(join(fw, 'bootstrap.json'))).mode & 0o777, 0o600);
    await assert.rejects(stat(join(state, 'vms', 'vm-a', 'certs', 'agent.pem')), 'no certificate was issued for it');
    hv.states.set('vm-a', 'running');
    assert.equal((await p.agentUp('vm-a', false, signal())).agentMode, 'deferred');
  });

  void test('a debian-image VM asked for deferred enrollment gets its identity at boot (its guest does not wait)', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-b');
    const p = provisioner(hv, state, await image('debian'));
    await p.define('vm-b', params('22222222-2222-4222-8222-222222222222', true), signal());
    const fw = join(state, 'vms', 'vm-b', 'fwcfg');
    assert.deepEqual((await readdir(fw)).sort(), ['agent-key.pem', 'agent.env', 'agent.pem', 'ca.pem', 'loadout.json']);
    assert.match(await readFile(join(fw, 'agent.pem'), 'utf8'), /BEGIN CERTIFICATE/);
    assert.doesNotMatch(await readFile(join(fw, 'agent.env'), 'utf8'), /SBX_ENROLLMENT/);
  });

  void test("a checkpointed VM's address (its folder, no domain) is not handed out again, also after a restart", async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-c');
    const base = await image('minimal');
    await provisioner(hv, state, base).define('vm-c', params('33333333-3333-4333-8333-333333333333', true), signal());
    const saved = hv.specs.get('vm-c')?.metadata?.ipAddress;
    assert.match(saved ?? '', /^192\.168\.213\.\d+$/);
    await hv.undefine('vm-c'); // what a checkpoint does: the image holds the VM, its folder stays
    const fresh = provisioner(hv, state, base); // a sandboxd started afresh: nothing held in memory
    await fresh.define('vm-d', params('44444444-4444-4444-8444-444444444444', false), signal());
    const next = hv.specs.get('vm-d')?.metadata?.ipAddress;
    assert.ok(next !== undefined && next !== saved, `${String(next)} was the checkpointed guest's`);
  });
});
