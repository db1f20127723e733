import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../../src/config/load.js';
import type { DefaultsContext } from '../../../src/config/schema.js';

const ctx: DefaultsContext = { cpuCount: 4, stdoutIsTty: false, homeDir: '/home/u', xdgStateHome: undefined };

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env, ctx);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

describe('configuration', () => {
  test('defaults are loopback listeners, test hypervisor, worker shards = cores - 1', () => {
    const c = loadConfig({}, ctx);
    assert.deepEqual(c.httpAddr, { host: '127.0.0.1', port: 8122 });
    assert.deepEqual(c.wsAddr, { host: '127.0.0.1', port: 8121 });
    assert.deepEqual(c.grpcAddr, { host: '127.0.0.1', port: 8120 });
    assert.deepEqual(c.hypervisorUris, ['test:///default']);
    assert.equal(c.actorsMode, 'workers');
    assert.equal(c.actorShards, 3);
    assert.equal(c.logFormat, 'json');
    assert.equal(c.logFileRetentionDays, 7);
    assert.equal(c.stateDir, '/home/u/.local/state/sandboxd');
    assert.equal(c.secretsDir, '/home/u/.local/state/sandboxd/secrets');
    assert.equal(c.logFile, null);
    assert.equal(c.trustDomain, 'sandbox.local');
  });

  test('SVC_TRUSTED_PROXIES: loopback by default, a list of IPs and CIDRs, none for nobody; a bad item is named', () => {
    assert.deepEqual(
      loadConfig({}, ctx).trustedProxies.map((r) => r.prefix),
      [8, 128],
    );
    assert.equal(loadConfig({ SVC_TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.1,fd00::/8' }, ctx).trustedProxies.length, 3);
    assert.deepEqual(loadConfig({ SVC_TRUSTED_PROXIES: 'none' }, ctx).trustedProxies, []);
    assert.match(
      problemsOf({ SVC_TRUSTED_PROXIES: '10.0.0.0/8,proxy.example' })[0] ?? '',
      /^SVC_TRUSTED_PROXIES=.*"proxy\.example" is not an IP/,
    );
  });

  test('one core still gets one shard; a terminal gets pretty logs', () => {
    const c = loadConfig({}, { ...ctx, cpuCount: 1, stdoutIsTty: true });
    assert.equal(c.actorShards, 1);
    assert.equal(c.logFormat, 'pretty');
  });

  test('the result is deep-frozen', () => {
    const c = loadConfig({ SVC_HYPERVISOR_URI: 'qemu:///system,qemu+ssh://h2/system' }, ctx);
    assert.ok(Object.isFrozen(c));
    assert.ok(Object.isFrozen(c.httpAddr));
    assert.ok(Object.isFrozen(c.hypervisorUris));
    assert.deepEqual(c.hypervisorUris, ['qemu:///system', 'qemu+ssh://h2/system']);
  });

  test('every invalid variable is named in one error', () => {
    const problems = problemsOf({
      LOG_FORMAT: 'xml',
      SVC_HTTP_ADDR: 'nope',
      SVC_ACTOR_SHARDS: '0',
      LOG_FILE_RETENTION_DAYS: 'seven',
      SVC_ACTORS: 'threads',
      SVC_MAX_BODY_BYTES: '12 parsecs',
    });
    for (const name of ['LOG_FORMAT', 'SVC_HTTP_ADDR', 'SVC_ACTOR_SHARDS', 'LOG_FILE_RETENTION_DAYS', 'SVC_ACTORS', 'SVC_MAX_BODY_BYTES']) {
      assert.ok(
        problems.some((p) => p.startsWith(name)),
        `${name} should be named in ${problems.join(' | ')}`,
      );
    }
  });

  test('plaintext listeners on a non-loopback address are refused without the unsafe override', () => {
    const problems = problemsOf({ SVC_HTTP_ADDR: '0.0.0.0:8122', SVC_WS_ADDR: '[::]:8121' });
    assert.equal(problems.length, 2);
    assert.match(problems[0]!, /SVC_HTTP_ADDR=0\.0\.0\.0:8122: plaintext listener on a non-loopback address is refused/);
    assert.match(problems[1]!, /SVC_WS_ADDR=\[::\]:8121/);
    const c = loadConfig({ SVC_HTTP_ADDR: '0.0.0.0:8122', SVC_ALLOW_INSECURE_REMOTE: '1' }, ctx);
    assert.equal(c.httpAddr.host, '0.0.0.0');
  });

  test('the SSH connector (plaintext prelude) off loopback needs the unsafe override too; unset is off', () => {
    const problems = problemsOf({ SVC_GATEWAY_SSH_LISTEN: '0.0.0.0:8124' });
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /SVC_GATEWAY_SSH_LISTEN=0\.0\.0\.0:8124: plaintext listener on a non-loopback address is refused/);
    assert.equal(
      loadConfig({ SVC_GATEWAY_SSH_LISTEN: '0.0.0.0:8124', SVC_ALLOW_INSECURE_REMOTE: '1' }, ctx).gatewaySshListen?.host,
      '0.0.0.0',
    );
    assert.equal(loadConfig({}, ctx).gatewaySshListen, null);
  });

  test('gRPC is mTLS-only, so a remote gRPC address is allowed', () => {
    const c = loadConfig({ SVC_GRPC_ADDR: '0.0.0.0:8120' }, ctx);
    assert.equal(c.grpcAddr.host, '0.0.0.0');
  });

  test('loopback forms are all accepted', () => {
    for (const addr of ['127.0.0.1:1', 'localhost:2', '[::1]:3', '127.1.2.3:4', ':5']) {
      assert.doesNotThrow(() => loadConfig({ SVC_HTTP_ADDR: addr }, ctx), addr);
    }
  });

  test('sizes, flags, pairs and URLs parse', () => {
    const c = loadConfig(
      {
        SVC_MAX_BODY_BYTES: '4MiB',
        SVC_ENABLE_DIRECT_RUNTIME_SSH: '1',
        SVC_GATEWAY_SSH_TARGETS: 'i-1=10.0.0.5:22, i-2=10.0.0.6:22',
        ORCH_SERVE_ENDPOINT: 'wss://orch.example/ws',
        SECRETS_DIR: '/srv/secrets',
        SVC_TRUST_DOMAIN: 'Fleet.Example',
      },
      ctx,
    );
    assert.equal(c.maxBodyBytes, 4 * 1024 * 1024);
    assert.equal(c.enableDirectRuntimeSsh, true);
    assert.deepEqual(c.gatewaySshTargets, [
      ['i-1', '10.0.0.5:22'],
      ['i-2', '10.0.0.6:22'],
    ]);
    assert.equal(c.orchServeEndpoint, 'wss://orch.example/ws');
    assert.equal(c.secretsDir, '/srv/secrets');
    assert.equal(c.trustDomain, 'fleet.example');
    assert.ok(problemsOf({ ORCH_SERVE_ENDPOINT: 'ftp://x' })[0]!.startsWith('ORCH_SERVE_ENDPOINT'));
    assert.ok(problemsOf({ SVC_GATEWAY_SSH_TARGETS: 'i-1' })[0]!.startsWith('SVC_GATEWAY_SSH_TARGETS'));
    assert.ok(problemsOf({ SVC_HYPERVISOR_URI: 'not a uri' })[0]!.startsWith('SVC_HYPERVISOR_URI'));
  });
});
