/**
 * sbx against a running server: health, contexts pointing at it, errors and exit codes, and the
 * live event tail (which must survive being interrupted cleanly).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS, settled } from '../support/wait.js';
import { closedPort, serverPort } from '../support/ports.js';
import { runSbx, SBX_BIN, sbxEnv, sbxJson, startCliServer, waitFor, type CliServer } from './cli-harness.js';

let srv: CliServer;
before(async () => {
  srv = await startCliServer();
});
after(async () => {
  await srv?.stop();
});

describe('sbx health and errors', () => {
  test('health --json is the deep health document; the human form names the server', async () => {
    const deep = await sbxJson(srv, ['health']);
    assert.equal(deep['status'], 'ok');
    assert.equal(deep['ready'], true);
    assert.equal(typeof deep['uptime_seconds'], 'number');
    assert.equal(typeof deep['agent_count'], 'number');
    const human = await runSbx(srv, ['health']);
    assert.equal(human.code, 0);
    assert.match(human.stdout, new RegExp(`^server:\\s+${srv.baseUrl.replace(/\./g, '\\.')}$`, 'm'));
    assert.match(human.stdout, /^ready:\s+yes$/m);
    assert.ok(!human.stdout.includes('\u001b['), 'no colour when stdout is not a terminal');
  });

  test('an unreachable server exits 5 naming the address', async () => {
    const port = await closedPort();
    const r = await runSbx(srv, ['agent', 'list'], { env: { SBX_SERVER: `http://127.0.0.1:${port}` } });
    assert.equal(r.code, 5);
    assert.match(r.stderr, new RegExp(`^sbx: network: cannot reach http://127\\.0\\.0\\.1:${port}: ECONNREFUSED`));
  });

  test("a 404 prints the server's code and message and exits 3; --json adds the envelope", async () => {
    const r = await runSbx(srv, ['ops', 'get', 'op-00000000-0000-0000-0000-000000000000']);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /^sbx: OPERATION_NOT_FOUND: /);
    const j = await runSbx(srv, ['ops', 'get', 'op-nope', '--json']);
    assert.equal(j.code, 3);
    assert.equal((JSON.parse(j.stdout) as { error: { code: string } }).error.code, 'OPERATION_NOT_FOUND');
  });

  test('a context saved with sbx context set is used by later commands', async () => {
    const env = { SBX_SERVER: '' };
    const port = await closedPort();
    assert.equal((await runSbx(srv, ['context', 'set', 'lab', '--server', srv.baseUrl, '--role', 'operator'], { env })).code, 0);
    assert.equal((await runSbx(srv, ['context', 'set', 'dead', '--server', `http://127.0.0.1:${port}`], { env })).code, 0);
    const cur = await sbxJson(srv, ['context', 'current'], { env });
    assert.deepEqual([cur['name'], cur['server'], cur['actor']], ['lab', srv.baseUrl, 'operator']);
    assert.equal((await runSbx(srv, ['health'], { env })).code, 0);
    assert.equal((await runSbx(srv, ['health', '--context', 'dead'], { env })).code, 5);
    assert.equal((await runSbx(srv, ['health'], { env: { ...env, SBX_CONTEXT: 'dead' } })).code, 5);
    // --server beats the context.
    assert.equal((await runSbx(srv, ['health', '--context', 'dead', '--server', srv.baseUrl], { env })).code, 0);
  });
});

describe('sbx events', () => {
  const post = async (body: Record<string, unknown>): Promise<void> => {
    const res = await fetch(`${srv.baseUrl}/api/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
  };

  test('events list --json filters by type prefix and VM', async () => {
    await post({ event_type: 'vm.defined', vm_name: 'agent-cli-ev1' });
    await post({ event_type: 'agent.connected', agent_id: 'a-ev1' });
    const page = await sbxJson<{ events: { event_type: string; vm_name: string }[]; last_event_id: number }>(srv, [
      'events',
      'list',
      '--type',
      'vm.*',
      '--vm',
      'agent-cli-ev1',
    ]);
    assert.deepEqual(
      page.events.map((e) => [e.event_type, e.vm_name]),
      [['vm.defined', 'agent-cli-ev1']],
    );
    assert.ok(page.last_event_id > 0);
  });

  test('events tail --json prints live events as lines and exits 0 on SIGINT', async () => {
    const child = spawn(process.execPath, [SBX_BIN, 'events', 'tail', '--json', '--type', 'vm.*', '--vm', 'agent-cli-tail'], {
      env: sbxEnv(srv),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, unknown>[] = [];
    let buf = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) !== -1) {
        lines.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
        buf = buf.slice(nl + 1);
      }
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    // Post until the tail is connected and has seen both (it only sees events after it connects).
    let n = 0;
    await waitFor(
      'the tail to print two vm.* events',
      async () => {
        if (lines.length >= 2) return true;
        await post({ event_type: n % 2 === 0 ? 'vm.started' : 'vm.stopped', vm_name: 'agent-cli-tail', details: { n } });
        await post({ event_type: 'agent.connected', agent_id: 'not-a-vm-event' });
        n++;
        return undefined;
      },
      DEADLINE_MS.process,
      () =>
        Promise.resolve(
          `the tail printed ${lines.length} lines after ${n} rounds of posts; its stderr ${JSON.stringify(stderr.slice(-600))}`,
        ),
    );
    for (const l of lines) {
      assert.equal(l['vm_name'], 'agent-cli-tail');
      assert.match(String(l['event_type']), /^vm\./);
      assert.equal(typeof l['id'], 'number');
    }
    assert.ok((lines[1]?.['id'] as number) > (lines[0]?.['id'] as number));
    child.kill('SIGINT');
    assert.equal(
      await settled('sbx events tail to exit after SIGINT', exited, {
        deadlineMs: DEADLINE_MS.process,
        lastState: () => `stderr ${JSON.stringify(stderr.slice(-600))}`,
      }),
      0,
      stderr,
    );
  });
});

describe('sbx events tail across a server restart', () => {
  test('reconnects to the restarted server on the same address and prints its events', async () => {
    const port = await serverPort();
    const addr = `127.0.0.1:${port}`;
    let first: CliServer | undefined = await startCliServer({ SVC_HTTP_ADDR: addr });
    let second: CliServer | undefined;
    const child = spawn(process.execPath, [SBX_BIN, 'events', 'tail', '--json', '--vm', 'agent-cli-restart'], {
      env: sbxEnv(first),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const postTo = async (base: string, n: number): Promise<void> => {
      const res = await fetch(`${base}/api/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ event_type: 'vm.started', vm_name: 'agent-cli-restart', details: { n } }),
      });
      await res.body?.cancel();
    };
    try {
      const tailOutput = (): Promise<string> =>
        Promise.resolve(`sbx stdout ${JSON.stringify(stdout.slice(-600))}, stderr ${JSON.stringify(stderr.slice(-600))}`);
      await waitFor(
        'the tail to print an event of the first server',
        async () => {
          await postTo(first!.baseUrl, 1);
          return stdout.includes('"n":1') ? true : undefined;
        },
        undefined,
        tailOutput,
      );
      await first.stop();
      first = undefined;
      second = await startCliServer({ SVC_HTTP_ADDR: addr });
      const base = second.baseUrl;
      await waitFor(
        'the tail to print an event of the restarted server',
        async () => {
          await postTo(base, 2);
          return stdout.includes('"n":2') ? true : undefined;
        },
        undefined,
        tailOutput,
      );
      assert.match(stderr, /reconnecting in/);
    } finally {
      child.kill('SIGINT');
      assert.equal(
        await settled('sbx events tail to exit after SIGINT', exited, {
          deadlineMs: DEADLINE_MS.process,
          lastState: () => `stderr ${JSON.stringify(stderr.slice(-600))}`,
        }),
        0,
        stderr,
      );
      await first?.stop();
      await second?.stop();
    }
  });
});
