import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import fc from 'fast-check';
import { SseSubscriber, WsSubscriber, type LightSubscriber } from '../../../../native-bench/scenarios/light-subscribers.js';

/**
 * A real TCP server that answers the first request with `head` and then writes `body` in the
 * pieces given by `cuts` (byte offsets), each piece its own write and its own TCP segment
 * (no-delay, and the next piece waits until the previous one was flushed).
 */
async function serve(head: string, body: Buffer, cuts: number[]): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.once('data', () => {
      void (async () => {
        socket.write(head);
        const at = [...new Set(cuts.filter((c) => c > 0 && c < body.length))].sort((a, b) => a - b);
        let from = 0;
        for (const c of [...at, body.length]) {
          if (!socket.write(body.subarray(from, c))) await once(socket, 'drain');
          await new Promise<void>((resolve) => setImmediate(resolve));
          from = c;
        }
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** Resolves once `sub` has seen seq `last` and `bytes` payload bytes (or closed). */
async function until(sub: LightSubscriber, last: number, bytes: number): Promise<void> {
  while ((sub.lastSeq < last || sub.bytes < bytes) && !sub.closed) await new Promise<void>((resolve) => setImmediate(resolve));
}

function chunked(payload: Buffer, pieces: number): Buffer {
  const out: Buffer[] = [];
  const size = Math.max(1, Math.ceil(payload.length / pieces));
  for (let i = 0; i < payload.length; i += size) {
    const p = payload.subarray(i, i + size);
    out.push(Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n'));
  }
  return Buffer.concat(out);
}

/** SSE events like the server's: chunk events (`id: <clock>-<seq>`), an error event, comments. */
function sseEvents(n: number): Buffer {
  let s = ': ping\n\n';
  for (let seq = 1; seq <= n; seq++) {
    s += `id: 7-${seq}\nevent: agent_output.chunk\ndata: {"seq":${seq},"data":"${'x'.repeat(seq * 37)}"}\n\n`;
    if (seq === 3) s += 'event: agent_output.error\ndata: {"code":"gap"}\n\n';
  }
  return Buffer.from(s);
}

function wsFrame(payload: Buffer): Buffer {
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x81, len]) : Buffer.from([0x81, 126, len >> 8, len & 0xff]);
  return Buffer.concat([head, payload]);
}

describe('bench light subscribers: seqs found in any split of the stream', () => {
  test('SSE over HTTP/1.1 chunked: every chunk event in order, errors counted, body bytes counted', async () => {
    const events = sseEvents(12);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 9 }), fc.array(fc.nat({ max: 5000 }), { maxLength: 30 }), async (pieces, cuts) => {
        const body = chunked(events, pieces);
        const srv = await serve(
          'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n',
          body,
          cuts.map((c) => c % body.length),
        );
        try {
          const sub = await SseSubscriber.open(`http://127.0.0.1:${srv.port}/api/v1/agent-output/stream?agent_id=a`);
          await until(sub, 12, events.length);
          assert.equal(sub.lastSeq, 12);
          assert.equal(sub.holes, 0);
          assert.equal(sub.errors, 1);
          assert.equal(sub.bytes, events.length);
          sub.close();
        } finally {
          await srv.close();
        }
      }),
      { numRuns: 25 },
    );
  });

  test('SSE refused with a non-200 status', async () => {
    const srv = await serve('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n', Buffer.alloc(0), []);
    try {
      await assert.rejects(SseSubscriber.open(`http://127.0.0.1:${srv.port}/x`), /status 404/);
    } finally {
      await srv.close();
    }
  });

  test('WebSocket: the seq of every message, short and 16-bit lengths, in any split', async () => {
    const frames: Buffer[] = [];
    for (let seq = 1; seq <= 10; seq++) {
      const pad = seq % 2 === 0 ? 'y'.repeat(300 + seq * 50) : 'z'.repeat(seq);
      frames.push(wsFrame(Buffer.from(`{"type":"output","data":"${pad}","seq":${seq}}`)));
    }
    const body = Buffer.concat(frames);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: body.length }), { maxLength: 40 }), async (cuts) => {
        const srv = await serve('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n', body, cuts);
        try {
          const sub = await WsSubscriber.open(srv.port);
          const payloadBytes = body.length - frames.reduce((n, f) => n + (f[1] === 126 ? 4 : 2), 0);
          await until(sub, 10, payloadBytes);
          assert.equal(sub.lastSeq, 10);
          assert.equal(sub.holes, 0);
          assert.equal(sub.bytes, payloadBytes);
          sub.close();
        } finally {
          await srv.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});
