/**
 * SSE over the real uWS listener: headers, frames, heartbeat, disconnect detection, server stop,
 * and backpressure-driven writes that lose nothing when the client reads slowly.
 */
import assert from 'node:assert/strict';
import { get, type IncomingMessage } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { Router } from '../../src/http/router.js';
import { sseFrame } from '../../src/http/sse.js';
import type { SseSink } from '../../src/http/types.js';
import { startHttpListener, type HttpListener } from '../../src/http/uws-server.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

const logger = pino({ level: 'silent' });

function open(port: number, path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => get({ host: '127.0.0.1', port, path }, resolve).on('error', reject));
}

/** Waits until `pred` holds (the shared helper; in-process, so the local deadline). */
async function until(what: string, pred: () => boolean, lastState?: () => string): Promise<void> {
  await waitFor(what, pred, { deadlineMs: DEADLINE_MS.local, intervalMs: 20, ...(lastState !== undefined && { lastState }) });
}

void describe('SSE streams', () => {
  let listener: HttpListener;
  const sinks = new Map<string, SseSink>();
  const closedSinks = new Set<SseSink>();
  /** Frames the backpressure producer wrote, and how often write() said "backpressure". */
  const bp = { total: 400, written: 0, backpressured: 0, drains: 0 };
  const FRAME_PAD = 'x'.repeat(32 * 1024);

  before(async () => {
    const router = new Router();
    router.add({
      method: 'GET',
      path: '/events/:topic',
      handler: (req) => ({
        sse: (sink) => {
          sinks.set(req.params.topic ?? '', sink);
          sink.onClose(() => closedSinks.add(sink));
          for (let i = 1; i <= 3; i++) sink.write(sseFrame({ event: 'output', id: i, data: `${req.params.topic} line ${i}\nsecond` }));
        },
      }),
    });
    router.add({
      method: 'GET',
      path: '/flood',
      handler: () => ({
        sse: (sink) => {
          const pump = (): void => {
            while (bp.written < bp.total && !sink.closed) {
              const ok = sink.write(sseFrame({ id: bp.written, data: `${bp.written} ${FRAME_PAD}` }));
              bp.written++;
              if (!ok) {
                bp.backpressured++;
                return;
              }
            }
            if (bp.written === bp.total) sink.close();
          };
          sink.onWritable(() => {
            bp.drains++;
            pump();
          });
          pump();
        },
      }),
    });
    router.add({
      method: 'GET',
      path: '/fails',
      handler: () => ({ sse: () => Promise.reject(new Error('producer broke')) }),
    });
    listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, sseHeartbeatMs: 100 });
  });

  after(() => listener.close());

  void test('headers, frames and the heartbeat comment', async () => {
    const res = await open(listener.port, '/events/alpha');
    assert.equal(res.statusCode, 200);
    assert.match(res.headers['content-type'] ?? '', /^text\/event-stream/);
    assert.equal(res.headers['cache-control'], 'no-cache');
    assert.equal(res.headers['x-accel-buffering'], 'no');
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (text += d));
    await until(
      'two heartbeat comments',
      () => (text.match(/: ping\n\n/g) ?? []).length >= 2,
      () => `received ${JSON.stringify(text.slice(-200))}`,
    );
    const events = text.split('\n\n').filter((b) => b.startsWith('event:'));
    assert.deepEqual(
      events,
      [1, 2, 3].map((i) => `event: output\nid: ${i}\ndata: alpha line ${i}\ndata: second`),
    );
    res.destroy();
  });

  void test('a client disconnect is noticed by the producer and the stream is released', async () => {
    const res = await open(listener.port, '/events/beta');
    await until('the beta stream to start', () => sinks.has('beta'));
    const sink = sinks.get('beta');
    assert.ok(sink && !sink.closed);
    res.destroy();
    await until('the sink to see the client go away', () => closedSinks.has(sink));
    assert.equal(sink.closed, true);
    assert.equal(sink.write('data: late\n\n'), false, 'writes after close are refused');
    await until(
      'no stream left open',
      () => listener.openStreams().sse === 0,
      () => `${listener.openStreams().sse} open`,
    );
  });

  void test('a slow reader gets every frame, in order, with writes paced by backpressure', async () => {
    const res = await open(listener.port, '/flood');
    res.pause();
    await until(
      'the producer to meet backpressure',
      () => bp.backpressured > 0,
      () => `written ${bp.written} of ${bp.total}`,
    );
    // The behaviour under test: for 200 ms the client reads nothing and the producer must stay stopped.
    await sleep(200);
    const writtenWhilePaused = bp.written;
    assert.ok(writtenWhilePaused < bp.total, 'the producer stopped while the client did not read');
    let buf = '';
    const ids: number[] = [];
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const id = /^id: (\d+)$/m.exec(block);
        if (id) ids.push(Number(id[1]));
      }
    });
    res.resume();
    await new Promise((r) => res.on('end', r));
    assert.equal(ids.length, bp.total);
    assert.ok(
      ids.every((id, k) => id === k),
      'frames arrive in order without gaps',
    );
    assert.ok(bp.drains > 0, 'onWritable resumed the producer');
  });

  void test('a failing producer ends its stream instead of crashing the server', async () => {
    const res = await open(listener.port, '/fails');
    await new Promise((r) => res.on('end', r).resume());
    assert.equal(res.statusCode, 200);
  });

  void test('stopping the server ends open streams', async () => {
    const own = await startHttpListener({
      host: '127.0.0.1',
      port: 0,
      router: (() => {
        const r = new Router();
        r.add({ method: 'GET', path: '/s', handler: () => ({ sse: () => undefined }) });
        return r;
      })(),
      logger,
    });
    const res = await open(own.port, '/s');
    const ended = new Promise((r) => res.on('end', r).on('error', r).on('close', r).resume());
    await until(
      'one open stream',
      () => own.openStreams().sse === 1,
      () => `${own.openStreams().sse} open`,
    );
    await own.close();
    await ended;
    assert.equal(own.openStreams().sse, 0);
  });
});
