/**
 * The composition root's loop (src/main.ts startServer) with small components of its own: start
 * in list order, stop in reverse, one handler per frame kind (a kind claimed twice is a start-up
 * error naming both components, and what had started is stopped), services found by name (a
 * missing one is a start-up error naming who needed it), readiness expected from the start.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { Component, ComponentContext } from '../../src/component/component.js';
import { loadConfig } from '../../src/config/load.js';
import { EventStore } from '../../src/events/event-store.js';
import { startServer } from '../../src/main.js';
import { createMetrics } from '../../src/observability/metrics.js';

const config = loadConfig({ SVC_STATE_DIR: '/nonexistent/sandboxd-main-test', LOG_LEVEL: 'silent' });
const logger = pino({ level: 'silent' });
const opts = (components: Component[]): { components: Component[]; metrics: ReturnType<typeof createMetrics> } => ({
  components,
  metrics: createMetrics({ defaultMetrics: false }),
});

function part(
  name: string,
  log: string[],
  extra: Partial<Component> & { frames?: number[]; onStart?: (ctx: ComponentContext) => void } = {},
): Component {
  return {
    name,
    ...(extra.readiness !== undefined && { readiness: extra.readiness }),
    start(ctx) {
      log.push(`start ${name}`);
      extra.onStart?.(ctx);
      return Promise.resolve({
        ...(extra.frames !== undefined && {
          frames: new Map(extra.frames.map((k) => [k, (kind: number, key: string) => void log.push(`${name} got ${kind} ${key}`)])),
        }),
        stop: () => {
          log.push(`stop ${name}`);
          return Promise.resolve();
        },
      });
    },
  };
}

void describe('startServer with a list of components', () => {
  void test('starts in order, routes each frame kind to its component, stops in reverse', async () => {
    const log: string[] = [];
    let ctx: ComponentContext | undefined;
    const server = await startServer(
      config,
      logger,
      opts([part('a', log, { frames: [16] }), part('b', log, { frames: [34], onStart: (c) => (ctx = c) })]),
    );
    ctx?.dispatchFrame(34, 'k1', new Uint8Array());
    ctx?.dispatchFrame(16, 'k2', new Uint8Array());
    ctx?.dispatchFrame(99, 'nobody', new Uint8Array());
    await server.stop();
    assert.deepEqual(log, ['start a', 'start b', 'b got 34 k1', 'a got 16 k2', 'stop b', 'stop a']);
  });

  void test('a frame kind claimed twice is a start-up error naming both; what started is stopped', async () => {
    const log: string[] = [];
    await assert.rejects(
      startServer(config, logger, opts([part('a', log, { frames: [16, 17] }), part('b', log, { frames: [17] }), part('c', log)])),
      /frame kind 17 is claimed by both a and b/,
    );
    assert.deepEqual(log, ['start a', 'start b', 'stop b', 'stop a']);
  });

  void test('a service no earlier component provides is a start-up error naming who needs it', async () => {
    const log: string[] = [];
    const needy = part('needy', log, { onStart: (c) => void c.need('vms') });
    await assert.rejects(
      startServer(config, logger, opts([part('a', log), needy])),
      /component needy needs vms, which no component listed before it provides/,
    );
    assert.deepEqual(log, ['start a', 'start needy', 'stop a']);
  });

  void test('services are found by name; readiness is expected from the start and ready once started', async () => {
    const log: string[] = [];
    const store = new EventStore();
    const seen: unknown[] = [];
    const provider = part('provider', log, { readiness: ['p'], onStart: (c) => c.provide('events', store) });
    const user = part('user', log, {
      onStart: (c) => {
        seen.push(c.need('events'), c.readiness.state().reason);
      },
    });
    const server = await startServer(config, logger, opts([provider, user]));
    assert.deepEqual(seen, [store, 'ok']);
    assert.equal(server.find('events'), store);
    assert.equal(server.find('vms'), undefined);
    assert.throws(() => server.tasks, /needs tasks/);
    await server.stop();
  });
});
