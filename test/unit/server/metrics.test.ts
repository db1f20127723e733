import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { registerMetricsRoute } from '../../../src/server/metrics.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { AGENT_STATUS_LABELS, createMetrics, statusClass, TASK_STATE_LABELS } from '../../../src/observability/metrics.js';

/**
 * Spec 4.1's metric names, verbatim and in its order ("Metric names: svc_agents_connected (gauge);
 * …; svc_sessions_killed_total."), with the type it gives (the last two have none in the spec:
 * they are counters). Exported exactly so, even where promtool would like another spelling.
 */
const SPEC_4_1_METRICS: Array<[string, string]> = [
  ['svc_agents_connected', 'gauge'],
  ['svc_agents_by_status', 'gauge'],
  ['svc_tasks_by_state', 'gauge'],
  ['svc_commands_total', 'counter'],
  ['svc_commands_by_result', 'counter'],
  ['svc_command_latency_seconds', 'histogram'],
  ['svc_task_outcomes_total', 'counter'],
  ['svc_agentshare_inbox_bytes', 'gauge'],
  ['svc_session_reconciliations_total', 'counter'],
  ['svc_sessions_killed_total', 'counter'],
];

const OUR_METRICS: Array<[string, string]> = [
  ['svc_http_requests_total', 'counter'],
  ['svc_http_errors_total', 'counter'],
  ['svc_actor_shard_restarts_total', 'counter'],
  ['svc_errors_logged_total', 'counter'],
];

/** Metric family names of a Prometheus text exposition (its `# TYPE` lines). */
function families(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1] ?? '', m[2] ?? '');
  return out;
}

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
    for (const [name, type] of [...SPEC_4_1_METRICS, ...OUR_METRICS])
      assert.ok(text.includes(`# TYPE ${name} ${type}\n`), `${name} ${type}`);
    assert.match(text, /^svc_agents_connected 2$/m);
    assert.match(text, /^process_cpu_user_seconds_total /m);
  });

  void test('every metric name of spec 4.1 is exported exactly as spelled there (no suffix added or dropped)', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    // A sample in every family, so sample lines are checked too, not only TYPE lines.
    metrics.commandsByResult.inc({ result: 'success' });
    metrics.commandLatencySeconds.observe(0.1);
    metrics.sessionReconciliationsTotal.inc();
    metrics.sessionsKilledTotal.inc();
    metrics.commandsTotal.inc();
    const router = new Router();
    registerMetricsRoute(router, metrics);
    const text = (await inject(router, { method: 'GET', url: '/metrics' })).text;
    const exported = families(text);
    for (const [name, type] of SPEC_4_1_METRICS) {
      assert.equal(exported.get(name), type, `${name} is exported as a ${type} under exactly this name`);
      assert.equal(exported.has(`${name}_total`), false, `${name} is not renamed ${name}_total`);
      const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#') && l.startsWith(name));
      const suffixes = type === 'histogram' ? ['_bucket{', '_sum ', '_count ', '_sum{', '_count{'] : ['{', ' '];
      assert.ok(samples.length > 0, `${name} has samples`);
      for (const l of samples) {
        assert.ok(
          suffixes.some((s) => l.startsWith(name + s)),
          `sample line of ${name}: ${l}`,
        );
      }
    }
    assert.match(text, /^svc_commands_by_result\{result="success"\} 1$/m);
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
