import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ipInRanges, parseIp, parseIpRange } from '../../../src/util/ip.js';
import { ConfigValueError, parseIpRanges } from '../../../src/config/parsers.js';

describe('IP addresses and ranges', () => {
  test('parses IPv4, IPv6 (compressed, expanded, embedded IPv4) and maps ::ffff:a.b.c.d to IPv4', () => {
    assert.deepEqual(parseIp('10.0.0.1'), [10, 0, 0, 1]);
    assert.deepEqual(parseIp('::1'), [...new Array<number>(15).fill(0), 1]);
    assert.deepEqual(parseIp('0000:0000:0000:0000:0000:0000:0000:0001'), parseIp('::1'));
    assert.deepEqual(parseIp('::ffff:127.0.0.1'), [127, 0, 0, 1]);
    assert.deepEqual(parseIp('0000:0000:0000:0000:0000:ffff:7f00:0001'), [127, 0, 0, 1]);
    assert.deepEqual(parseIp('fe80::1%eth0')?.slice(0, 2), [0xfe, 0x80]);
    for (const bad of ['', '1.2.3', '1.2.3.256', '01.2.3.4444', '1::2::3', '12345::', 'a:b:c:d:e:f:0:1:2', 'example.com', ':::']) {
      assert.equal(parseIp(bad), null, bad);
    }
  });

  test('CIDR matching, IPv4 and IPv6, mapped addresses included', () => {
    const r = parseIpRanges('127.0.0.0/8, ::1 10.1.0.0/16,fd00::/8');
    assert.ok(ipInRanges('127.9.9.9', r));
    assert.ok(ipInRanges('::ffff:127.0.0.1', r));
    assert.ok(ipInRanges('::1', r));
    assert.ok(ipInRanges('10.1.255.1', r));
    assert.ok(!ipInRanges('10.2.0.1', r));
    assert.ok(ipInRanges('fdab::7', r));
    assert.ok(!ipInRanges('fe80::1', r));
    assert.ok(!ipInRanges('::2', r));
    assert.ok(!ipInRanges('garbage', r));
    assert.ok(ipInRanges('192.0.2.1', parseIpRanges('0.0.0.0/0')));
    assert.ok(!ipInRanges('::1', parseIpRanges('0.0.0.0/0')));
    assert.ok(ipInRanges('10.9.9.9', [parseIpRange('::ffff:10.0.0.0/104')!]), 'a mapped network keeps its IPv4 meaning');
    assert.deepEqual(parseIpRanges('none'), []);
    assert.deepEqual(parseIpRanges('NONE'), []);
  });

  test('malformed ranges are refused', () => {
    for (const bad of ['10.0.0.0/33', '::/129', '10.0.0.0/8/8', 'example.com', '10.0.0.0/x', 'none,10.0.0.1']) {
      assert.throws(() => parseIpRanges(bad), ConfigValueError, bad);
    }
  });
});
