import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import { DEFAULT_NETWORK, detectAccelerator, isolatedNetworkXml, prepareHost } from '../../../src/host/prepare.js';

void describe('host prepare', () => {
  void test('the network it defines reaches only the host: no <forward>, no DHCP, no DNS', () => {
    const xml = isolatedNetworkXml(DEFAULT_NETWORK);
    assert.ok(!xml.includes('<forward'));
    assert.ok(!xml.includes('<dhcp'));
    assert.match(xml, /<dns enable='no'\/>/);
    assert.match(xml, /<ip address='192\.168\.213\.1' netmask='255\.255\.255\.0'\/>/);
    assert.match(xml, /<bridge name='sbxbr0'/);
  });

  void test('a kvm_pvm /dev/kvm (or none) means TCG, with the reason', () => {
    const a = detectAccelerator();
    if (existsSync('/sys/module/kvm_pvm') || !existsSync('/dev/kvm')) assert.equal(a.accelerator, 'tcg');
    assert.ok(a.reason.length > 0);
  });

  void test('malformed names are refused before anything is touched', async () => {
    await assert.rejects(prepareHost({ network: { name: 'bad name', bridge: 'x', hostAddress: '10.0.0.1' }, install: false }), /malformed/);
    await assert.rejects(
      prepareHost({ network: { name: 'ok', bridge: 'a-bridge-name-too-long', hostAddress: '10.0.0.1' }, install: false }),
      /malformed/,
    );
  });
});
