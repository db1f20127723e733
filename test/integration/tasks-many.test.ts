/**
 * Many tasks (issue 7): 20 submitted at once all complete (each with its own VM and agent, at
 * most `maxConcurrent` past pending at a time); the list filters by state and pages without
 * losing or repeating a task; hostile manifests are 400 and create nothing; no hypervisor means
 * 503 task.no_capacity.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTaskHarness, type Json, type TaskHarness } from './tasks-harness.js';

void describe('tasks: many at once, list, bad input', () => {
  let h: TaskHarness;
  let repo: string;
  const completedIds: string[] = [];
  const failedIds: string[] = [];
  before(async () => {
    h = await startTaskHarness({ maxConcurrent: 6 });
    repo = await h.makeRepo();
  });
  after(() => h.stop());

  void test('20 tasks submitted at once all complete', async () => {
    const t0 = performance.now();
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        h.submit(h.manifest(repo, `Task number ${i}: greet the sandbox`, { lifecycle: { timeout: '30m' } })),
      ),
    );
    assert.equal(new Set(ids).size, 20);
    const tasks = await Promise.all(ids.map((id) => h.waitTask(id, undefined, 600_000)));
    const ms = performance.now() - t0;
    for (const t of tasks) {
      assert.equal(t['state'], 'completed', JSON.stringify(t));
      assert.equal((t['progress'] as Json)['tool_calls'], 5);
    }
    assert.equal(new Set(tasks.map((t) => t['vm_name'])).size, 20, 'one VM per task');
    completedIds.push(...ids);
    assert.equal(h.tasks.activeCount(), 0);
    process.stdout.write(`# 20 tasks (clone, VM + agent, fake CLI, artifacts) at once, 6 slots: ${ms.toFixed(0)} ms\n`);
  });

  void test('the list filters by state and pages newest first', async () => {
    for (let i = 0; i < 3; i++) failedIds.push(await h.submit(h.manifest(repo, `FAIL number ${i}`)));
    for (const id of failedIds) assert.equal((await h.waitTask(id))['state'], 'failed');

    const all = await h.request('GET', '/api/v1/tasks?limit=1000');
    assert.equal(all.status, 200);
    assert.equal(all.body['total_count'], 23);
    const everything = (all.body['tasks'] as Json[]).map((t) => String(t['id']));
    assert.deepEqual(everything.slice(0, 3), [...failedIds].reverse(), 'newest first');

    const def = await h.request('GET', '/api/v1/tasks');
    assert.equal((def.body['tasks'] as Json[]).length, 23, 'the default limit (50) covers all');

    const paged: string[] = [];
    for (let offset = 0; offset < 30; offset += 7) {
      const r = await h.request('GET', `/api/v1/tasks?limit=7&offset=${offset}`);
      assert.equal(r.body['total_count'], 23);
      paged.push(...(r.body['tasks'] as Json[]).map((t) => String(t['id'])));
    }
    assert.deepEqual(paged, everything, 'pages concatenate to the whole list, nothing lost or repeated');

    const failed = await h.request('GET', '/api/v1/tasks?state=failed');
    assert.equal(failed.body['total_count'], 3);
    assert.deepEqual(new Set((failed.body['tasks'] as Json[]).map((t) => t['id'])), new Set(failedIds));
    const both = await h.request('GET', '/api/v1/tasks?state=completed,failed&limit=2&offset=1');
    assert.equal(both.body['total_count'], 23);
    assert.equal((both.body['tasks'] as Json[]).length, 2);
    assert.deepEqual(
      (both.body['tasks'] as Json[]).map((t) => t['id']),
      everything.slice(1, 3),
    );
    const none = await h.request('GET', '/api/v1/tasks?state=running,pending');
    assert.deepEqual(none.body, { tasks: [], total_count: 0 });

    for (const q of [
      'state=finished',
      'state=',
      'state=running,,failed',
      'limit=0',
      'limit=abc',
      'limit=100000',
      'offset=-1',
      'state=failed&state=completed',
    ]) {
      const r = await h.request('GET', `/api/v1/tasks?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.text}`);
      assert.equal((r.body['error'] as Json)['code'], 'request.invalid', q);
    }
  });

  void test('hostile and malformed manifests are 400 task.invalid_manifest and create nothing', async () => {
    const before = (await h.request('GET', '/api/v1/tasks?limit=1')).body['total_count'];
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from(
        { length: 20 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`,
      ),
    ].join('\n');
    const bodies: Array<[string, unknown]> = [
      ['unknown field', { manifest: { name: 'x', repository: { url: repo }, prompt: 'p', sneaky: true } }],
      ['no prompt', { manifest: { name: 'x', repository: { url: repo } } }],
      ['bad duration', { manifest: { name: 'x', repository: { url: repo }, prompt: 'p', lifecycle: { timeout: '30 minutes' } } }],
      ['zero duration', { manifest: { name: 'x', repository: { url: repo }, prompt: 'p', lifecycle: { timeout: '0s' } } }],
      ['program from a placeholder', { manifest: { name: 'x', repository: { url: repo }, agent: { prompt: 'p', command: ['{prompt}'] } } }],
      ['option as a url', { manifest: { name: 'x', repository: { url: '--upload-pack=touch /tmp/pwned' }, prompt: 'p' } }],
      ['ext transport', { manifest: { name: 'x', repository: { url: 'ext::sh -c touch% /tmp/pwned' }, prompt: 'p' } }],
      ['both forms', { manifest: { name: 'x', repository: { url: repo }, prompt: 'p' }, manifest_yaml: 'name: x' }],
      ['neither form', {}],
      ['yaml bomb', { manifest_yaml: bomb }],
      ['yaml tag', { manifest_yaml: `name: !!js/function "x"\nrepository: {url: ${repo}}\nprompt: p` }],
      ['huge yaml', { manifest_yaml: `name: x\nprompt: "${'a'.repeat(70_000)}"\nrepository: {url: ${repo}}` }],
      ['not yaml', { manifest_yaml: 'name: [unclosed' }],
      ['manifest is a list', { manifest: [1, 2] }],
      [
        '__proto__ label',
        {
          manifest: JSON.parse(
            `{"name":"x","repository":{"url":"${repo}"},"prompt":"p","metadata":{"labels":{"__proto__":"x"}}}`,
          ) as unknown,
        },
      ],
      ['NUL in prompt', { manifest: { name: 'x', repository: { url: repo }, prompt: 'a\u0000b' } }],
    ];
    for (const [what, body] of bodies) {
      const r = await h.request('POST', '/api/v1/tasks', body);
      assert.equal(r.status, 400, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
      assert.equal((r.body['error'] as Json)['code'], 'task.invalid_manifest', what);
    }
    const notJson = await h.request('POST', '/api/v1/tasks', '{"manifest": ');
    assert.equal(notJson.status, 400);
    assert.equal((await h.request('GET', '/api/v1/tasks?limit=1')).body['total_count'], before, 'no task was created');
  });
});

void describe('tasks: no capacity', () => {
  let h: TaskHarness;
  before(async () => {
    // A libvirt URI nobody answers: the hypervisor reports down, and there is no idle agent pool.
    h = await startTaskHarness({ hypervisorUris: ['qemu+tcp://127.0.0.1:9/system'] });
  });
  after(() => h.stop());

  void test('POST is 503 task.no_capacity with Retry-After when no VM can be created', async () => {
    const r = await h.request('POST', '/api/v1/tasks', { manifest: { name: 'x', repository: { url: '/srv/none' }, prompt: 'p' } });
    assert.equal(r.status, 503, r.text);
    assert.equal((r.body['error'] as Json)['code'], 'task.no_capacity');
    assert.match(String((r.body['error'] as Json)['message']), /hypervisor is down/);
    assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
    const bad = await h.request('POST', '/api/v1/tasks', { manifest: { name: 'x' } });
    assert.equal(bad.status, 400, 'a bad manifest is still a 400 first');
    assert.equal((await h.request('GET', '/api/v1/tasks')).body['total_count'], 0);
  });
});
