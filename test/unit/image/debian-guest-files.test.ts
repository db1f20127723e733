import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  CLOUD_CFG,
  DEBIAN_AGENT_DIR,
  DEBIAN_NODE_PATH,
  DISABLED_UNITS,
  ENABLED_UNITS,
  ENV_FILTER,
  FW_CFG_MARKER,
  FW_CFG_SETUP,
  INITRAMFS_MODULES,
  MASKED_UNITS,
  SANDBOX_AGENT_UNIT,
  SKIP_WITH_FW_CFG,
  SKIPPED_WITH_FW_CFG,
  debianGuestFiles,
  initramfsFiles,
} from '../../../src/image/debian-guest-files.js';
import { agentEnv, fwCfgFiles } from '../../../src/vms/fw-cfg.js';

const settings = {
  server: '192.168.213.1:8120',
  agentId: 'agent-a',
  instanceId: '0e5c1f7e-7a4b-4c5d-9e1f-2a3b4c5d6e7f',
  profile: 'basic',
  hostname: 'agent-a',
  ipCidr: '192.168.213.10/24',
  gateway: '192.168.213.1',
};

/** Runs the guest's agent.env filter with `input` on stdin; its output and the variables it set. */
function filter(input: string): { out: string; vars: string } {
  const out = execFileSync('sh', ['-c', ENV_FILTER], { input, encoding: 'utf8' });
  const vars = execFileSync(
    'sh',
    ['-c', `${ENV_FILTER} >/dev/null\nprintf '%s|' "$SBX_AGENT_ID" "$SBX_INSTANCE_ID" "$SBX_SERVER" "$SBX_HOSTNAME" "$SBX_IP" "$SBX_GW"`],
    { input, encoding: 'utf8' },
  );
  return { out, vars };
}

