import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import sshpk from 'sshpk';
import { SvcError } from '../../../src/core/errors.js';
import { LIMITS, parseCreateVm, parseRestart, parseSshPublicKey, type StartupCatalog } from '../../../src/vms/create-request.js';

function sshLine(type: 'ed25519' | 'rsa' | 'ec', bits = 2048): string {
  const pair =
    type === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : type === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: bits })
        : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return sshpk
    .parseKey(pair.publicKey.export({ type: 'spki', format: 'pem' }), 'pem')
    .toString('ssh')
    .replace(/ \(unnamed\)$/, '');
}

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof SvcError, String(e));
    return e.code;
  }
  return 'ok';
};

describe('POST /api/v1/vms body', () => {
  test("defaults are the spec's", () => {
    assert.deepEqual(parseCreateVm({ name: 'agent-a1' }, { directRuntimeSsh: false }), {
      name: 'agent-a1',
      profile: 'svc-dev',
      vcpus: 4,
      memoryMiB: 8192,
      diskGiB: 50,
      agentshare: true,
      start: true,
      enrollment: 'mtls',
      sshKeys: [],
      warnings: [],
    });
  });

  test('enrollment: mtls (default) or deferred; anything else is refused naming the field', () => {
    assert.equal(parseCreateVm({ name: 'agent-a1', enrollment: 'deferred' }, { directRuntimeSsh: false }).enrollment, 'deferred');
    assert.equal(parseCreateVm({ name: 'agent-a1', enrollment: 'mtls' }, { directRuntimeSsh: false }).enrollment, 'mtls');
    for (const bad of ['later', true, null, 1]) {
      assert.throws(
        () => parseCreateVm({ name: 'agent-a1', enrollment: bad }, { directRuntimeSsh: false }),
        (e: unknown) => e instanceof SvcError && e.code === 'request.invalid' && /enrollment/.test(e.message),
      );
    }
  });

  test('the reference dashboard\'s body: empty loadout/composition and profile "" are nothing asked for; a real loadout is refused by name', () => {
    const ref = {
      name: 'agent-r1',
      profile: '',
      loadout: '',
      composition: null,
      vcpus: 2,
      memory_mb: 4096,
      disk_gb: 20,
      agentshare: true,
      start: true,
    };
    const r = parseCreateVm(ref, { directRuntimeSsh: false });
    assert.deepEqual([r.profile, r.vcpus, r.memoryMiB, r.diskGiB], ['svc-dev', 2, 4096, 20]);
    for (const [field, v] of [
      ['loadout', 'claude-code'],
      ['composition', { layers: ['x'] }],
    ] as const) {
      assert.throws(
        () => parseCreateVm({ ...ref, [field]: v }, { directRuntimeSsh: false }),
        (e: unknown) => e instanceof SvcError && e.code === 'request.invalid' && e.message.startsWith(`${field}:`),
      );
    }
  });

  test('ranges are inclusive at both ends', () => {
    for (const [field, lim] of Object.entries(LIMITS)) {
      for (const v of [lim.min, lim.max])
        assert.equal(
          codeOf(() => parseCreateVm({ name: 'agent-a', [field]: v }, { directRuntimeSsh: false })),
          'ok',
          `${field}=${v}`,
        );
      for (const v of [lim.min - 1, lim.max + 1, 2.5, '4', null])
        assert.equal(
          codeOf(() => parseCreateVm({ name: 'agent-a', [field]: v }, { directRuntimeSsh: false })),
          'request.invalid',
          `${field}=${String(v)}`,
        );
    }
  });

  test('names: the pattern and 63 characters, else INVALID_VM_NAME', () => {
    for (const ok of ['agent-a', 'agent-0', 'agent--x', `agent-${'a'.repeat(57)}`])
      assert.equal(
        codeOf(() => parseCreateVm({ name: ok }, { directRuntimeSsh: false })),
        'ok',
        ok,
      );
    for (const bad of [
      'agent-',
      'agent_a',
      'Agent-a',
      'agent-A',
      'agent-a/b',
      ' agent-a',
      'agent-é',
      `agent-${'a'.repeat(58)}`,
      'xagent-a',
    ]) {
      assert.equal(
        codeOf(() => parseCreateVm({ name: bad }, { directRuntimeSsh: false })),
        'INVALID_VM_NAME',
        bad,
      );
    }
  });

  test('ssh_key policy: omitted with a warning for svc-dev, kept for basic or with SVC_ENABLE_DIRECT_RUNTIME_SSH=1', () => {
    const key = sshLine('ed25519');
    const dev = parseCreateVm({ name: 'agent-a', ssh_key: key }, { directRuntimeSsh: false });
    assert.deepEqual(dev.sshKeys, []);
    assert.equal(dev.warnings.length, 1);
    assert.deepEqual(parseCreateVm({ name: 'agent-a', ssh_key: key }, { directRuntimeSsh: true }).sshKeys, [key]);
    assert.deepEqual(
      parseCreateVm({ name: 'agent-a', profile: 'basic', ssh_key: `  ${key} me@box  ` }, { directRuntimeSsh: false }).sshKeys,
      [`${key} me@box`],
    );
    // Validated even when it is going to be omitted.
    assert.equal(
      codeOf(() => parseCreateVm({ name: 'agent-a', ssh_key: 'ssh-ed25519 Zm9v' }, { directRuntimeSsh: false })),
      'request.invalid',
    );
  });

  test('OpenSSH public keys: ed25519, ecdsa and rsa ≥ 2048 accepted; others refused', () => {
    for (const k of [sshLine('ed25519'), sshLine('ec'), sshLine('rsa', 2048)]) assert.equal(parseSshPublicKey(k), k);
    assert.equal(
      codeOf(() => parseSshPublicKey(sshLine('rsa', 1024))),
      'request.invalid',
    );
    const { privateKey } = generateKeyPairSync('ed25519');
    for (const bad of [
      privateKey.export({ type: 'pkcs8', format: 'pem' }),
      'ssh-dss AAAAB3NzaC1kc3M=',
      `${sshLine('ed25519')}\nssh-ed25519 AAAA`,
      42,
      'x'.repeat(9000),
    ]) {
      assert.equal(
        codeOf(() => parseSshPublicKey(bad)),
        'request.invalid',
        String(bad).slice(0, 30),
      );
    }
  });

  test('any body either parses or is a 400 SvcError (property)', () => {
    fc.assert(
      fc.property(fc.anything(), (body) => {
        try {
          parseCreateVm(body, { directRuntimeSsh: false });
        } catch (e) {
          assert.ok(e instanceof SvcError && (e.code === 'request.invalid' || e.code === 'INVALID_VM_NAME'), String(e));
        }
      }),
    );
    fc.assert(
      fc.property(
        fc
          .string({ minLength: 1, maxLength: 12 })
          .filter(
            (k) =>
              !['name', 'profile', 'vcpus', 'memory_mb', 'disk_gb', 'agentshare', 'start', 'ssh_key', 'loadout', 'composition'].includes(k),
          ),
        (k) => {
          assert.equal(
            codeOf(() => parseCreateVm({ name: 'agent-a', [k]: 1 }, { directRuntimeSsh: false })),
            'request.invalid',
          );
        },
      ),
    );
  });
});

