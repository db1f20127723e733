/**
 * Hypervisor availability as a user sees it: /healthz/hypervisor and VM calls when libvirt
 * cannot be reached (dead socket) or does not answer (a socket that accepts and stays silent),
 * the fail-fast circuit, and recovery once libvirt is reachable again.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Hypervisor } from '@unraid/libvirt';
import { registerHypervisorHealthRoute } from '../../src/server/hypervisor-health.js';
import { SvcError } from '../../src/core/errors.js';
import { inject } from '../../src/http/inject.js';
import { Router } from '../../src/http/router.js';
import { LibvirtHypervisor } from '../../src/hypervisor/libvirt/libvirt-hypervisor.js';

function healthRouter(hv: LibvirtHypervisor): Router {
  const router = new Router();
  registerHypervisorHealthRoute(router, { hypervisor: hv });
  return router;
}

async function timed<T>(p: Promise<T>): Promise<{ ms: number; result: PromiseSettledResult<T> }> {
  const t0 = performance.now();
  const [result] = await Promise.allSettled([p]);
  return { ms: performance.now() - t0, result: result as PromiseSettledResult<T> };
}

function codeOf(r: PromiseSettledResult<unknown>): string {
  if (r.status !== 'rejected') assert.fail('expected a rejection');
  const err: unknown = r.reason;
  assert.ok(err instanceof SvcError, String(err));
  return err.code;
}

describe('hypervisor circuit breaker', () => {
  test('unreachable libvirt: 503 with Retry-After, the circuit opens, calls fail fast, then it recovers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-hv-'));
    const deadUri = `test+unix:///default?socket=${dir}/nonexistent.sock`;
    const reachable = { now: false };
    // The injected factory sends the same URI to the in-process driver once libvirt is "back".
    const hv = new LibvirtHypervisor({
      uris: [deadUri],
      readBudgetMs: 2000,
      coolDownMs: 400,
      pollIntervalMs: 60_000,
      virshEvents: 'off',
      connectionFactory: (uri) => new Hypervisor({ uri: reachable.now ? 'test:///default' : uri }),
    });
    const router = healthRouter(hv);
    try {
      await hv.start(); // resolves although the host is down: health says so
      const first = await inject(router, { method: 'GET', url: '/healthz/hypervisor' });
      assert.equal(first.status, 503);
      assert.match(first.headers['retry-after'] ?? '', /^[1-9]\d*$/);
      const body = first.json() as { error: { code: string; message: string }; status: string; hypervisor: string };
      assert.equal(body.error.code, 'HYPERVISOR_UNAVAILABLE');
      assert.match(body.error.message, /nonexistent\.sock/);
      assert.equal(body.status, 'down');
      assert.equal(body.hypervisor, deadUri);

      // start's sweep and the probe were two failures; one more opens the circuit.
      assert.equal(codeOf((await timed(hv.list())).result), 'HYPERVISOR_UNAVAILABLE');
      assert.equal((await hv.health()).circuit, 'open');

      const calls: (() => Promise<unknown>)[] = [
        () => hv.list(),
        () => hv.get('agent-x'),
        () => hv.startDomain('agent-x'),
        () => hv.define({ name: 'agent-x', vcpus: 1, memoryMiB: 64 }),
      ];
      for (const call of calls) {
        const { ms, result } = await timed(call());
        assert.equal(codeOf(result), 'HYPERVISOR_UNAVAILABLE');
        const err = (result as PromiseRejectedResult).reason as SvcError;
        assert.ok(typeof err.details?.['retryAfterSeconds'] === 'number' && err.details['retryAfterSeconds'] >= 1);
        assert.ok(ms < 1000, `fail-fast call took ${ms.toFixed(1)} ms`);
      }
      const open = await inject(router, { method: 'GET', url: '/healthz/hypervisor' });
      assert.equal(open.status, 503);
      assert.equal((open.json() as { circuit: string }).circuit, 'open');
      assert.ok(open.headers['retry-after']);

      // libvirt is back: after the cool-down one probe goes through and closes the circuit.
      reachable.now = true;
      // Waits out the 400 ms cool-down, the behaviour under test (wall-clock time: load cannot shorten it).
      await new Promise((r) => setTimeout(r, 500));
      const healed = await inject(router, { method: 'GET', url: '/healthz/hypervisor' });
      assert.equal(healed.status, 200, healed.text);
      assert.deepEqual(
        { ...(healed.json() as object), hosts: undefined },
        { status: 'ok', hypervisor: deadUri, circuit: 'closed', hosts: undefined },
      );
      assert.ok((await hv.list()).some((d) => d.name === 'test'));
    } finally {
      await hv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('libvirt slower than the read budget: 503 envelope with Retry-After within about the budget, then fail fast', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-hv-'));
    const sockPath = join(dir, 'silent.sock');
    const sockets = new Set<Socket>();
    // Accepts connections and never answers: libvirt's client waits for a reply that never comes.
    const server: Server = createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(sockPath, resolve));
    const hv = new LibvirtHypervisor({
      uris: [`test+unix:///default?socket=${sockPath}`],
      readBudgetMs: 300,
      connectBudgetMs: 60_000,
      coolDownMs: 30_000,
      pollIntervalMs: 60_000,
      virshEvents: 'off',
    });
    const router = healthRouter(hv);
    try {
      const started = await timed(hv.start());
      assert.equal(started.result.status, 'fulfilled');
      assert.ok(started.ms < 5000, `start took ${started.ms.toFixed(0)} ms`);

      const t0 = performance.now();
      const slow = await inject(router, { method: 'GET', url: '/healthz/hypervisor' });
      const ms = performance.now() - t0;
      assert.equal(slow.status, 503);
      assert.ok(Number(slow.headers['retry-after']) >= 1);
      const body = slow.json() as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'HYPERVISOR_UNAVAILABLE');
      assert.match(body.error.message, /took too long|longer than 300 ms/);
      assert.ok(ms < 3000, `health answered after ${ms.toFixed(0)} ms (budget 300 ms)`);

      // Third timeout opens the circuit; from then on nothing waits.
      await timed(hv.list());
      assert.equal((await hv.health()).circuit, 'open');
      const { ms: fastMs, result } = await timed(hv.get('agent-y'));
      assert.equal(codeOf(result), 'HYPERVISOR_UNAVAILABLE');
      assert.ok(fastMs < 250, `fail-fast call took ${fastMs.toFixed(1)} ms`);
      const open = await inject(router, { method: 'GET', url: '/healthz/hypervisor' });
      assert.equal(open.status, 503);
      assert.ok(Number(open.headers['retry-after']) >= 20, `Retry-After ${open.headers['retry-after']} reflects the 30 s cool-down`);
    } finally {
      // Free libvirt's waiting thread by hanging up, then stop (bounded even if it did not return).
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      const stopped = await timed(hv.stop());
      assert.ok(stopped.ms < 10_000, `stop took ${stopped.ms.toFixed(0)} ms`);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
