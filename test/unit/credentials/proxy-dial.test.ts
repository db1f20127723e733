import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { send } from '../../../src/credentials/proxy.js';

// `localhost` is ::1 and 127.0.0.1 on many machines (Debian's installer writes both), in the
// resolver's order; an upstream listening on one of them only must still be reached.
test('every checked address is tried in turn: a server on 127.0.0.1 only is reached when ::1 comes first', async (t) => {
  let seen = '';
  const upstream = createServer((req, res) => {
    seen = String(req.headers['authorization']);
    res.end('ok');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.after(() => upstream.close());
  const { port } = upstream.address() as AddressInfo;
  const res = await send(
    {
      lease_id: 'credlease_x',
      agent_id: 'a',
      instance_id: 'i',
      session_id: null,
      method: 'GET',
      url: `http://localhost:${port}/v1`,
      headers: {},
      body: null,
    },
    {
      url: new URL(`http://localhost:${port}/v1`),
      addresses: [
        { address: '::1', family: 6 },
        { address: '127.0.0.1', family: 4 },
      ],
    },
    { headerName: 'authorization', valuePrefix: 'Bearer ', value: 'tok-0123456789' },
    { timeoutMs: 10_000, maxResponseBytes: 1 << 20 },
  );
  assert.equal(res.status, 200);
  assert.equal(res.body, 'ok');
  assert.equal(seen, 'Bearer tok-0123456789');
});
