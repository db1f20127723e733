import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { listenerUrl, originUrl, parseHostHeader, publicOrigin, type PublicUrlConfig } from '../../../src/http/public-url.js';
import { parseIpRanges } from '../../../src/config/parsers.js';

const LOOPBACK: PublicUrlConfig = { trustedProxies: parseIpRanges('127.0.0.0/8,::1'), listener: () => ({ host: '127.0.0.1', port: 8122 }) };

/** The HTTP origin and the WS listener (port 8121) URL a request gets. */
function urlsOf(headers: Record<string, string>, remoteAddress = '127.0.0.1', cfg: PublicUrlConfig = LOOPBACK): [string, string] {
  const o = publicOrigin({ headers, remoteAddress }, cfg);
  return [originUrl(o), listenerUrl(o, 'ws', 8121)];
}

describe('public URLs: the origin the caller reached us by', () => {
  test('Host with and without a port; the WS listener gets the same host name and its own port', () => {
    assert.deepEqual(urlsOf({ host: 'box.example:8122' }, '10.1.2.3'), ['http://box.example:8122', 'ws://box.example:8121/']);
    assert.deepEqual(urlsOf({ host: 'Box.Example' }, '10.1.2.3'), ['http://box.example', 'ws://box.example:8121/']);
    assert.deepEqual(urlsOf({ host: '192.0.2.7:80' }, '10.1.2.3'), ['http://192.0.2.7:80', 'ws://192.0.2.7:8121/']);
    const o = publicOrigin({ headers: { host: 'box.example:9000' }, remoteAddress: '10.1.2.3' }, LOOPBACK);
    assert.equal(originUrl(o, 'ws'), 'ws://box.example:9000');
  });

  test('IPv6 literals keep their brackets', () => {
    assert.deepEqual(urlsOf({ host: '[::1]:8122' }), ['http://[::1]:8122', 'ws://[::1]:8121/']);
    assert.deepEqual(urlsOf({ host: '[2001:DB8::5]' }, '2001:db8::9'), ['http://[2001:db8::5]', 'ws://[2001:db8::5]:8121/']);
    assert.deepEqual(parseHostHeader('[fe80::1]:1'), { hostname: '[fe80::1]', port: 1 });
  });

  test('forwarded headers from a trusted peer are honoured (Forwarded first, then X-Forwarded-*)', () => {
    const xf = { host: '127.0.0.1:8122', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'sandbox.example.com' };
    assert.deepEqual(urlsOf(xf), ['https://sandbox.example.com', 'ws://sandbox.example.com:8121/']);
    const o = publicOrigin({ headers: xf, remoteAddress: '127.0.0.1' }, LOOPBACK);
    assert.equal(originUrl(o, 'ws'), 'wss://sandbox.example.com');
    // uWebSockets.js spells an IPv4 peer of a dual-stack socket as a mapped IPv6 address.
    assert.deepEqual(urlsOf(xf, '0000:0000:0000:0000:0000:ffff:7f00:0001')[0], 'https://sandbox.example.com');
    assert.deepEqual(urlsOf(xf, '::ffff:127.0.0.1')[0], 'https://sandbox.example.com');
    assert.deepEqual(urlsOf(xf, '::1')[0], 'https://sandbox.example.com');
    assert.deepEqual(urlsOf({ ...xf, host: 'internal:8122', forwarded: 'for=192.0.2.60;proto=https;host="[2001:db8::1]:8443"' }), [
      'https://[2001:db8::1]:8443',
      'ws://[2001:db8::1]:8121/',
    ]);
    // Several hops: the last element is the one the trusted peer added, not the client's.
    assert.deepEqual(
      urlsOf({ host: 'internal', forwarded: 'host=evil.example;proto=http, host=good.example;proto=https' })[0],
      'https://good.example',
    );
    assert.deepEqual(
      urlsOf({ host: 'internal', 'x-forwarded-host': 'evil.example, good.example', 'x-forwarded-proto': 'http, https' })[0],
      'https://good.example',
    );
    // A trusted peer configured by CIDR.
    const cfg: PublicUrlConfig = { ...LOOPBACK, trustedProxies: parseIpRanges('10.0.0.0/8, fd00::/8') };
    assert.equal(urlsOf(xf, '10.200.0.1', cfg)[0], 'https://sandbox.example.com');
    assert.equal(urlsOf(xf, 'fd12::1', cfg)[0], 'https://sandbox.example.com');
    assert.equal(urlsOf(xf, '127.0.0.1', cfg)[0], 'http://127.0.0.1:8122', 'loopback is not in this list');
  });

  test('forwarded headers from an untrusted peer are ignored: only Host counts', () => {
    const headers = {
      host: 'box.example:8122',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'evil.example',
      forwarded: 'host=evil.example;proto=https',
    };
    assert.deepEqual(urlsOf(headers, '203.0.113.9'), ['http://box.example:8122', 'ws://box.example:8121/']);
    assert.deepEqual(urlsOf(headers, '::ffff:203.0.113.9'), ['http://box.example:8122', 'ws://box.example:8121/']);
    assert.deepEqual(urlsOf(headers, 'not an address'), ['http://box.example:8122', 'ws://box.example:8121/']);
    const nobody: PublicUrlConfig = { ...LOOPBACK, trustedProxies: parseIpRanges('none') };
    assert.deepEqual(urlsOf(headers, '127.0.0.1', nobody), ['http://box.example:8122', 'ws://box.example:8121/']);
  });

  test('a garbage host is never echoed: the next source, down to the listener address', () => {
    for (const bad of [
      'evil.example/path',
      'evil.example:8122/x',
      'a b',
      'evil.example:99999',
      'evil.example:0',
      'user@evil.example',
      '[::1',
      '[nothex::1]',
      '<script>',
      'evil.example\r\nx: y',
      '"quoted"',
      '-leading.example',
      `${'a'.repeat(64)}.example`,
      'a.0',
      '1.2.3',
      '01.2.3.4',
      'box.0x1f',
      '',
      ' ',
    ]) {
      assert.deepEqual(urlsOf({ host: bad }, '203.0.113.9'), ['http://127.0.0.1:8122', 'ws://127.0.0.1:8121/'], JSON.stringify(bad));
      // A trusted proxy's bad forwarded host falls back to the Host header.
      assert.deepEqual(urlsOf({ host: 'box.example', 'x-forwarded-host': bad, 'x-forwarded-proto': 'gopher' }), [
        'http://box.example',
        'ws://box.example:8121/',
      ]);
    }
    assert.deepEqual(urlsOf({}, '203.0.113.9'), ['http://127.0.0.1:8122', 'ws://127.0.0.1:8121/']);
    const wildcard: PublicUrlConfig = { ...LOOPBACK, listener: () => ({ host: '::', port: 1 }) };
    assert.deepEqual(urlsOf({}, '203.0.113.9', wildcard), ['http://127.0.0.1:1', 'ws://127.0.0.1:8121/']);
    const v6: PublicUrlConfig = { ...LOOPBACK, listener: () => ({ host: '::1', port: 1 }) };
    assert.deepEqual(urlsOf({}, '203.0.113.9', v6), ['http://[::1]:1', 'ws://[::1]:8121/']);
  });

  test('whatever the Host header, the URL names only a valid host (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (host) => {
        const [http, ws] = urlsOf({ host }, '203.0.113.9');
        const u = new URL(http);
        assert.equal(u.pathname, '/');
        assert.equal(u.search + u.hash + u.username, '');
        assert.equal(new URL(ws).pathname, '/');
        if (parseHostHeader(host) === null) assert.equal(http, 'http://127.0.0.1:8122');
        else assert.equal(http, `http://${host.trim().toLowerCase()}`);
      }),
    );
  });
});
