/**
 * The debian image's sshd provisioning (src/image/guest-ssh.ts), run for real: the setup script
 * the guest runs as root, here against plain files in place of the fw_cfg folder, /run and
 * /etc/ssh, with the files sandboxd writes (src/vms/fw-cfg.ts guestSshFiles); the sshd_config it
 * writes is checked line by line and by the host's own sshd (-t and -T).
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { DISABLED_UNITS, ENABLED_UNITS, debianGuestFiles } from '../../../src/image/debian-guest-files.js';
import { IMAGE_PACKAGES } from '../../../src/image/debian-packages.js';
import { bakedSshKeys, cleanRoot } from '../../../src/image/debian-rootfs.js';
import {
  FW_CFG_SSH_SETUP,
  FW_CFG_SSH_SETUP_PATH,
  GUEST_SSH_RUN_DIR,
  SANDBOXD_SSHD_UNIT,
  SSHD_UNIT_NAME,
  SSH_FW_CFG_MARKER,
  SSH_FW_CFG_NAMES,
  guestSshdConfig,
} from '../../../src/image/guest-ssh.js';
import { fwCfgFiles, guestSshFiles, sshPublicKeyLine, writeFwCfg } from '../../../src/vms/fw-cfg.js';

const execFileAsync = promisify(execFile);
/** A user that exists here, so the script creates none on this host. */
const USER = userInfo().username;

interface Run {
  code: number;
  stderr: string;
}

