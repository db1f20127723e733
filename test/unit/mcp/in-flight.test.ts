import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InFlight, rpcMessagesOf } from '../../../src/mcp/in-flight.js';

function server(): { closed: number; close(): Promise<void> } {
  const s = {
    closed: 0,
    close: () => {
      s.closed++;
      return Promise.resolve();
    },
  };
  return s;
}

void describe('InFlight (MCP cancellation across stateless requests)', () => {
  void test('a cancellation closes only the server answering that request id of that client certificate', () => {
    const inFlight = new InFlight();
    const a = server();
    const b = server();
    const c = server();
    inFlight.add('AA', [1], a);
    inFlight.add('AA', [2], b);
    inFlight.add('BB', [1], c);
    assert.equal(inFlight.cancel('AA', 1), 1);
    assert.deepEqual([a.closed, b.closed, c.closed], [1, 0, 0]);
    assert.equal(inFlight.cancel('CC', 2), 0, 'another certificate cannot cancel it');
    assert.equal(inFlight.cancel('AA', '2'), 0, 'ids keep their JSON type');
    assert.equal(b.closed, 0);
  });

  void test('a forgotten server is neither cancelled nor closed at stop; closeAll closes the rest', async () => {
    const inFlight = new InFlight();
    const a = server();
    const b = server();
    const forget = inFlight.add('AA', [7], a);
    inFlight.add('AA', [8], b);
    forget();
    assert.equal(inFlight.cancel('AA', 7), 0);
    await inFlight.closeAll();
    assert.deepEqual([a.closed, b.closed], [0, 1]);
    assert.equal(inFlight.size, 1);
  });

  void test('rpcMessagesOf reads single messages and batches, and nothing from a body that is not JSON', () => {
    const enc = (v: string) => new TextEncoder().encode(v);
    assert.deepEqual(rpcMessagesOf(enc('{"jsonrpc":"2.0","id":3,"method":"tools/list"}')), [
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    ]);
    assert.equal(rpcMessagesOf(enc('[{"method":"a"},{"method":"b"},7]')).length, 2);
    assert.deepEqual(rpcMessagesOf(enc('{not json')), []);
    assert.deepEqual(rpcMessagesOf(null), []);
  });
});
