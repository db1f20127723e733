import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseTarget } from '../../../../src/gateway/ssh/connector.js';

void describe('SVC_GATEWAY_SSH_TARGETS endpoints (parseTarget)', () => {
  test('host:port and [v6]:port', () => {
    assert.deepEqual(parseTarget('10.0.0.5:22'), { host: '10.0.0.5', port: 22 });
    assert.deepEqual(parseTarget('vm-a.lab:2222'), { host: 'vm-a.lab', port: 2222 });
    assert.deepEqual(parseTarget('[fd00::5]:22'), { host: 'fd00::5', port: 22 });
  });

  test('anything else is a start-up error naming the variable', () => {
    for (const bad of ['10.0.0.5', '10.0.0.5:0', '10.0.0.5:70000', 'fd00::5:22', ':22', 'host:ssh'])
      assert.throws(() => parseTarget(bad), /SVC_GATEWAY_SSH_TARGETS: ".*" is not host:port/, bad);
  });
});
