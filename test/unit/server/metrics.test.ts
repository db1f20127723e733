import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { registerMetricsRoute } from '../../../src/server/metrics.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { AGENT_STATUS_LABELS, createMetrics, statusClass, TASK_STATE_LABELS } from '../../../src/observability/metrics.js';

const SPEC_METRICS: Array<[string, string]> = [
  ['svc_agents_connected', 'gauge'],
  ['svc_agents_by_status', 'gauge'],
  ['svc_tasks_by_state', 'gauge'],
  ['svc_commands_total', 'counter'],
  ['svc_commands_by_result_total', 'counter'],
  ['svc_command_latency_seconds', 'histogram'],
  ['svc_task_outcomes_total', 'counter'],
  ['svc_agentshare_inbox_bytes', 'gauge'],
  ['svc_session_reconciliations_total', 'counter'],
  ['svc_sessions_killed_total', 'counter'],
  ['svc_http_requests_total', 'counter'],
  ['svc_http_errors_total', 'counter'],
  ['svc_actor_shard_restarts_total', 'counter'],
  ['svc_errors_logged_total', 'counter'],
];

async function scrape(): Promise<{ text: string; contentType: string | undefined }> {
  const metrics = createMetrics();
  metrics.agentsConnected.set(2);
  const router = new Router();
  registerMetricsRoute(router, metrics);
  const res = await inject(router, { method: 'GET', url: '/metrics' });
  assert.equal(res.status, 200);
  return { text: res.text, contentType: res.headers['content-type'] };
}

void describe('metrics', () => {
  void test('/metrics serves the Prometheus text format with every spec metric and its type', async () => {
    const { text, contentType } = await scrape();
    assert.match(contentType ?? '', /^text\/plain; version=0\.0\.4/);
    for (const [name, type] of SPEC_METRICS) assert.ok(text.includes(`# TYPE ${name} ${type}\n`), `${name} ${type}`);
    assert.match(text, /^svc_agents_connected 2$/m);
    assert.match(text, /^process_cpu_user_seconds_total /m);
  });

  void test('every agent status, task state and task outcome is pre-set to 0', async () => {
    const { text } = await scrape();
    for (const s of AGENT_STATUS_LABELS) assert.match(text, new RegExp(`^svc_agents_by_status\\{status="${s}"\\} 0$`, 'm'));
    for (const s of TASK_STATE_LABELS) assert.match(text, new RegExp(`^svc_tasks_by_state\\{state="${s}"\\} 0$`, 'm'));
    for (const o of ['success', 'failure']) assert.match(text, new RegExp(`^svc_task_outcomes_total\\{outcome="${o}"\\} 0$`, 'm'));
  });

  void test('registries are independent (no global default registry)', async () => {
    const a = createMetrics({ defaultMetrics: false });
    const b = createMetrics({ defaultMetrics: false });
    a.commandsTotal.inc(5);
    assert.match(await a.registry.metrics(), /^svc_commands_total 5$/m);
    assert.match(await b.registry.metrics(), /^svc_commands_total 0$/m);
  });

  void test('status classes are bounded', () => {
    assert.equal(statusClass(204), '2xx');
    assert.equal(statusClass(503), '5xx');
    assert.equal(statusClass(0), 'aborted');
  });
});
