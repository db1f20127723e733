import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isInProcessTestUri, isTestDriverUri, redactUri, uriDriver, uriTransport } from '../../../src/hypervisor/uri.js';

test('URI kinds', () => {
  assert.equal(uriDriver('qemu+ssh://h/system'), 'qemu');
  assert.equal(uriTransport('qemu+ssh://h/system'), 'ssh');
  assert.equal(uriTransport('qemu:///system'), '');
  assert.ok(isInProcessTestUri('test:///default'));
  assert.ok(isInProcessTestUri('test:///tmp/node.xml'));
  assert.ok(!isInProcessTestUri('test+unix:///default?socket=/x'));
  assert.ok(isTestDriverUri('test+unix:///default?socket=/x'));
  assert.ok(!isTestDriverUri('qemu:///system'));
});

test('redaction drops passwords and secret-looking query values, keeps the rest', () => {
  assert.equal(
    redactUri('qemu+ssh://ops:hunter2@host/system?keyfile=/root/.ssh/id&no_verify=1'),
    'qemu+ssh://ops@host/system?keyfile=redacted&no_verify=1',
  );
  assert.equal(redactUri('qemu+tls://host/system?pkipath=/etc/pki'), 'qemu+tls://host/system?pkipath=redacted');
  assert.equal(redactUri('test+unix:///default?socket=/run/x.sock'), 'test+unix:///default?socket=/run/x.sock');
  assert.equal(redactUri('test:///default'), 'test:///default');
});