describe('POST restart body', () => {
  test('defaults graceful / 60 s; ranges; empty body is fine', () => {
    assert.deepEqual(parseRestart(undefined), { mode: 'graceful', timeoutSeconds: 60 });
    assert.deepEqual(parseRestart({ mode: 'hard', timeout_seconds: 0 }), { mode: 'hard', timeoutSeconds: 0 });
    assert.deepEqual(parseRestart({ timeout_seconds: 3600 }), { mode: 'graceful', timeoutSeconds: 3600 });
    for (const bad of [
      { mode: 'x' },
      { timeout_seconds: 3601 },
      { timeout_seconds: -1 },
      { timeout_seconds: 1.5 },
      { other: 1 },
      'text',
      [1],
    ]) {
      assert.equal(
        codeOf(() => parseRestart(bad)),
        'request.invalid',
        JSON.stringify(bad),
      );
    }
  });
});

describe('POST create body with startup profiles and loadouts (a catalog)', () => {
  const catalog: StartupCatalog = {
    profile: (name) =>
      name === 'small'
        ? { vcpus: 2, memoryMiB: 1024, diskGiB: 5, agentshare: false, enrollment: 'deferred', loadout: 'tools' }
        : name === 'svc-dev' || name === 'basic'
          ? { vcpus: 4, memoryMiB: 8192, diskGiB: 50, agentshare: true, enrollment: 'mtls', loadout: null }
          : undefined,
    loadout: (value) => (value === 'tools' || value === 'other' ? value : value === 'profiles/other.yaml' ? 'other' : undefined),
    hold: () => ({ bind: () => undefined, release: () => undefined }),
  };
  const parse = (body: Record<string, unknown>): ReturnType<typeof parseCreateVm> =>
    parseCreateVm(body, { directRuntimeSsh: false, catalog });

  test("the profile's fields are the defaults; fields the request sets override them", () => {
    const r = parse({ name: 'agent-p1', profile: 'small' });
    assert.deepEqual(
      [r.profile, r.vcpus, r.memoryMiB, r.diskGiB, r.agentshare, r.enrollment, r.loadout],
      ['small', 2, 1024, 5, false, 'deferred', 'tools'],
    );
    const o = parse({ name: 'agent-p1', profile: 'small', vcpus: 3, agentshare: true, enrollment: 'mtls', loadout: 'other' });
    assert.deepEqual([o.vcpus, o.memoryMiB, o.agentshare, o.enrollment, o.loadout], [3, 1024, true, 'mtls', 'other']);
    assert.equal(parse({ name: 'agent-p1', profile: 'small', loadout: '' }).loadout, 'tools', "an empty loadout asks for the profile's");
    assert.equal(parse({ name: 'agent-p1', profile: '' }).loadout, undefined);
    assert.equal(parse({ name: 'agent-p1', loadout: 'profiles/other.yaml' }).loadout, 'other', "the reference dashboard's path");
  });

  test('unknown profiles and loadouts are 400 with their own codes; compositions are still refused', () => {
    assert.equal(
      codeOf(() => parse({ name: 'agent-p1', profile: 'nope' })),
      'profile.unknown',
    );
    assert.equal(
      codeOf(() => parse({ name: 'agent-p1', loadout: 'nope' })),
      'loadout.unknown',
    );
    assert.equal(
      codeOf(() => parse({ name: 'agent-p1', loadout: 3 })),
      'request.invalid',
    );
    assert.equal(
      codeOf(() => parse({ name: 'agent-p1', composition: { layers: ['x'] } })),
      'request.invalid',
    );
  });

  test('a startup profile is managed: an ssh_key is omitted without SVC_ENABLE_DIRECT_RUNTIME_SSH', () => {
    const key = sshLine('ed25519');
    const r = parse({ name: 'agent-p1', profile: 'small', ssh_key: key });
    assert.deepEqual(r.sshKeys, []);
    assert.match(r.warnings[0] ?? '', /managed small VMs/);
    assert.equal(parse({ name: 'agent-p1', profile: 'basic', ssh_key: key }).sshKeys.length, 1);
  });
});
