import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { outputPublishTopics, outputSubscriptionTopic } from '../../../src/streaming/output-topics.js';
import { parseAgentOutputQuery, parseChatQuery } from '../../../src/streaming/query.js';

const q = (s: string) => new URLSearchParams(s);

function rejects(fn: () => unknown, pattern: RegExp): void {
  assert.throws(
    fn,
    (err: unknown) => err instanceof SvcError && err.code === 'request.invalid' && err.httpStatus === 400 && pattern.test(err.message),
  );
}

void describe('agent-output stream query', () => {
  void test('defaults: no filters, replay false, limit 100', () => {
    assert.deepEqual(parseAgentOutputQuery(q(''), {}), { replay: false, limit: 100 });
  });

  void test('all parameters', () => {
    assert.deepEqual(
      parseAgentOutputQuery(q('agent_id=agent-1&command_id=c-9&stream=stderr&replay=true&limit=1000'), {
        'last-event-id': '1700000000000000-42',
      }),
      {
        agentId: 'agent-1',
        commandId: 'c-9',
        stream: 'stderr',
        replay: true,
        limit: 1000,
        resume: { clock: 1_700_000_000_000_000, seq: 42 },
      },
    );
  });

  void test('replay=true without command_id is 400', () => {
    rejects(() => parseAgentOutputQuery(q('replay=true&agent_id=a'), {}), /command_id/);
  });

  void test('limit out of range or not an integer is 400', () => {
    for (const bad of ['0', '1001', '-5', '1.5', 'ten', ''])
      rejects(() => parseAgentOutputQuery(q(`command_id=c&limit=${bad}`), {}), /limit/);
  });

  void test('bad stream, replay, ids and cursors are 400 naming the problem', () => {
    rejects(() => parseAgentOutputQuery(q('stream=stdin'), {}), /stream/);
    rejects(() => parseAgentOutputQuery(q('replay=yes'), {}), /replay/);
    rejects(() => parseAgentOutputQuery(q('agent_id='), {}), /agent_id/);
    rejects(() => parseAgentOutputQuery(q(`command_id=${'x'.repeat(300)}`), {}), /command_id/);
    rejects(() => parseAgentOutputQuery(q('agent_id=a%00b'), {}), /agent_id/);
    rejects(() => parseAgentOutputQuery(q('agent_id=a&agent_id=b'), {}), /agent_id/);
    rejects(() => parseAgentOutputQuery(q(''), { 'last-event-id': 'sess-3' }), /Last-Event-ID/);
  });

  void test('the header cursor wins over last_event_id; the query parameter works alone', () => {
    assert.deepEqual(parseAgentOutputQuery(q('last_event_id=5-1'), { 'last-event-id': '9-2' }).resume, { clock: 9, seq: 2 });
    assert.deepEqual(parseAgentOutputQuery(q('last_event_id=5-1'), {}).resume, { clock: 5, seq: 1 });
  });
});

void describe('agent-output chat query', () => {
  void test('command_id is required', () => {
    rejects(() => parseChatQuery(q('session_id=s'), {}), /command_id/);
    assert.deepEqual(parseChatQuery(q('command_id=c'), {}), { commandId: 'c', replay: false });
  });

  void test('session, replay and a resume cursor', () => {
    assert.deepEqual(parseChatQuery(q('command_id=c&session_id=ab-cd&replay=1'), { 'last-event-id': 'ab-cd-7' }), {
      commandId: 'c',
      sessionId: 'ab-cd',
      replay: true,
      resume: { sessionId: 'ab-cd', seq: 7 },
    });
    assert.deepEqual(parseChatQuery(q('command_id=c'), { 'last-event-id': 'other-3' }).resume, { sessionId: 'other', seq: 3 });
  });

  void test('a malformed cursor or one of another session is 400', () => {
    rejects(() => parseChatQuery(q('command_id=c'), { 'last-event-id': 'nodash' }), /Last-Event-ID/);
    rejects(() => parseChatQuery(q('command_id=c&session_id=s1'), { 'last-event-id': 's2-4' }), /session s2/);
  });
});

void describe('agent-output topics', () => {
  void test('a chunk reaches each filter combination that matches it, exactly once', () => {
    const topics = outputPublishTopics('agent-1', 'cmd-1', 'stdout');
    assert.equal(new Set(topics).size, 8);
    const filters = [
      {},
      { agentId: 'agent-1' },
      { commandId: 'cmd-1' },
      { stream: 'stdout' as const },
      { agentId: 'agent-1', commandId: 'cmd-1', stream: 'stdout' as const },
    ];
    for (const f of filters) assert.ok(topics.includes(outputSubscriptionTopic(f)), JSON.stringify(f));
    for (const f of [{ agentId: 'agent-2' }, { stream: 'stderr' as const }, { agentId: 'agent-2', commandId: 'cmd-1' }])
      assert.ok(!topics.includes(outputSubscriptionTopic(f)), JSON.stringify(f));
  });
});
