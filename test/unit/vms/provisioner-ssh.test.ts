/**
 * SSH for qemu guests, sandboxd's side (src/vms/provisioner.ts): which VMs get the SSH fw_cfg
 * files (a `debian` image VM created while SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH is set), what
 * is in them, and the SSH endpoint the connector is given for each VM. The hypervisor is a
 * stand-in for libvirt's qemu driver (define/get/list/undefine over DomainInfo, as the port
 * reports a qemu:///system domain); the CA, the agent certificate, qemu-img and the files are real.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import pino from 'pino';
import type { CreateParams } from '../../../actors/protocol/vm-frames.js';
import type { DomainSpec, HypervisorPort } from '../../../src/hypervisor/port.js';
import { qemuDomainXml } from '../../../src/hypervisor/libvirt/domain-xml.js';
import { fakeBuiltImage, QemuStandIn } from '../../support/qemu-stand-in.js';
import { ensureCa, type CaMaterial } from '../../../src/identity/ca.js';
import type { LocalAgentSupervisor } from '../../../src/vms/local-agents.js';
import { GATEWAY_SSH_LABEL, Provisioner, type GatewaySshOptions } from '../../../src/vms/provisioner.js';

const execFileAsync = promisify(execFile);

const params = (uuid: string): CreateParams => ({
  uuid,
  vcpus: 1,
  memoryMiB: 512,
  diskGiB: 1,
  profile: 'basic',
  agentshare: false,
  start: false,
  sshKeys: [],
});

void describe('qemu guests and SSH: fw_cfg files and endpoints', () => {
  let dir: string;
  let ca: CaMaterial;
  let caPub: string;
  let ssh: GatewaySshOptions;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-prov-ssh-'));
    ca = await ensureCa({ secretsDir: join(dir, 'secrets'), trustDomain: 'sandbox.local' });
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ssh-ca', '-f', join(dir, 'ssh-ca')]);
    caPub = await readFile(join(dir, 'ssh-ca.pub'), 'utf8');
    ssh = { caPublicKeyPath: join(dir, 'ssh-ca.pub'), user: 'dev', principals: ['ops', 'dev'] };
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const image = (kind: 'debian' | 'minimal'): Promise<string> => fakeBuiltImage(dir, kind);

  function provisioner(hv: QemuStandIn, state: string, baseImage: string, gatewaySsh: GatewaySshOptions | null): Provisioner {
    return new Provisioner({
      hypervisor: hv as unknown as HypervisorPort,
      stateDir: state,
      caProvider: () => Promise.resolve(ca),
      localAgents: {} as LocalAgentSupervisor,
      agents: { byVm: () => null },
      qemu: { baseImage, network: 'sandboxd-iso', agentServer: '192.168.213.1:8120' },
      writeBudgetMs: 30_000,
      logger: pino({ level: 'silent' }),
      gatewaySsh,
    });
  }

  const signal = (): AbortSignal => AbortSignal.timeout(30_000);

  void test('a debian VM created with the SSH CA: its domain lists the SSH fw_cfg files, written with the CA line, user and principals', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-a');
    const p = provisioner(hv, state, await image('debian'), ssh);
    await p.define('vm-a', params('11111111-1111-4111-8111-111111111111'), signal());
    const spec = hv.specs.get('vm-a');
    assert.ok(spec !== undefined);
    assert.equal(spec.metadata?.labels?.[GATEWAY_SSH_LABEL], 'ca');
    const xml = qemuDomainXml(spec, 'qemu');
    for (const n of ['ssh-ca.pub', 'ssh-user', 'ssh-principals'])
      assert.ok(xml.includes(`<entry name='opt/sandboxd/${n}' file='${join(state, 'vms', 'vm-a', 'fwcfg', n)}'/>`), n);
    const fw = join(state, 'vms', 'vm-a', 'fwcfg');
    assert.equal(await readFile(join(fw, 'ssh-ca.pub'), 'utf8'), `${caPub.trim().split(' ').slice(0, 2).join(' ')}\n`);
    assert.equal(await readFile(join(fw, 'ssh-user'), 'utf8'), 'dev\n');
    assert.equal(await readFile(join(fw, 'ssh-principals'), 'utf8'), 'ops\ndev\n');
    for (const n of ['ssh-ca.pub', 'ssh-user', 'ssh-principals']) assert.equal((await stat(join(fw, n))).mode & 0o777, 0o600, n);
    // Not a running VM yet: no endpoint, and the connector is told why.
    assert.deepEqual(await p.sshEndpoint('vm-a'), { none: "VM 'vm-a' is stopped" });
    hv.states.set('vm-a', 'running');
    const ip = spec.metadata?.ipAddress;
    assert.match(ip ?? '', /^192\.168\.213\.\d+$/);
    // By name and by instance id: the guest's static address, port 22.
    assert.deepEqual(await p.sshEndpoint('vm-a'), { host: ip, port: 22 });
    assert.deepEqual(await p.sshEndpoint('11111111-1111-4111-8111-111111111111'), { host: ip, port: 22 });
    assert.equal(await p.sshEndpoint('vm-nope'), null);
  });

  void test('without the SSH CA nothing SSH-related is listed or written; the VM has no endpoint', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-b');
    const p = provisioner(hv, state, await image('debian'), null);
    await p.define('vm-b', params('22222222-2222-4222-8222-222222222222'), signal());
    const spec = hv.specs.get('vm-b') as DomainSpec;
    assert.equal(spec.metadata?.labels?.[GATEWAY_SSH_LABEL], undefined);
    assert.doesNotMatch(qemuDomainXml(spec, 'qemu'), /opt\/sandboxd\/ssh-/);
    assert.deepEqual((await readdir(join(state, 'vms', 'vm-b', 'fwcfg'))).sort(), [
      'agent-key.pem',
      'agent.env',
      'agent.pem',
      'ca.pem',
      'loadout.json',
    ]);
    hv.states.set('vm-b', 'running');
    const e = await p.sshEndpoint('vm-b');
    assert.ok(e !== null && 'none' in e && /SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH/.test(e.none), JSON.stringify(e));
  });

  void test('a minimal-image VM gets no SSH files even with the CA set, and its refusal says why', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-c');
    const p = provisioner(hv, state, await image('minimal'), ssh);
    await p.define('vm-c', params('33333333-3333-4333-8333-333333333333'), signal());
    assert.doesNotMatch(qemuDomainXml(hv.specs.get('vm-c') as DomainSpec, 'qemu'), /opt\/sandboxd\/ssh-/);
    assert.ok(!(await readdir(join(state, 'vms', 'vm-c', 'fwcfg'))).some((f) => f.startsWith('ssh')));
    hv.states.set('vm-c', 'running');
    assert.deepEqual(await p.sshEndpoint('vm-c'), { none: "VM 'vm-c' runs the minimal image, which has no sshd (use the debian image)" });
  });

  void test('re-provisioned after SSH was switched off: the listed files are emptied (the guest leaves sshd off), and no endpoint', async () => {
    const hv = new QemuStandIn();
    const state = join(dir, 'state-d');
    const base = await image('debian');
    await provisioner(hv, state, base, ssh).define('vm-d', params('44444444-4444-4444-8444-444444444444'), signal());
    hv.states.set('vm-d', 'running');
    // sandboxd restarted without the variable; deploy-agent writes the fw_cfg files again, then power-cycles.
    const off = provisioner(hv, state, base, null);
    assert.equal((await off.agentUp('vm-d', true, signal())).state, 'running');
    const fw = join(state, 'vms', 'vm-d', 'fwcfg');
    for (const n of ['ssh-ca.pub', 'ssh-user', 'ssh-principals']) assert.equal(await readFile(join(fw, n), 'utf8'), '', n);
    const e = await off.sshEndpoint('vm-d');
    assert.ok(e !== null && 'none' in e && /started without SSH/.test(e.none), JSON.stringify(e));
  });
});
