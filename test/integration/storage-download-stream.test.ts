/**
 * A 1 GiB download from `sandboxd serve` (a child process, as users run it) streams: the bytes
 * arrive identical (SHA-256 of the stream against SHA-256 of the file) while the server's RSS,
 * sampled from /proc during the transfer, stays flat. The client pauses now and then, so the
 * server spends part of the transfer backpressured: a server that buffered the file, or queued
 * chunks without waiting for the socket, would grow by hundreds of MiB.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdirSync, mkdtempSync, openSync, closeSync, rmSync, writeSync, ftruncateSync, readFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { spawnServe, type ServeProcess } from '../support/serve-process.js';

const GIB = 1024 ** 3;
/** Allowed RSS growth of the server during the download (the file is 16 times this). */
const RSS_GROWTH_LIMIT_BYTES = 64 * 1024 ** 2;

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/u.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? 0 : Number(m[1]) * 1024;
}

async function sha256OfFile(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

describe('streamed downloads', () => {
  const base = mkdtempSync(join(tmpdir(), 'sbx-dl-'));
  let server: ServeProcess | undefined;
  after(async () => {
    if (server !== undefined && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exit;
    }
    rmSync(base, { recursive: true, force: true });
  });

  test('a 1 GiB file downloads byte-identical with flat server memory', { timeout: 10 * 60_000 }, async () => {
    const global = join(base, 'storage', 'global');
    mkdirSync(global, { recursive: true });
    // Sparse, with random 1 MiB blocks spread over it so a reordered or dropped chunk shows.
    const file = join(global, 'big.bin');
    const fd = openSync(file, 'w');
    ftruncateSync(fd, GIB);
    for (let i = 0; i < 16; i++) writeSync(fd, randomBytes(1024 * 1024), 0, 1024 * 1024, i * (GIB / 16) + 4096 * i);
    closeSync(fd);
    const expected = await sha256OfFile(file);

    server = spawnServe(join(base, 'state'), { SVC_STORAGE_DIR: join(base, 'storage'), SVC_ADMIN_ADDR: 'off', LOG_LEVEL: 'warn' });
    const url = await server.url();
    const pid = server.child.pid ?? 0;
    const download = (path: string, onChunk?: (bytes: number, res: IncomingMessage) => void) =>
      new Promise<{ status: number; length: string | undefined; sha: string; bytes: number }>((resolve, reject) => {
        get(`${url}api/v1/storage/global/_download?path=${path}`, (res) => {
          const h = createHash('sha256');
          let bytes = 0;
          res.on('data', (d: Buffer) => {
            h.update(d);
            bytes += d.byteLength;
            onChunk?.(bytes, res);
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, length: res.headers['content-length'], sha: h.digest('hex'), bytes }));
          res.on('error', reject);
        }).on('error', reject);
      });

    // Warm up the route (first-request allocations are not the stream's), then the baseline.
    await download('missing.bin');
    await new Promise((r) => setTimeout(r, 500));
    const baseline = rssBytes(pid);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(pid));
    }, 25);
    let nextPause = 128 * 1024 ** 2;
    const got = await download('big.bin', (bytes, res) => {
      if (bytes >= nextPause) {
        // Stop reading for a moment: the socket fills and the server is backpressured.
        nextPause += 128 * 1024 ** 2;
        res.pause();
        setTimeout(() => res.resume(), 300);
      }
    });
    clearInterval(sampler);
    peak = Math.max(peak, rssBytes(pid));

    assert.equal(got.status, 200);
    assert.equal(got.length, String(GIB));
    assert.equal(got.bytes, GIB);
    assert.equal(got.sha, expected, 'the streamed bytes are the file');
    const growth = peak - baseline;
    process.stdout.write(
      `# server RSS ${(baseline / 2 ** 20).toFixed(1)} MiB before, peak ${(peak / 2 ** 20).toFixed(1)} MiB during a 1 GiB download\n`,
    );
    assert.ok(growth < RSS_GROWTH_LIMIT_BYTES, `server RSS grew by ${(growth / 2 ** 20).toFixed(1)} MiB during the download`);
  });
});