void describe('debian guest sshd provisioning', () => {
  let dir: string;
  let caLine: string;
  let caFile: string;
  let n = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-guest-ssh-'));
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'sandboxd test CA', '-f', join(dir, 'ca')]);
    caFile = await readFile(join(dir, 'ca.pub'), 'utf8');
    caLine = caFile.trim().split(' ').slice(0, 2).join(' ');
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A fresh guest: fw_cfg files (name → content, as <name>/raw like the kernel shows them), empty /run and /etc/ssh. */
  async function guest(files: Record<string, string>): Promise<{ fw: string; run: string; etc: string }> {
    const g = join(dir, `g${++n}`);
    const fw = join(g, 'fw');
    for (const [name, content] of Object.entries(files)) {
      await mkdir(join(fw, name), { recursive: true });
      await writeFile(join(fw, name, 'raw'), content);
    }
    await mkdir(fw, { recursive: true });
    return { fw, run: join(g, 'run', 'sandboxd-sshd'), etc: join(g, 'etc', 'ssh') };
  }

  function setup(g: { fw: string; run: string; etc: string }, ...args: string[]): Promise<Run> {
    return new Promise((resolve) => {
      execFile(
        'sh',
        ['-c', FW_CFG_SSH_SETUP, 'fw-cfg-ssh', ...args],
        { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', SANDBOXD_SSH_FW: g.fw, SANDBOXD_SSH_RUN: g.run, SANDBOXD_SSH_ETC: g.etc } },
        (err, _stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stderr }),
      );
    });
  }

  const sandboxdFiles = (principals: readonly string[] = ['ops', 'agent']): Record<string, string> =>
    Object.fromEntries(guestSshFiles({ caPublicKey: caFile, user: USER, principals }));

  void test('sandboxd writes the CA key line without its comment, the user and the principals, nothing else', () => {
    assert.deepEqual(guestSshFiles({ caPublicKey: `# the CA\n${caFile}\n`, user: 'agent', principals: ['ops', 'agent'] }), [
      ['ssh-ca.pub', `${caLine}\n`],
      ['ssh-user', 'agent\n'],
      ['ssh-principals', 'ops\nagent\n'],
    ]);
    // No principals: the user's own name.
    assert.equal(guestSshFiles({ caPublicKey: caFile, user: 'agent', principals: [] })[2]?.[1], 'agent\n');
    assert.deepEqual(
      SSH_FW_CFG_NAMES.map((x) => x),
      ['ssh-ca.pub', 'ssh-user', 'ssh-principals'],
    );
  });

  void test('a private key, two keys, a bad user or principal never become fw_cfg files', async () => {
    const priv = await readFile(join(dir, 'ca'), 'utf8');
    assert.throws(() => sshPublicKeyLine(priv), /private key/);
    assert.throws(() => sshPublicKeyLine(`${caFile}${caFile}`), /not one OpenSSH public key line/);
    assert.throws(() => sshPublicKeyLine('hello world\n'), /not one OpenSSH public key line/);
    assert.throws(() => guestSshFiles({ caPublicKey: caFile, user: 'root;id', principals: [] }), /not a user name/);
    assert.throws(() => guestSshFiles({ caPublicKey: caFile, user: 'agent', principals: ['a b'] }), /principal/);
    assert.throws(() => guestSshFiles({ caPublicKey: caFile, user: 'agent', principals: ['$(id)'] }), /principal/);
  });

  void test('the guest writes exactly this sshd_config, the CA key, a principals file per user and its own host key', async () => {
    const g = await guest(sandboxdFiles());
    const r = await setup(g);
    assert.equal(r.code, 0, r.stderr);
    const config = await readFile(join(g.run, 'sshd_config'), 'utf8');
    assert.equal(config, guestSshdConfig(USER, g.run, g.etc));
    const lines = config.split('\n');
    for (const want of [
      `TrustedUserCAKeys ${g.run}/ca.pub`,
      `AuthorizedPrincipalsFile ${g.run}/principals/%u`,
      'AuthorizedKeysFile none',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      `AllowUsers ${USER}`,
      `HostKey ${g.etc}/ssh_host_ed25519_key`,
      'Port 22',
    ])
      assert.ok(lines.includes(want), want);
    assert.equal(await readFile(join(g.run, 'ca.pub'), 'utf8'), `${caLine}\n`);
    assert.equal(await readFile(join(g.run, 'principals', USER), 'utf8'), 'ops\nagent\n');
    assert.deepEqual(await readdir(join(g.run, 'principals')), [USER]);
    const mode = async (p: string): Promise<string> => ((await stat(p)).mode & 0o777).toString(8);
    assert.equal(await mode(g.run), '755');
    assert.equal(await mode(join(g.run, 'principals')), '755');
    assert.equal(await mode(join(g.run, 'ca.pub')), '644');
    assert.equal(await mode(join(g.run, 'principals', USER)), '644');
    assert.equal(await mode(join(g.run, 'sshd_config')), '644');
    assert.equal(await mode(join(g.etc, 'ssh_host_ed25519_key')), '600');
    // Nothing private of sandboxd's: the only private key in the guest's files is the host key it made itself.
    for (const f of ['ca.pub', 'sshd_config', `principals/${USER}`])
      assert.doesNotMatch(await readFile(join(g.run, f), 'utf8'), /PRIVATE KEY/, f);
    assert.match(r.stderr, /made this VM's SSH host key/);

    // The host's sshd takes the file, and its effective settings are the ones meant.
    if (process.getuid?.() === 0) await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    execFileSync('/usr/sbin/sshd', ['-t', '-f', join(g.run, 'sshd_config')]);
    const effective = execFileSync('/usr/sbin/sshd', ['-T', '-f', join(g.run, 'sshd_config'), '-C', `user=${USER},host=h,addr=192.0.2.1`], {
      encoding: 'utf8',
    }).split('\n');
    for (const want of [
      'authorizedkeysfile none',
      'passwordauthentication no',
      'kbdinteractiveauthentication no',
      'pubkeyauthentication yes',
      `trustedusercakeys ${g.run}/ca.pub`,
      `authorizedprincipalsfile ${g.run}/principals/%u`,
      `allowusers ${USER}`,
    ])
      assert.ok(effective.includes(want), want);
  });

  void test('the host key is made once: a second boot keeps it', async () => {
    const g = await guest(sandboxdFiles());
    assert.equal((await setup(g)).code, 0);
    const first = await readFile(join(g.etc, 'ssh_host_ed25519_key.pub'), 'utf8');
    const r = await setup(g);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(g.etc, 'ssh_host_ed25519_key.pub'), 'utf8'), first);
    assert.doesNotMatch(r.stderr, /made this VM's SSH host key/);
  });

  void test('without the SSH files, or with an emptied CA, the unit is skipped and nothing is written', async () => {
    for (const files of [{}, { 'ssh-ca.pub': '', 'ssh-user': '', 'ssh-principals': '' }]) {
      const g = await guest(files);
      const r = await setup(g, 'check');
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /no SSH CA in fw_cfg: sshd stays off/);
      await assert.rejects(stat(g.run));
      await assert.rejects(stat(g.etc));
    }
    const g = await guest(sandboxdFiles());
    assert.equal((await setup(g, 'check')).code, 0);
  });

  void test('a hostile setting stops the setup with exit 2 before any sshd_config exists', async () => {
    const good = sandboxdFiles();
    const hostile: Record<string, string>[] = [
      { ...good, 'ssh-user': 'root;touch /tmp/pwned\n' },
      { ...good, 'ssh-user': '$(id)\n' },
      { ...good, 'ssh-user': '-oProxyCommand=x\n' },
      { ...good, 'ssh-principals': 'ops\n$(reboot)\n' },
      { ...good, 'ssh-principals': 'a,b\n' },
      { ...good, 'ssh-principals': '\n' },
      { ...good, 'ssh-ca.pub': `${caLine}\n${caLine}\n` },
      { ...good, 'ssh-ca.pub': `${caLine} a comment\n` },
      { ...good, 'ssh-ca.pub': 'ssh-ed25519 notbase64atall\n' },
      { ...good, 'ssh-ca.pub': await readFile(join(dir, 'ca'), 'utf8') },
      Object.fromEntries(Object.entries(good).filter(([k]) => k !== 'ssh-user')),
    ];
    for (const files of hostile) {
      const g = await guest(files);
      const r = await setup(g);
      assert.equal(r.code, 2, `${JSON.stringify(files)}: ${r.stderr}`);
      assert.match(r.stderr, /sshd stays off/);
      await assert.rejects(stat(join(g.run, 'sshd_config')));
    }
  });

  void test('the setup script is valid sh with no bash-only syntax', () => {
    execFileSync('sh', ['-n'], { input: FW_CFG_SSH_SETUP });
    assert.ok(FW_CFG_SSH_SETUP.startsWith('#!/bin/sh\n'));
    assert.ok(!/\[\[|\bfunction\b|\$\{[A-Za-z_]+\/\//.test(FW_CFG_SSH_SETUP));
  });

  void test('the unit runs sshd only with the fw_cfg SSH CA, after the setup and a config check', () => {
    const name = Object.keys(fwCfgFiles('/x', true)).find((k) => k.endsWith('/ssh-ca.pub'));
    assert.equal(SSH_FW_CFG_MARKER, `/sys/firmware/qemu_fw_cfg/by_name/${name}/raw`);
    const lines = SANDBOXD_SSHD_UNIT.split('\n');
    for (const want of [
      `ConditionPathExists=${SSH_FW_CFG_MARKER}`,
      `ExecCondition=${FW_CFG_SSH_SETUP_PATH} check`,
      `ExecStartPre=${FW_CFG_SSH_SETUP_PATH}`,
      `ExecStartPre=/usr/sbin/sshd -t -f ${GUEST_SSH_RUN_DIR}/sshd_config`,
      `ExecStart=/usr/sbin/sshd -D -f ${GUEST_SSH_RUN_DIR}/sshd_config`,
      'RuntimeDirectory=sshd',
      'WantedBy=multi-user.target',
    ])
      assert.ok(lines.includes(want), want);
    assert.ok(ENABLED_UNITS.includes(SSHD_UNIT_NAME));
    // Debian's own sshd never starts: it would read /etc/ssh/sshd_config, which trusts plain keys.
    assert.ok(DISABLED_UNITS.includes('ssh.service'));
    assert.ok(IMAGE_PACKAGES.includes('openssh-server'));
    const files = debianGuestFiles();
    assert.equal(files.find((f) => f.path === FW_CFG_SSH_SETUP_PATH)?.mode, 0o755);
    assert.equal(files.find((f) => f.path === `/usr/lib/systemd/system/${SSHD_UNIT_NAME}`)?.content, SANDBOXD_SSHD_UNIT);
    // Nothing baked: no key material and no authorized_keys among the files the image adds.
    for (const f of files) {
      assert.doesNotMatch(f.content, /PRIVATE KEY|ssh-ed25519 AAAA|ssh-rsa AAAA/, f.path);
      assert.ok(!f.path.includes('authorized_keys') && !f.path.includes('ssh_host_'), f.path);
    }
  });

  void test('the image root loses the host keys openssh-server made; a baked key or authorized_keys is found', async () => {
    const root = join(dir, 'root');
    for (const d of ['etc/ssh', 'var/lib/dbus', 'home/agent/.ssh', 'root/.ssh']) await mkdir(join(root, d), { recursive: true });
    await writeFile(join(root, 'etc/shadow'), 'root:*:19000:0:99999:7:::\n');
    for (const f of ['ssh_host_ed25519_key', 'ssh_host_ed25519_key.pub', 'ssh_host_rsa_key', 'ssh_host_rsa_key.pub'])
      await writeFile(join(root, 'etc/ssh', f), 'x');
    await writeFile(join(root, 'etc/ssh', 'sshd_config'), '# Debian\n');
    await writeFile(join(root, 'home/agent/.ssh/authorized_keys'), caFile);
    assert.equal((await bakedSshKeys(root)).length, 5);
    await cleanRoot(root, 1_700_000_000);
    assert.deepEqual(await readdir(join(root, 'etc/ssh')), ['sshd_config']);
    assert.deepEqual(await bakedSshKeys(root), ['/home/agent/.ssh/authorized_keys']);
    await rm(join(root, 'home/agent/.ssh/authorized_keys'));
    assert.deepEqual(await bakedSshKeys(root), []);
  });

  void test('fw_cfg: the SSH files only when asked, 0600; switched off, they go (or stay listed but empty)', async () => {
    assert.deepEqual(Object.keys(fwCfgFiles('/v/fwcfg')).sort(), [
      'opt/sandboxd/agent-key.pem',
      'opt/sandboxd/agent.env',
      'opt/sandboxd/agent.pem',
      'opt/sandboxd/ca.pem',
      'opt/sandboxd/loadout.json',
    ]);
    assert.deepEqual(
      Object.entries(fwCfgFiles('/v/fwcfg', true)).filter(([k]) => k.includes('/ssh-')),
      [
        ['opt/sandboxd/ssh-ca.pub', '/v/fwcfg/ssh-ca.pub'],
        ['opt/sandboxd/ssh-user', '/v/fwcfg/ssh-user'],
        ['opt/sandboxd/ssh-principals', '/v/fwcfg/ssh-principals'],
      ],
    );
    const fw = join(dir, 'fwcfg');
    const settings = {
      server: '192.168.213.1:8120',
      agentId: 'agent-s',
      instanceId: '0e5c1f7e-7a4b-4c5d-9e1f-2a3b4c5d6e7f',
      profile: 'basic',
      hostname: 'agent-s',
      ipCidr: '192.168.213.10/24',
      gateway: '192.168.213.1',
    };
    const certs = { caPem: 'ca\n', certPem: 'cert\n', keyPem: 'key\n' };
    await writeFwCfg(fw, settings, certs, { caPublicKey: caFile, user: 'agent', principals: ['ops'] });
    assert.equal(await readFile(join(fw, 'ssh-ca.pub'), 'utf8'), `${caLine}\n`);
    assert.equal(await readFile(join(fw, 'ssh-principals'), 'utf8'), 'ops\n');
    for (const f of SSH_FW_CFG_NAMES) assert.equal((await stat(join(fw, f))).mode & 0o777, 0o600, f);
    await writeFwCfg(fw, settings, certs, 'empty');
    for (const f of SSH_FW_CFG_NAMES) assert.equal(await readFile(join(fw, f), 'utf8'), '', f);
    await writeFwCfg(fw, settings, certs);
    assert.deepEqual((await readdir(fw)).sort(), ['agent-key.pem', 'agent.env', 'agent.pem', 'ca.pem', 'loadout.json']);
  });
});