/** Unit file text as section → key → values. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let cur: Map<string, string[]> | undefined;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const s = /^\[(\w+)\]$/.exec(line);
    if (s?.[1] !== undefined) {
      cur = new Map();
      sections.set(s[1], cur);
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    assert.ok(kv?.[1] !== undefined && kv[2] !== undefined && cur !== undefined, `not a unit line: ${line}`);
    cur.set(kv[1], [...(cur.get(kv[1]) ?? []), kv[2]]);
  }
  return sections;
}

void describe('debian image guest files', () => {
  void test('the agent unit runs only with the fw_cfg identity, as the agent user, restarting unless exit 2', () => {
    const u = parseUnit(SANDBOX_AGENT_UNIT);
    assert.deepEqual(u.get('Unit')?.get('ConditionPathExists'), [FW_CFG_MARKER]);
    const svc = u.get('Service');
    assert.equal(svc?.get('User')?.[0], 'agent');
    assert.equal(svc?.get('Restart')?.[0], 'on-failure');
    assert.equal(svc?.get('RestartPreventExitStatus')?.[0], '2');
    assert.equal(svc?.get('ExecStartPre')?.[0], '+/usr/local/lib/sandboxd/fw-cfg-setup');
    // Optional: systemd loads it for ExecStartPre too, before the script has written it.
    assert.match(svc?.get('EnvironmentFile')?.[0] ?? '', /^-\/run\//);
    const exec = svc?.get('ExecStart')?.[0] ?? '';
    assert.ok(exec.startsWith(`${DEBIAN_NODE_PATH} ${DEBIAN_AGENT_DIR}/src/bin/sandbox-agent.js `));
    // ${X} is one argument each (systemd splits $X on spaces).
    for (const v of ['SBX_SERVER', 'SBX_AGENT_ID', 'SBX_INSTANCE_ID', 'SBX_PROFILE']) assert.ok(exec.includes(`\${${v}}`), v);
    assert.ok(!/\$[A-Z]/.test(exec.replace(/\$\{[A-Z_]+\}/g, '')));
    assert.deepEqual(u.get('Install')?.get('WantedBy'), ['multi-user.target']);
  });

  void test('the fw_cfg marker is the agent.env file sandboxd hands QEMU', () => {
    const name = Object.keys(fwCfgFiles('/x')).find((n) => n.endsWith('/agent.env'));
    assert.equal(FW_CFG_MARKER, `/sys/firmware/qemu_fw_cfg/by_name/${name}/raw`);
    assert.ok(FW_CFG_SETUP.includes('/sys/firmware/qemu_fw_cfg/by_name/opt/sandboxd'));
    for (const f of ['ca.pem', 'agent.pem', 'agent-key.pem']) assert.ok(FW_CFG_SETUP.includes(f), f);
  });

  void test('cloud-init, networkd and wait-online are skipped with the fw_cfg identity, and cloud-init probes no network datasource', () => {
    assert.deepEqual(parseUnit(SKIP_WITH_FW_CFG).get('Unit')?.get('ConditionPathExists'), [`!${FW_CFG_MARKER}`]);
    const paths = debianGuestFiles().map((f) => f.path);
    for (const u of [
      'cloud-init-local.service',
      'cloud-init.service',
      'cloud-config.service',
      'cloud-final.service',
      'systemd-networkd-wait-online.service',
    ]) {
      assert.ok(SKIPPED_WITH_FW_CFG.includes(u), u);
      assert.ok(paths.includes(`/etc/systemd/system/${u}.d/sandboxd.conf`), u);
    }
    assert.match(CLOUD_CFG, /^datasource_list: \[ NoCloud, None \]$/m);
  });

  void test('no unit is both enabled and masked or disabled', () => {
    for (const u of ENABLED_UNITS) assert.ok(!MASKED_UNITS.includes(u) && !DISABLED_UNITS.includes(u), u);
    assert.ok(ENABLED_UNITS.includes('sandbox-agent.service'));
    assert.ok(!MASKED_UNITS.some((u) => u.startsWith('systemd-logind') || u.startsWith('dbus')), 'logind handles the ACPI power button');
  });

  void test('the setup script is valid sh and uses no bash-only syntax', () => {
    execFileSync('sh', ['-n'], { input: FW_CFG_SETUP });
    assert.ok(FW_CFG_SETUP.startsWith('#!/bin/sh\n'));
    assert.ok(!/\[\[|\bfunction\b|\$\{[A-Za-z_]+\/\//.test(FW_CFG_SETUP));
  });

  void test('the guest reads exactly what sandboxd writes into agent.env', () => {
    const text = agentEnv(settings);
    const r = filter(text);
    assert.equal(r.out, text);
    assert.equal(
      r.vars,
      `${settings.agentId}|${settings.instanceId}|${settings.server}|${settings.hostname}|${settings.ipCidr}|${settings.gateway}|`,
    );
  });

  void test('the guest drops lines that are not plain SBX_ settings, and cannot be made to run anything', () => {
    const hostile = [
      'SBX_HOSTNAME=a;touch /tmp/pwned',
      'SBX_IP=$(id)',
      'PATH=/evil',
      'SBX_gw=1.2.3.4',
      'SBX_SERVER=`reboot`',
      'SBX_AGENT_ID=ok-1',
      'garbage',
      'SBX_GW=',
    ].join('\n');
    const r = filter(`${hostile}\n`);
    assert.equal(r.out, 'SBX_AGENT_ID=ok-1\n');
    assert.equal(r.vars, 'ok-1||||||');
  });

  void test('a value with = in it is dropped whole, never trimmed into another value', () => {
    const out = execFileSync('sh', ['-c', ENV_FILTER], { input: 'SBX_IP=-=\nSBX_GW=a=b\nSBX_SERVER=10.0.0.1:8120\n', encoding: 'utf8' });
    assert.equal(out, 'SBX_SERVER=10.0.0.1:8120\n');
  });

  void test('property: whatever agent.env holds, every line that passes is SBX_NAME=plain-value and came from the input', () => {
    const line = fc.oneof(
      fc.string({ maxLength: 40 }).filter((s) => !s.includes('\n') && !s.includes('\0')),
      fc
        .tuple(
          fc.constantFrom('SBX_IP', 'SBX_SERVER', 'SBX_X', 'sbx_a', 'SBX-Y'),
          fc.string({ maxLength: 20 }).filter((s) => !s.includes('\n') && !s.includes('\0')),
        )
        .map(([k, v]) => `${k}=${v}`),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), (lines) => {
        const input = `${lines.join('\n')}\n`;
        const out = execFileSync('sh', ['-c', ENV_FILTER], { input, encoding: 'utf8' });
        for (const l of out.split('\n').filter((x) => x !== '')) {
          assert.match(l, /^SBX_[A-Z_]*=[A-Za-z0-9_.:/@+-]+$/);
          assert.ok(lines.includes(l), l);
        }
      }),
      { numRuns: 60 },
    );
  });

  void test('initramfs-tools gets a module list (no MODULES=dep in a chroot) with virtio, ext4 and fw_cfg', () => {
    const [conf, modules] = initramfsFiles();
    assert.match(conf?.content ?? '', /^MODULES=list$/m);
    for (const m of ['virtio_pci', 'virtio_blk', 'virtio_net', 'ext4', 'qemu_fw_cfg'])
      assert.ok(INITRAMFS_MODULES.includes(m) && (modules?.content ?? '').split('\n').includes(m), m);
  });

  void test('every guest file has an absolute path, a sane mode and a final newline', () => {
    for (const f of [...initramfsFiles(), ...debianGuestFiles()]) {
      assert.ok(f.path.startsWith('/') && !f.path.includes('..'), f.path);
      assert.ok(f.mode === 0o644 || f.mode === 0o755 || f.mode === 0o440, `${f.path} ${f.mode.toString(8)}`);
      assert.ok(f.content.endsWith('\n'), f.path);
    }
    const sudoers = debianGuestFiles().find((f) => f.path.startsWith('/etc/sudoers.d/'));
    assert.equal(sudoers?.mode, 0o440);
  });
});
