/**
 * The `debian` image end to end, without libvirt: build it (cached by content under
 * $TMPDIR/sandboxd-realvm-images), boot it with plain qemu-system-x86_64 (TCG, direct PVH kernel
 * boot, a qcow2 overlay on disk.ext4, the settings and mTLS files as fw_cfg files, QEMU user
 * networking: the guest reaches this host at 10.0.2.2), and check what a user relies on: the
 * agent dials the in-process server over mTLS, commands run as the `agent` user with node 20,
 * tmux and git, cloud-init stayed out of the way, SSH leases work end to end (the guest gets an
 * SSH CA, its user and principals by fw_cfg; the real ssh client, with `sbx ssh-proxy` as its
 * ProxyCommand, logs in through the SSH connector with a CA certificate, while a plain key and a
 * certificate for another principal are refused; the host key is the guest's own, made at first
 * boot), and an ACPI power-button press shuts the guest down cleanly.
 *
 * Without libvirt the VM's SSH address cannot come from its domain: QEMU user networking forwards
 * a loopback port to the guest's port 22, and the connector's lookup answers that address for the
 * VM's name. The second suite does it the product's way: the whole server on libvirt
 * (qemu:///system, an isolated network of its own) with SSH leases configured creates a debian VM
 * through the API, and `sbx ssh VM` as an operator gets a lease and a signed certificate and logs
 * in through the connector, which finds the guest's address:22 itself (no SVC_GATEWAY_SSH_TARGETS).
 *
 * Opt-in (SANDBOXD_DEBIAN_IMAGE_TESTS=1): a cold build takes about 1.5-3 minutes and needs root
 * and the Debian mirror; the boot takes 15-30 s of both cores under TCG.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import pino from 'pino';
import { SshConnector } from '../../src/gateway/ssh/connector.js';
import { buildDebianImage, type DebianBuildResult } from '../../src/image/build-debian.js';
import { findPackageRoot } from '../../src/image/command.js';
import { issueOperatorCert, writeAgentBundle } from '../../src/identity/ca.js';
import { startRealVmEnv, type RealVmEnv } from '../support/realvm.js';
import { fwCfgFiles, writeFwCfg } from '../../src/vms/fw-cfg.js';
import { agentOf, execCollect, operatorClient, startTestServer, waitFor, type TestServer } from './agents-harness.js';
import { kBatchSsh } from '../support/ssh-options.js';

function skipReason(): string | null {
  if (process.env['SANDBOXD_DEBIAN_IMAGE_TESTS'] !== '1')
    return 'DEBIAN IMAGE TEST SKIPPED: opt-in with SANDBOXD_DEBIAN_IMAGE_TESTS=1 (builds a debootstrap image: minutes, root, the Debian mirror)';
  if (process.getuid?.() !== 0) return 'DEBIAN IMAGE TEST SKIPPED: building the image needs root';
  if (!existsSync('/usr/bin/qemu-system-x86_64') || !existsSync('/usr/bin/qemu-img'))
    return 'DEBIAN IMAGE TEST SKIPPED: qemu-system-x86_64 / qemu-img are not installed (apt-get install qemu-system-x86 qemu-utils)';
  return null;
}

const skip = skipReason();
if (skip !== null) process.stderr.write(`\n*** ${skip} ***\n\n`);

const execFileAsync = promisify(execFile);
const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
const AGENT_ID = 'agent-deb1';
const INSTANCE_ID = '5d0c3a4e-1b7f-4c2d-9a8e-6f5e4d3c2b1a';

void describe('debian image under plain QEMU', { skip: skip ?? false, timeout: 1_200_000 }, () => {
  let image: DebianBuildResult;
  let ts: TestServer;
  let work: string;
  let qemu: ChildProcess | undefined;
  let qemuExit: Promise<number | null>;
  let bootMs = 0;
  /** The loopback port QEMU forwards to the guest's port 22. */
  let sshPort = 0;

  before(
    async () => {
      const tree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
      image = await buildDebianImage({
        outDir: join(tmpdir(), 'sandboxd-realvm-images'),
        agentTree: tree,
        packageRoot: findPackageRoot(tree),
      });
      process.stderr.write(`debian image: ${image.dir} (${image.reused ? 'reused' : 'built'} in ${image.elapsedMs} ms)\n`);
      work = await mkdtemp(join(tmpdir(), 'sandboxd-debian-boot-'));
      await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test-ssh-ca', '-f', join(work, 'ssh-ca')]);
      await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'user', '-f', join(work, 'user')]);
      sshPort = await new Promise<number>((res, rej) => {
        const s = createServer();
        s.once('error', rej);
        s.listen(0, '127.0.0.1', () => {
          const port = (s.address() as { port: number }).port;
          s.close(() => res(port));
        });
      });
      // QEMU user networking connects the guest's 10.0.2.2:<port> to this host's 127.0.0.1:<port>.
      ts = await startTestServer({ SVC_GRPC_ADDR: '127.0.0.1:0' });
    },
    { timeout: 900_000 },
  );

  after(
    async () => {
      if (qemu !== undefined && qemu.exitCode === null && qemu.signalCode === null) {
        qemu.kill('SIGKILL');
        await qemuExit;
      }
      await ts?.stop();
      if (work !== undefined) await rm(work, { recursive: true, force: true });
    },
    { timeout: 120_000 },
  );

  void test('boots, and its agent connects over mTLS with the fw_cfg identity', { timeout: 300_000 }, async () => {
    const certs = await writeAgentBundle(join(work, 'certs'), ts.ca, { instanceId: INSTANCE_ID });
    const [caPem, certPem, keyPem] = await Promise.all([
      readFile(certs.ca, 'utf8'),
      readFile(certs.cert, 'utf8'),
      readFile(certs.key, 'utf8'),
    ]);
    const fw = join(work, 'fwcfg');
    await writeFwCfg(
      fw,
      {
        server: `10.0.2.2:${ts.server.ports.grpc}`,
        agentId: AGENT_ID,
        instanceId: INSTANCE_ID,
        profile: 'basic',
        hostname: AGENT_ID,
        ipCidr: '10.0.2.15/24',
        gateway: '10.0.2.2',
      },
      { caPem, certPem, keyPem },
      { caPublicKey: await readFile(join(work, 'ssh-ca.pub'), 'utf8'), user: 'agent', principals: ['ops'] },
    );
    const overlay = join(work, 'disk.qcow2');
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', join(image.dir, image.manifest.files.disk), overlay]);
    const args = [
      '-M',
      'pc',
      '-accel',
      'tcg,tb-size=64',
      '-m',
      '1024',
      '-smp',
      '1',
      '-nodefaults',
      '-display',
      'none',
      '-no-reboot',
      '-serial',
      `file:${join(work, 'console.log')}`,
      '-monitor',
      `unix:${join(work, 'monitor.sock')},server=on,wait=off`,
      '-kernel',
      join(image.dir, image.manifest.files.kernel),
      '-initrd',
      join(image.dir, image.manifest.files.initrd),
      '-append',
      image.manifest.cmdline,
      '-drive',
      `file=${overlay},format=qcow2,if=virtio`,
      '-netdev',
      `user,id=n0,hostfwd=tcp:127.0.0.1:${sshPort}-:22`,
      '-device',
      'virtio-net-pci,netdev=n0,romfile=',
      ...Object.entries(fwCfgFiles(fw, true)).flatMap(([name, file]) => ['-fw_cfg', `name=${name},file=${file}`]),
    ];
    const t0 = Date.now();
    qemu = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let qemuErr = '';
    qemu.stderr?.on('data', (d: Buffer) => {
      qemuErr += d.toString();
    });
    const child = qemu;
    qemuExit = new Promise((res) => child.once('exit', (code) => res(code)));
    const serial = async (): Promise<string> => readFile(join(work, 'console.log'), 'utf8').catch(() => '');
    try {
      await waitFor(
        'the guest agent to connect',
        async () => {
          if (child.exitCode !== null) throw new Error(`QEMU exited ${child.exitCode}: ${qemuErr}`);
          return (await agentOf(ts, AGENT_ID))?.status === 'Ready';
        },
        240_000,
        250,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- serial console ---\n${(await serial()).slice(-6000)}`, { cause: err });
    }
    bootMs = Date.now() - t0;
    process.stderr.write(`debian image: QEMU start → agent connected in ${bootMs} ms (TCG)\n`);
    const a = await agentOf(ts, AGENT_ID);
    assert.equal(a?.hostname, AGENT_ID);
    // The key came through fw_cfg, not the command line.
    assert.ok(!args.join(' ').includes('PRIVATE KEY'));
    assert.match(await serial(), /sandboxd-guest: starting sandbox-agent agent-deb1/);
  });

  void test('commands run as the agent user with node 20, tmux and git; cloud-init was skipped', { timeout: 300_000 }, async () => {
    assert.ok(bootMs > 0, 'the guest did not boot');
    const client = await operatorClient(ts);
    try {
      const script = [
        'echo "user=$(id -un) host=$(hostname)"',
        'node --version',
        'tmux -V',
        'git --version',
        'sudo -n true && echo sudo=ok',
        'echo "cloud-init=$(systemctl is-active cloud-init-local.service cloud-final.service | sort -u | tr "\\n" " ")"',
        'echo "failed=$(systemctl list-units --state=failed --plain --no-legend | wc -l)"',
        'systemd-analyze 2>/dev/null | head -n 1 || true',
      ].join('; ');
      const out = await execCollect(client, { agentId: AGENT_ID, command: 'sh', args: ['-c', script] }, 180_000);
      assert.equal(out.status.code, 0, out.status.details);
      const text = out.stdout.toString();
      process.stderr.write(`debian image: guest says\n${text}${out.stderr.toString()}`);
      assert.match(text, new RegExp(`^user=agent host=${AGENT_ID}$`, 'm'));
      assert.match(text, /^v20\./m);
      assert.match(text, /^tmux \d/m);
      assert.match(text, /^git version /m);
      assert.match(text, /^sudo=ok$/m);
      assert.match(text, /^cloud-init=inactive $/m);
      assert.match(text, /^failed=0$/m);
    } finally {
      client.close();
    }
  });

  void test(
    'ssh through the connector: a CA certificate logs in as agent; a plain key and another principal are refused',
    { timeout: 420_000 },
    async () => {
      assert.ok(bootMs > 0, 'the guest did not boot');
      const connector = await SshConnector.start({
        listen: { host: '127.0.0.1', port: 0 },
        targets: [],
        allowlist: [['alice', AGENT_ID]],
        leaseCheck: (actor, instance) => (actor === 'alice' && instance === AGENT_ID ? { id: 'sshlease_debian' } : undefined),
        lookup: (instance) => (instance === AGENT_ID ? { host: '127.0.0.1', port: sshPort } : null),
        logger: pino({ level: 'silent' }),
      });
      const sign = async (label: string, principal: string): Promise<string> => {
        await copyFile(join(work, 'user.pub'), join(work, `${label}.pub`));
        await execFileAsync('ssh-keygen', [
          '-q',
          '-s',
          join(work, 'ssh-ca'),
          '-I',
          label,
          '-n',
          principal,
          '-V',
          '-1m:+10m',
          join(work, `${label}.pub`),
        ]);
        return join(work, `${label}-cert.pub`);
      };
      const ssh = (cert: string | null, command: string): Promise<{ code: number; stdout: string; stderr: string }> =>
        new Promise((res) => {
          const args = [
            '-F',
            '/dev/null',
            '-i',
            join(work, 'user'),
            ...(cert === null ? [] : ['-o', `CertificateFile=${cert}`]),
            '-o',
            'IdentitiesOnly=yes',
            '-o',
            'BatchMode=yes',
            '-o',
            'StrictHostKeyChecking=accept-new',
            '-o',
            `UserKnownHostsFile=${join(work, 'known_hosts')}`,
            '-o',
            `HostKeyAlias=sbx-${AGENT_ID}`,
            '-o',
            'ConnectTimeout=60',
            '-o',
            'LogLevel=ERROR',
            '-o',
            `ProxyCommand=${process.execPath} ${SBX_BIN} ssh-proxy --connect 127.0.0.1:${connector.port} --actor alice ${AGENT_ID}`,
            '-l',
            'agent',
            AGENT_ID,
            command,
          ];
          execFile('ssh', args, { timeout: 120_000 }, (err, stdout, stderr) =>
            res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }),
          );
        });
      try {
        const ok = await sign('ops', 'ops');
        // sshd starts beside the agent; under TCG it may still be making its host key.
        let last = { code: -1, stdout: '', stderr: '' };
        await waitFor(
          "the guest's sshd to let the certificate in",
          async () => {
            last = await ssh(
              ok,
              [
                'echo "user=$(id -un) host=$(hostname)"',
                'cat /etc/ssh/ssh_host_ed25519_key.pub',
                'echo "authorized_keys=$(ls ~/.ssh/authorized_keys* 2>/dev/null | wc -l)"',
                "sudo -n /usr/sbin/sshd -T -f /run/sandboxd-sshd/sshd_config | grep -E '^(authorizedkeysfile|passwordauthentication|trustedusercakeys) '",
                'systemctl is-active ssh.service || true',
              ].join('; '),
            );
            return last.code === 0;
          },
          240_000,
          2000,
          () => `ssh: ${last.code} ${last.stderr}`,
        );
        process.stderr.write(`debian image: ssh through the connector says\n${last.stdout}`);
        assert.match(last.stdout, new RegExp(`^user=agent host=${AGENT_ID}$`, 'm'));
        // The host key ssh learned is the one the guest made at first boot.
        const guestKey = /^(ssh-ed25519 \S+)/m.exec(last.stdout)?.[1];
        assert.ok(guestKey !== undefined, last.stdout);
        assert.ok((await readFile(join(work, 'known_hosts'), 'utf8')).includes(guestKey), 'known_hosts holds the guest-made host key');
        // No authorized_keys for the user: only the certificate let it in; sshd runs the config sandboxd's fw_cfg files made.
        assert.match(last.stdout, /^authorized_keys=0$/m);
        assert.match(last.stdout, /^authorizedkeysfile none$/m);
        assert.match(last.stdout, /^passwordauthentication no$/m);
        assert.match(last.stdout, /^trustedusercakeys \/run\/sandboxd-sshd\/ca\.pub$/m);
        // Debian's own ssh.service (which would trust plain keys) stays off.
        assert.match(last.stdout, /^inactive$/m);

        const plain = await ssh(null, 'echo NO');
        assert.notEqual(plain.code, 0);
        assert.match(plain.stderr, /Permission denied/);
        const other = await ssh(await sign('other', 'someone-else'), 'echo NO');
        assert.notEqual(other.code, 0);
        assert.match(other.stderr, /Permission denied/);

        // The image holds no host key: the setup makes one only where none exists, and it did, in this VM.
        assert.match(await readFile(join(work, 'console.log'), 'utf8'), /sandboxd-guest: made this VM's SSH host key/);
      } finally {
        await connector.close();
      }
    },
  );

  void test('an ACPI power-button press shuts the guest down', { timeout: 420_000 }, async () => {
    assert.ok(bootMs > 0, 'the guest did not boot');
    // The agent connects before udev's coldplug is done (minutes of emulated CPU on a busy host);
    // the button driver must be loaded, or the press is lost.
    const client = await operatorClient(ts);
    try {
      const settle = await execCollect(
        client,
        {
          agentId: AGENT_ID,
          command: 'sh',
          args: [
            '-c',
            'sudo udevadm settle --timeout=200; systemctl is-system-running --wait; grep -l "Power Button" /sys/class/input/input*/name | wc -l',
          ],
        },
        240_000,
      );
      assert.equal(settle.status.code, 0, settle.status.details);
      assert.match(settle.stdout.toString(), /^(running|degraded)\n[1-9]/, settle.stdout.toString());
    } finally {
      client.close();
    }
    await new Promise<void>((res, rej) => {
      const s = createConnection(join(work, 'monitor.sock'), () => s.end('system_powerdown\n', () => res()));
      s.on('error', rej);
    });
    const code = await Promise.race([qemuExit, new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), 150_000).unref())]);
    assert.equal(code, 0, 'QEMU did not exit after system_powerdown (guest ignored the power button)');
  });
});

void describe('debian image on libvirt: sbx ssh with no SVC_GATEWAY_SSH_TARGETS entry', { skip: skip ?? false, timeout: 1_200_000 }, () => {
  const VM = 'agent-debssh';
  let env: RealVmEnv | undefined;
  let dir: string;

  before(
    async () => {
      const tree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
      const image = await buildDebianImage({
        outDir: join(tmpdir(), 'sandboxd-realvm-images'),
        agentTree: tree,
        packageRoot: findPackageRoot(tree),
      });
      dir = await mkdtemp(join(tmpdir(), 'sandboxd-debian-ssh-'));
      await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ssh-ca', '-f', join(dir, 'ssh-ca')]);
      await mkdir(join(dir, 'home', '.ssh'), { recursive: true, mode: 0o700 });
      await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'home', '.ssh', 'id_ed25519')]);
      await writeFile(join(dir, 'roles.json'), JSON.stringify({ alice: 'operator' }));
      env = await startRealVmEnv('ds', {
        imageDir: image.dir,
        env: {
          SVC_OPERATOR_ROLES: join(dir, 'roles.json'),
          SVC_GATEWAY_SSH_CA_KEY: join(dir, 'ssh-ca'),
          SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH: join(dir, 'ssh-ca.pub'),
          SVC_GATEWAY_SSH_AUTHORIZED_USER: 'agent',
          SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: 'ops',
          SVC_GATEWAY_SSH_LISTEN: '127.0.0.1:0',
          SVC_GATEWAY_SSH_ALLOWLIST: `alice=${VM}`,
        },
      });
      const cert = await issueOperatorCert(env.ca, { name: 'alice' });
      await mkdir(join(dir, 'alice'), { mode: 0o700 });
      await writeFile(join(dir, 'alice', 'ca.pem'), env.ca.caCertPem);
      await writeFile(join(dir, 'alice', 'operator.pem'), cert.certPem);
      await writeFile(join(dir, 'alice', 'operator-key.pem'), cert.keyPem, { mode: 0o600 });
    },
    { timeout: 900_000 },
  );

  after(
    async () => {
      await env?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
    { timeout: 180_000 },
  );

  void test(
    'create a debian VM through the API; sbx ssh reaches its sshd at its address:22 through the connector',
    { timeout: 600_000 },
    async () => {
      assert.ok(env !== undefined);
      const e = env;
      const http = `http://127.0.0.1:${e.server.ports.http}`;
      const created = await fetch(`${http}/api/v1/vms`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: VM, profile: 'basic', vcpus: 1, memory_mb: 1024, disk_gb: 5 }),
      });
      assert.equal(created.status, 202, await created.clone().text());
      const op = (await created.json()) as { operation: { id: string } };
      await e.waitOp(op.operation.id, 400_000);
      const ip = ((await (await fetch(`${http}/api/v1/vms/${VM}`)).json()) as { ip_address?: string }).ip_address;
      assert.match(String(ip), /^192\.168\.\d+\.\d+$/);
      assert.deepEqual(await e.server.service('vms').sshAddress(VM), { host: ip, port: 22 });
      const sbxEnv = {
        ...process.env,
        HOME: join(dir, 'home'),
        XDG_CONFIG_HOME: join(dir, 'home'),
        SBX_SERVER: `https://127.0.0.1:${e.server.ports.admin}`,
        SBX_OPERATOR_CERTS: join(dir, 'alice'),
        SVC_GATEWAY_SSH_CONNECT: `127.0.0.1:${e.server.service('sshConnector').port}`,
        SVC_GATEWAY_SSH_ACTOR: 'alice',
      };
      const sshArgs = [...kBatchSsh, '-o', 'ConnectTimeout=60'];
      const sbxSsh = (command: string): Promise<{ code: number; stdout: string; stderr: string }> =>
        new Promise((res) =>
          execFile(
            process.execPath,
            [SBX_BIN, 'ssh', VM, '-l', 'agent', '--principal', 'ops', '--ttl', '300', '--', ...sshArgs, command],
            { env: sbxEnv, timeout: 120_000 },
            (err, stdout, stderr) => res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }),
          ),
        );
      let last = { code: -1, stdout: '', stderr: '' };
      // The agent is up; sshd may still be making its host key (TCG).
      await waitFor(
        `sbx ssh ${VM} to log in`,
        async () => {
          last = await sbxSsh('echo "ssh-ok $(id -un)@$(hostname)"');
          return last.code === 0;
        },
        240_000,
        3000,
        () => `sbx ssh: ${last.code} ${last.stderr}`,
      );
      process.stderr.write(`debian on libvirt: sbx ssh says ${last.stdout}`);
      assert.match(last.stdout, new RegExp(`^ssh-ok agent@${VM}$`, 'm'));

      // The agent share: the VM's inbox and outbox are 9p mounts in the agent user's workspace
      // (the generic kernel has 9p); the agent user reads what the host put in the inbox and
      // writes to the outbox, which the outbox download route serves.
      await writeFile(join(e.server.config.storageDir, 'inbox', VM, 'from-host.txt'), 'inbox file\n');
      const shared = await sbxSsh(
        'cd workspace && cat inbox/from-host.txt && echo "from $(id -un)" > outbox/from-guest.txt && grep -c " 9p " /proc/mounts',
      );
      assert.equal(shared.code, 0, shared.stderr);
      assert.equal(shared.stdout, 'inbox file\n2\n');
      const fromGuest = await fetch(`${http}/api/v1/storage/outbox/${VM}/_download?path=from-guest.txt`);
      assert.equal(fromGuest.status, 200);
      assert.equal(await fromGuest.text(), 'from agent\n');
      const del = await fetch(`${http}/api/v1/vms/${VM}?force=true&delete_disk=true`, { method: 'DELETE' });
      assert.ok(del.status === 200 || del.status === 202, String(del.status));
    },
  );
});
