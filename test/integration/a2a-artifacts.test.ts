/**
 * Spec 4.8 and 9 against a real sandboxd and agent, with a client written from the A2A
 * specification's shapes: a message sent over pty-ws/v1 runs its text as a command, and the
 * artifact routes return exactly what it printed; A2A-Version selects 0.3 (default) or 1.0
 * (application/a2a+json) and anything else is refused as google.rpc.Status; ids that try to
 * leave the store are refused; the per-instance AgentCard names the binding.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { A2aWsClient, rawGet, textMessage, untilTerminal, useA2aBed } from './a2a-bed.js';

const bed = useA2aBed('a2a-art-1');

type Record_ = {
  artifact_id: string;
  task_id: string;
  created_at: string;
  artifact: { kind: string; stream: string; data: string; data_base64: string; seq: number };
};

const EXPECTED_STDOUT = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('') + 'café €\n';
const EXPECTED_STDERR = Buffer.concat([Buffer.from('oops\n'), Buffer.from([0xff, 0xfe])]);
const COMMAND = "seq 1 20000; printf 'caf\\303\\251 \\342\\202\\254\\n'; echo oops >&2; printf '\\377\\376' >&2";

describe('A2A task artifacts (spec 4.8, A2A-Version)', () => {
  let taskId = '';
  let listed: Record_[] = [];

  test('a message runs its text on the agent; the artifacts are byte-identical to what the command printed', async (t) => {
    const c = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const sent = await c.call('SendMessage', { message: textMessage(COMMAND) });
      assert.equal(sent.op, 'SendMessage.Response', JSON.stringify(sent.payload));
      taskId = sent.payload['task'].id as string;
      const done = await untilTerminal(c, taskId);
      assert.equal(done['status'].state, 'TASK_STATE_COMPLETED');
      assert.equal(done['metadata'].exit_code, 0);
    } finally {
      c.close();
    }
    const res = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { task_id: string; artifacts: Record_[] };
    assert.equal(body.task_id, taskId);
    listed = body.artifacts;
    assert.ok(listed.length >= 2, `${listed.length} artifacts`);
    t.diagnostic(`${listed.length} records for ${Buffer.byteLength(EXPECTED_STDOUT) + EXPECTED_STDERR.byteLength} bytes of output`);
    for (const [i, a] of listed.entries()) {
      assert.equal(a.task_id, taskId);
      assert.equal(a.artifact.kind, 'output_chunk');
      assert.equal(a.artifact.seq, i + 1);
      assert.ok(!Number.isNaN(Date.parse(a.created_at)));
    }
    const of = (stream: string) => listed.filter((a) => a.artifact.stream === stream);
    assert.equal(
      of('stdout')
        .map((a) => a.artifact.data)
        .join(''),
      EXPECTED_STDOUT,
      'stdout text, chunk by chunk, is what was printed',
    );
    assert.deepEqual(Buffer.concat(of('stdout').map((a) => Buffer.from(a.artifact.data_base64, 'base64'))), Buffer.from(EXPECTED_STDOUT));
    assert.deepEqual(
      Buffer.concat(of('stderr').map((a) => Buffer.from(a.artifact.data_base64, 'base64'))),
      EXPECTED_STDERR,
      'non-UTF-8 bytes survive in data_base64',
    );
  });

  test('one artifact by id; unknown task and artifact are 404', async () => {
    const first = listed[0];
    assert.ok(first !== undefined);
    const one = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts/${first.artifact_id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(await one.json(), first);
    const noTask = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/no-such-task/artifacts`);
    assert.equal(noTask.status, 404);
    const noArtifact = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts/${taskId}-stdout-9999`);
    assert.equal(noArtifact.status, 404);
    const noInstance = await fetch(`${bed.srv.base}/agents/no-such-instance/v1/tasks/${taskId}/artifacts`);
    assert.equal(noInstance.status, 404);
  });

  test('A2A-Version: none → 0.3 with application/json; 1.0 → application/a2a+json; the same records', async () => {
    const path = `${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts`;
    const v03 = await fetch(path);
    assert.equal(v03.headers.get('a2a-version'), '0.3');
    assert.match(v03.headers.get('content-type') ?? '', /^application\/json/);
    assert.match(v03.headers.get('vary') ?? '', /A2A-Version/);
    const v10 = await fetch(path, { headers: { 'A2A-Version': '1.0', accept: 'application/a2a+json' } });
    assert.equal(v10.status, 200);
    assert.equal(v10.headers.get('a2a-version'), '1.0');
    assert.match(v10.headers.get('content-type') ?? '', /^application\/a2a\+json/);
    assert.deepEqual(await v10.json(), await v03.json());
    const explicit03 = await fetch(path, { headers: { 'A2A-Version': '0.3' } });
    assert.equal(explicit03.headers.get('a2a-version'), '0.3');
    // A2A 1.0's unprefixed base serves the same.
    const unprefixed = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/tasks/${taskId}/artifacts`, {
      headers: { 'A2A-Version': '1.0' },
    });
    assert.equal(unprefixed.status, 200);
  });

  test('an unsupported A2A-Version is refused with 400 in the google.rpc.Status shape', async () => {
    for (const v of ['2.0', '1', '1.0.0', 'latest']) {
      const r = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts`, { headers: { 'A2A-Version': v } });
      assert.equal(r.status, 400, v);
      const b = (await r.json()) as {
        error: { code: number; status: string; message: string; details: { '@type': string; reason: string }[] };
      };
      assert.equal(b.error.code, 400);
      assert.equal(b.error.status, 'INVALID_ARGUMENT');
      assert.equal(typeof b.error.message, 'string');
      const info = b.error.details.find((d) => d['@type'] === 'type.googleapis.com/google.rpc.ErrorInfo');
      assert.equal(info?.reason, 'VERSION_NOT_SUPPORTED');
    }
  });

  test('errors under 1.0 are google.rpc.Status (TASK_NOT_FOUND); under 0.3 the v1 envelope', async () => {
    const r10 = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/nope/artifacts`, { headers: { 'A2A-Version': '1.0' } });
    assert.equal(r10.status, 404);
    const b10 = (await r10.json()) as { error: { code: number; status: string; details: { reason: string }[] } };
    assert.deepEqual([b10.error.code, b10.error.status, b10.error.details[0]?.reason], [404, 'NOT_FOUND', 'TASK_NOT_FOUND']);
    const r03 = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/v1/tasks/nope/artifacts`);
    const b03 = (await r03.json()) as { error: { code: string; message: string } };
    assert.equal(r03.status, 404);
    assert.equal(typeof b03.error.code, 'string');
  });

  test('traversal is refused: dot segments, encoded slashes and dots never reach outside the store', async () => {
    const p = bed.srv.port;
    const inst = bed.instanceId;
    const attempts = [
      `/agents/${inst}/v1/tasks/${taskId}/artifacts/..%2F..%2F..%2Fetc%2Fpasswd`,
      `/agents/${inst}/v1/tasks/..%2F${taskId}/artifacts`,
      `/agents/${inst}/v1/tasks/${taskId}/artifacts/%2e%2e`,
      `/agents/${inst}/v1/tasks/${taskId}/artifacts/../../../../etc/passwd`,
      `/agents/..%2F${inst}/v1/tasks/${taskId}/artifacts`,
      `/agents/${inst}/v1/tasks/${taskId}/artifacts/${encodeURIComponent('/etc/passwd')}`,
      `/agents/${inst}/v1/tasks/${taskId}..%2Fx/artifacts`,
    ];
    for (const path of attempts) {
      const r = await rawGet(p, path);
      assert.ok(r.status === 400 || r.status === 404, `${path}: ${r.status} ${r.text.slice(0, 200)}`);
      assert.ok(!r.text.includes('root:'), `${path} leaked a file`);
    }
  });

  test('the per-instance AgentCard names the pty-ws/v1 binding and its endpoint; an unknown instance is 404', async () => {
    const r = await fetch(`${bed.srv.base}/agents/${bed.instanceId}/.well-known/agent-card.json`);
    assert.equal(r.status, 200);
    const card = (await r.json()) as {
      name: string;
      url: string;
      preferredTransport: string;
      capabilities: { streaming: boolean; extensions: { uri: string }[] };
      supportedInterfaces: { url: string; protocolBinding: string }[];
      bindings: { uri: string; endpoint: string; operations: string[] }[];
      skills: { id: string }[];
    };
    const binding = 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1';
    assert.equal(card.preferredTransport, binding);
    assert.equal(card.bindings[0]?.uri, binding);
    assert.equal(card.bindings[0]?.endpoint, `${bed.srv.wsBase}/agents/${bed.instanceId}/sessions/{session_id}/attach`);
    assert.deepEqual([...(card.bindings[0]?.operations ?? [])].sort(), [
      'CancelTask',
      'GetTask',
      'ListTasks',
      'SendMessage',
      'SendStreamingMessage',
      'SubscribeToTask',
    ]);
    assert.equal(card.supportedInterfaces[0]?.protocolBinding, binding);
    assert.equal(card.capabilities.streaming, true);
    assert.ok(card.skills.length > 0);
    const none = await fetch(`${bed.srv.base}/agents/nobody-here/.well-known/agent-card.json`);
    assert.equal(none.status, 404);
  });

  test('after a server restart the artifacts are still served, byte for byte', async () => {
    const path = `/agents/${bed.instanceId}/v1/tasks/${taskId}/artifacts`;
    const before = await (await fetch(bed.srv.base + path)).json();
    await bed.restart();
    const after = await fetch(bed.srv.base + path);
    assert.equal(after.status, 200);
    assert.deepEqual(await after.json(), before);
  });
});
