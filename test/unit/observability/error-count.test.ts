/**
 * Every error- and fatal-level line counts into svc_errors_logged_total, once, whichever logger
 * wrote it: the root, a child bound to a component, or a worker shard forwarding its lines.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Writable } from 'node:stream';
import { ActorSystem } from '../../../actors/runtime/actor-system.js';
import { countErrorLines, createLogger, type LogConfig } from '../../../src/observability/log.js';
import { createMetrics, type Metrics } from '../../../src/observability/metrics.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

const BASE: LogConfig = { format: 'json', level: 'info', file: null, rotation: 'none', retentionDays: 7 };

function counted(cfg: Partial<LogConfig> = {}): {
  log: ReturnType<typeof createLogger>;
  metrics: Metrics;
  lines: string[];
  detach: () => void;
} {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  const log = createLogger({ ...BASE, ...cfg }, { destination });
  const metrics = createMetrics({ defaultMetrics: false });
  const detach = countErrorLines(log.logger, metrics.errorsLoggedTotal);
  return { log, metrics, lines, detach };
}

/** svc_errors_logged_total by component label. */
async function errorCounts(metrics: Metrics): Promise<Record<string, number>> {
  const m = await metrics.errorsLoggedTotal.get();
  return Object.fromEntries(m.values.map((v) => [String(v.labels.component), v.value]));
}

void describe('countErrorLines', () => {
  void test('an error line from a child logger counts once under its component; warn and info lines do not count', async () => {
    const { log, metrics, lines } = counted();
    const http = log.logger.child({ component: 'http' });
    http.child({ agent_id: 'a-1' }).warn('slow client');
    http.info('listening');
    assert.deepEqual(await errorCounts(metrics), {});
    http.child({ agent_id: 'a-1' }).error({ route: '/boom' }, 'handler threw');
    assert.deepEqual(await errorCounts(metrics), { http: 1 });
    await log.flush();
    assert.equal(lines.filter((l) => l.includes('handler threw')).length, 1, 'the line itself is written once');
  });

  void test('fatal counts; a component in the logged fields wins; no component is "main"; odd names are "other"', async () => {
    const { log, metrics } = counted();
    log.logger.fatal(new Error('failed to start'));
    log.logger.error({ component: 'inbox-quota' }, 'component did not stop cleanly');
    log.logger.child({ component: 'vms' }).error({ component: 'tasks' }, 'field beats binding');
    log.logger.child({ component: 'Not A Module Name!' }).error('odd');
    assert.deepEqual(await errorCounts(metrics), { main: 1, 'inbox-quota': 1, tasks: 1, other: 1 });
  });

  void test('detaching stops the counting; lines below the logger level are neither written nor counted', async () => {
    const quiet = counted({ level: 'fatal' });
    quiet.log.logger.error('filtered out');
    assert.deepEqual(await errorCounts(quiet.metrics), {});
    const { log, metrics, detach } = counted();
    log.logger.error('one');
    detach();
    detach();
    log.logger.error('not counted');
    assert.deepEqual(await errorCounts(metrics), { main: 1 });
  });

  void test("a worker shard's forwarded error line counts once; its warn line does not", async () => {
    const { log, metrics, lines } = counted();
    const system = await ActorSystem.start({
      mode: 'workers',
      shards: 1,
      actorModules: [new URL('./fixtures/log-actors.js', import.meta.url)],
      onEmit: () => undefined,
      logger: log.logger.child({ component: 'actors' }),
    });
    try {
      await system.spawn('logs', 'l-1');
      await system.call('l-1', 'log', { level: 'warn', msg: 'worker warns' });
      await system.call('l-1', 'log', { level: 'error', msg: 'worker fails' });
      // the worker's lines travel on their own port: wait until both have arrived
      await waitFor(
        "the worker's error line",
        async () => {
          await log.flush();
          return lines.some((l) => l.includes('worker fails'));
        },
        { deadlineMs: DEADLINE_MS.local, intervalMs: 10, lastState: () => JSON.stringify(lines.slice(-5)) },
      );
      assert.ok(lines.some((l) => l.includes('worker warns')));
      assert.ok(lines.some((l) => l.includes('worker fails')));
      assert.deepEqual(await errorCounts(metrics), { actors: 1 });
    } finally {
      await system.stop({ deadlineMs: 2000 });
    }
  });

  void test('a logger not made by createLogger has nothing to count with: detaching is a no-op', async () => {
    const { pino } = await import('pino');
    const metrics = createMetrics({ defaultMetrics: false });
    const detach = countErrorLines(pino({ level: 'silent' }), metrics.errorsLoggedTotal);
    detach();
    assert.deepEqual(await errorCounts(metrics), {});
  });
});
