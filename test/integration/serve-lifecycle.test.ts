/**
 * `sandboxd serve` as a user runs it: a child process with its own state dir and ports.
 * Start-up prints the address and serves /healthz; bad configuration stops start-up naming the
 * variable; SIGTERM drains and exits 0, also when it comes during start-up; a second signal exits at once.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { spawnServe, type ServeProcess } from '../support/serve-process.js';

const stateDirs: string[] = [];

after(() => {
  for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
});

function serve(env: Record<string, string>): ServeProcess {
  const stateDir = mkdtempSync(join(tmpdir(), 'sandboxd-serve-'));
  stateDirs.push(stateDir);
  return spawnServe(stateDir, env);
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const startAndGetUrl = (r: ServeProcess): Promise<string> => r.url();

describe('sandboxd serve', () => {
  test('prints its address, serves health and readiness, and exits 0 on SIGTERM', async () => {
    const r = serve({});
    const url = await startAndGetUrl(r);
    const health = await fetch(`${url}healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const ready = await fetch(`${url}readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { ready: true, reason: 'ok' });
    const deep = (await (await fetch(`${url}healthz/deep`)).json()) as Record<string, unknown>;
    assert.equal(typeof deep['uptime_seconds'], 'number');
    assert.equal(deep['agent_count'], 0);
    assert.equal((deep['uws'] as { native: boolean }).native, true);
    assert.match(r.stdout() + r.stderr(), /uWebSockets\.js native build loaded/);
    const started = Date.now();
    r.child.kill('SIGTERM');
    const { code } = await r.exit;
    assert.equal(code, 0, r.stderr());
    assert.ok(Date.now() - started < 15_000, 'shutdown is bounded');
    assert.match(r.stdout(), /"msg":"stopped"/);
  });

  test('SIGTERM during start-up stops the server cleanly once it is up, not with the signal', async () => {
    const r = serve({});
    // The first log line is written while the components start; the handlers are in by then.
    await waitFor('a start-up log line', () => (r.stdout().includes('"msg"') ? true : undefined));
    r.child.kill('SIGTERM');
    const { code, signal } = await r.exit;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, r.stderr());
    assert.match(r.stdout(), /"msg":"stopped"/);
  });

  test('invalid configuration stops start-up with a message naming the variable', async () => {
    const r = serve({ SVC_ACTORS: 'threads', LOG_FILE_RETENTION_DAYS: '-1' });
    const { code } = await r.exit;
    assert.equal(code, 2);
    assert.match(r.stderr(), /SVC_ACTORS="threads"/);
    assert.match(r.stderr(), /LOG_FILE_RETENTION_DAYS="-1"/);
  });

  test('a plaintext listener on a non-loopback address is refused without the unsafe override', async () => {
    const r = serve({ SVC_HTTP_ADDR: '0.0.0.0:0' });
    const { code } = await r.exit;
    assert.equal(code, 2);
    assert.match(r.stderr(), /SVC_HTTP_ADDR=0\.0\.0\.0:0: plaintext listener on a non-loopback address is refused/);
  });

  test('inline actors serve the same routes', async () => {
    const r = serve({ SVC_ACTORS: 'inline' });
    const url = await startAndGetUrl(r);
    const deep = (await (await fetch(`${url}healthz/deep`)).json()) as { actors: { mode: string } };
    assert.equal(deep.actors.mode, 'inline');
    r.child.kill('SIGINT');
    assert.equal((await r.exit).code, 0);
  });

  test('a second signal exits at once, even while a request is still draining', async () => {
    const r = serve({ SVC_SHUTDOWN_DEADLINE_MS: '60000' });
    const url = new URL(await startAndGetUrl(r));
    // An in-flight request that never finishes its body keeps the graceful drain waiting.
    const sock = connect(Number(url.port), '127.0.0.1');
    await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
    sock.write('POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"event_');
    sock.on('error', () => undefined);
    await new Promise((res) => setTimeout(res, 200));
    r.child.kill('SIGTERM');
    await waitFor('the shutdown log line', () => (/shutting down/.test(r.stdout()) ? true : undefined));
    const second = Date.now();
    r.child.kill('SIGTERM');
    const { code } = await r.exit;
    sock.destroy();
    assert.equal(code, 130, r.stderr());
    assert.ok(Date.now() - second < 5_000, 'the second signal does not wait for the drain');
    assert.match(r.stderr(), /second SIGTERM, exiting now/);
  });
});
