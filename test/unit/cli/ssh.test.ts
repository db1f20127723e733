import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { closedPort } from '../../support/ports.js';
import { sbx } from './run-sbx.js';

void describe('sbx ssh', () => {
  test('--print-config prints a Host block whose ProxyCommand is sbx ssh-proxy with the actor and connector', async () => {
    const r = await sbx(['ssh', '--print-config', 'agent-a1', '--actor', 'alice', '-l', 'dev'], {
      SVC_GATEWAY_SSH_CONNECT: '127.0.0.1:9124',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Host agent-a1$/m);
    assert.match(r.stdout, /^ {2}User dev$/m);
    assert.match(r.stdout, /^ {2}ProxyCommand \S+ \S+ ssh-proxy --connect 127\.0\.0\.1:9124 --actor alice agent-a1$/m);
    assert.match(r.stdout, /^ {2}HostKeyAlias sbx-agent-a1$/m);
  });

  test('without an instance, --print-config covers *.sbx names (the suffix is stripped before the prelude)', async () => {
    const r = await sbx(['ssh', '--print-config', '--actor', 'alice', '--connect', '10.0.0.1:8124']);
    assert.match(r.stdout, /^Host \*\.sbx$/m);
    assert.match(r.stdout, /ssh-proxy --connect 10\.0\.0\.1:8124 --actor alice --strip-suffix \.sbx %n$/m);
  });

  test('ssh needs an instance; ssh-proxy is hidden from the command list', async () => {
    const r = await sbx(['ssh']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /missing INSTANCE/);
    const help = await sbx(['--help']);
    assert.match(help.stdout, /^ {2}ssh +open an SSH session to an instance/m);
    assert.doesNotMatch(help.stdout, /ssh-proxy/);
  });

  test('an instance or actor that is not a plain name is a usage error before anything runs', async () => {
    const r = await sbx(['ssh', 'agent a1; rm -rf /', '--actor', 'alice']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /instance "agent a1; rm -rf \/" is not a name/);
    const p = await sbx(['ssh-proxy', 'agent-a1', '--actor', "o'brien"]);
    assert.equal(p.code, 2);
    assert.match(p.stderr, /actor "o'brien" is not a name/);
  });

  test('ssh-proxy names the connector it cannot reach', async () => {
    const port = await closedPort();
    const r = await sbx(['ssh-proxy', 'agent-a1', '--connect', `127.0.0.1:${port}`, '--actor', 'alice']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, new RegExp(`cannot reach the SSH connector at 127\\.0\\.0\\.1:${port}`));
  });
});
