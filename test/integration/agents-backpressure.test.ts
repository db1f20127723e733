/**
 * Backpressure end to end (issue 16 item 0): while the agent is connected, no output is lost
 * because something inside sandboxd is behind, and a slow Exec reader slows only its own command.
 *
 * One real agent runs, at once: 8 Exec calls of `cat` on a 64 MiB random file (7 read at full
 * speed, 1 stops reading after its first MiB) and a PTY command (`stty raw -echo; cat` of the same
 * file, so the terminal passes the bytes unchanged) whose output the server's command client
 * collects. Judged on what a user sees, not on time:
 * - every stream is byte-identical to the file (sha256), with no `error` (gap) item;
 * - while the slow reader reads nothing, the 7 others and the PTY command finish, and its `cat`
 *   is still running on the agent, blocked on its pipe (the agent stopped reading it) — the slow
 *   reader held back only its own command, not the agent's stream;
 * - memory stays bounded: the server's Exec write backlog stays near its high-water mark instead
 *   of holding the slow reader's 63 MiB, and the RSS growth of server and agent stays below
 *   bounds derived from their buffers (see MEMORY below).
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import * as grpcJs from '@grpc/grpc-js';
import { AgentServiceMethods, v1 } from '../../proto/index.js';
import { AgentCommandClient } from '../../src/agent-link/command-client.js';
import { kExecHighWaterBytes } from '../../src/agent-link/exec-calls.js';
import { DEADLINE_MS } from '../support/wait.js';
import {
  agentCerts,
  agentCommands,
  killAll,
  operatorClient,
  spawnAgent,
  startTestServer,
  waitForStatus,
  type AgentProcess,
  type TestServer,
} from './agents-harness.js';

const MiB = 1024 * 1024;
/** TEST_BACKPRESSURE_MIB shrinks the file for a quick local run; the judged size is 64 MiB. */
const FILE_BYTES = Number(process.env['TEST_BACKPRESSURE_MIB'] ?? 64) * MiB;
const FAST_READERS = 7;
/** The slow reader stops reading once it has this much. */
const SLOW_READS_FIRST = 1 * MiB;

/**
 * MEMORY. Without backpressure the server would hold the slow reader's whole backlog (≈ 63 MiB)
 * in its Exec call, and the agent would read every `cat` to its end into its output buffer.
 * - Exec backlog of one call (bytes written to it, not yet taken by HTTP/2): the high-water mark (4 MiB)
 *   plus what was already on its way when the pause left — the agent's unsent output of the
 *   command (≤ 2 MiB, output-flow.ts), its gRPC write buffer, the HTTP/2 window and the actor
 *   ring. Bound: high-water mark + 12 MiB.
 * - Server RSS growth (this process: server, actor workers, the test's clients): rings and
 *   replay buffers of bounded size, plus the Exec backlog, plus GC slack of moving 600 MB.
 *   Bound 384 MiB, well under the 9 × 64 MiB an unbounded path would keep.
 * - Agent RSS growth: its output buffer (bound 64 MiB by default, holding sent chunks for resume),
 *   unsent output (≤ 16 MiB, output-flow.ts) and GC slack. Bound 256 MiB.
 */
const EXEC_BACKLOG_BOUND = kExecHighWaterBytes + 12 * MiB;
const SERVER_RSS_GROWTH_BOUND = 384 * MiB;
const AGENT_RSS_GROWTH_BOUND = 256 * MiB;

interface Reader {
  readonly name: string;
  bytes: number;
  readonly hash: ReturnType<typeof createHash>;
  errors: string[];
  exitCode: number | undefined;
  done: boolean;
  /** Stopped reading at stopAt (once). */
  stopped: boolean;
  readonly finished: Promise<grpc.StatusObject>;
  readonly call: grpc.ClientReadableStream<v1.ExecOutput>;
}

function startExec(client: grpc.Client, name: string, path: string, stopAt = Infinity): Reader {
  const call = client.makeServerStreamRequest<v1.IExecRequest, v1.ExecOutput>(
    AgentServiceMethods.Exec.path,
    (m) => Buffer.from(v1.ExecRequest.encode(m).finish()),
    (b) => v1.ExecOutput.decode(b),
    { agentId: 'agent-bp', command: 'cat', args: [path], timeoutSeconds: 1800 },
    new grpcJs.Metadata(),
    { deadline: Date.now() + 30 * 60_000 },
  );
  let resolve!: (s: grpc.StatusObject) => void;
  const r: Reader = {
    name,
    bytes: 0,
    hash: createHash('sha256'),
    errors: [],
    exitCode: undefined,
    done: false,
    stopped: false,
    finished: new Promise((res) => (resolve = res)),
    call,
  };
  call.on('data', (m: v1.ExecOutput) => {
    if (m.error) r.errors.push(m.error);
    if (m.complete) r.exitCode = m.exitCode;
    if (m.data.length > 0) {
      r.hash.update(m.data);
      r.bytes += m.data.length;
      if (r.bytes >= stopAt && !r.stopped) {
        r.stopped = true;
        call.pause();
      }
    }
  });
  call.on('error', () => undefined);
  call.on('status', (s: grpc.StatusObject) => {
    r.done = true;
    resolve(s);
  });
  return r;
}

/** No byte moving for this long is a stall (ms). */
const STALL_MS = 60_000;

/**
 * Resolves once `done()`; rejects when `progress()` has not changed for `stallMs`, with
 * `state()` in the message. Slow progress is fine: only a standstill fails.
 */
async function untilDoneOrStalled(
  what: string,
  done: () => boolean,
  progress: () => number,
  stallMs: number,
  state: () => string,
): Promise<void> {
  let last = progress();
  let lastChangeMs = Date.now();
  while (!done()) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = progress();
    if (now !== last) {
      last = now;
      lastChangeMs = Date.now();
    } else if (Date.now() - lastChangeMs >= stallMs) {
      throw new Error(`${what}: no output moved for ${stallMs / 1000} s (stalled at ${now} bytes)\n${state()}`);
    }
  }
}

/** The agent's pause/resume and server-flow debug lines, and its warnings. */
function flowLines(log: string): string[] {
  return log.split('\n').filter((l) => /output (paused|read again|flow from the server)|"level":(40|50)/.test(l));
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  return m ? Number(m[1]) * 1024 : 0;
}

void describe('backpressure: 8 Exec cats of 64 MiB and a PTY flood on one agent, one slow reader', () => {
  let ts: TestServer;
  let client: grpc.Client;
  /** The slow reader's own connection (an independent client, as in real use). */
  let slowClient: grpc.Client;
  let agent: AgentProcess;
  let file: string;
  let slowPath: string;
  let want: string;
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '2' });
    client = await operatorClient(ts);
    slowClient = await operatorClient(ts, 'slow-reader');
    file = join(ts.dir, 'random.bin');
    const data = randomBytes(FILE_BYTES);
    writeFileSync(file, data);
    want = createHash('sha256').update(data).digest('hex');
    // The slow reader's cat gets its own name, so the test can see it on the agent.
    slowPath = join(ts.dir, 'slow-reader.bin');
    symlinkSync(file, slowPath);
    const certs = await agentCerts(ts, 'i-bp');
    agent = spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-bp', instanceId: 'i-bp', workDir: ts.dir });
    await waitForStatus(ts, 'agent-bp', 'Ready', DEADLINE_MS.agent);
  });
  after(async () => {
    client.close();
    slowClient.close();
    await killAll([agent]);
    await ts.stop();
  });

  // A stall (every command paused, nothing in flight: seen once, issue 16) fails after STALL_MS
  // without progress, not after the calls' 30-minute deadline; slowness alone never fails it. It
  // takes about 8 s, 10 s under stress, minutes on a machine loaded far beyond its cores.
  void test(
    'every stream arrives byte-identical; the slow reader holds back only its own command; memory stays bounded',
    { timeout: 9 * 60_000 },
    async () => {
      const agentPid = agent.child.pid!;
      const rss0 = { server: process.memoryUsage.rss(), agent: rssOf(agentPid) };
      const peak = { server: rss0.server, agent: rss0.agent, backlog: 0 };
      const sample = (): void => {
        peak.server = Math.max(peak.server, process.memoryUsage.rss());
        try {
          peak.agent = Math.max(peak.agent, rssOf(agentPid));
        } catch {
          // the agent exited: the test fails elsewhere
        }
        peak.backlog = Math.max(peak.backlog, ts.server.agents.stats().execBacklogMaxBytes);
      };
      let outboxPeak = 0;
      let outboxNow = 0;
      const sampler = setInterval(sample, 20);
      // For the report: what the agent's actor queued for the main thread (bounded by the worker's pump).
      const outboxSampler = setInterval(() => {
        void ts.server
          .service('actors')
          .call<{ outboxQueuedBytes: number }>('agent:agent-bp', 'stats')
          .then((st) => {
            outboxNow = st.outboxQueuedBytes ?? 0;
            outboxPeak = Math.max(outboxPeak, outboxNow);
          })
          .catch(() => undefined);
      }, 100);

      // The PTY flood, through the server's command client (sessions and tasks use the same path).
      const commands = new AgentCommandClient(ts.server.service('actors'), ts.server.agents);
      const pty = { bytes: 0, hash: createHash('sha256'), gaps: 0 };
      const ptyCmd = await commands.start(
        'agent-bp',
        { command: 'sh', args: ['-c', `stty raw -echo && cat ${file}`], allocatePty: true, timeoutSeconds: 1800 },
        {
          output: (stream, data) => {
            if (stream !== 'stdout') return;
            pty.hash.update(data);
            pty.bytes += data.length;
          },
          gap: () => void (pty.gaps += 1),
        },
      );
      let ptyDone = false;
      const ptyResult = ptyCmd.result.then((r) => {
        ptyDone = true;
        return r;
      });

      const slow = startExec(slowClient, 'slow', slowPath, SLOW_READS_FIRST);
      const fast = Array.from({ length: FAST_READERS }, (_, i) => startExec(client, `fast-${i}`, file));

      try {
        // Phase 1: the slow reader reads nothing more; everything else must finish regardless.
        // Judged on progress, not time: a machine under load is slow (2.7 MB/s was seen with two
        // of these tests and four builds on 2 cores), a stall makes none. No byte for 60 s fails
        // with what each side was doing: the readers, the server's pauses and ring waits, the
        // agent's last pause/resume lines and which cats are alive.
        const moved = (): number => [...fast, slow].reduce((n, r) => n + r.bytes, pty.bytes);
        await untilDoneOrStalled(
          'the fast readers and the PTY command to finish',
          () => fast.every((r) => r.done) && ptyDone,
          moved,
          STALL_MS,
          () =>
            [
              `readers ${JSON.stringify([...fast, slow].map((r) => [r.name, r.bytes, r.done]))}, pty ${pty.bytes} bytes, done ${ptyDone}`,
              `server ${JSON.stringify({ ...ts.server.agents.stats(), latency: undefined })}, actor outbox ${outboxNow} bytes`,
              `cats alive ${agentCommands(agent).filter((c) => c.cmdline.startsWith('cat ')).length}`,
              `agent flow log:\n${flowLines(agent.log()).slice(-40).join('\n')}`,
            ].join('\n'),
        );
        const fastStatuses = await Promise.all(fast.map((r) => r.finished));
        const ptyR = await ptyResult;
        sample();
        const slowBytesThen = slow.bytes;
        const slowCatAlive = agentCommands(agent).some((c) => c.cmdline.includes('slow-reader.bin'));
        for (const [i, s] of fastStatuses.entries()) assert.equal(s.code, grpcJs.status.OK, `${fast[i]!.name}: ${s.details}`);
        assert.equal(slow.done, false, 'the slow reader is not done while it reads nothing');
        assert.ok(
          slowBytesThen < FILE_BYTES / 4,
          `the slow reader is far behind when the others have finished (${slowBytesThen} of ${FILE_BYTES} bytes)`,
        );
        assert.ok(slowCatAlive, "the slow reader's cat is still running: the agent stopped reading its pipe");
        assert.ok(ts.server.agents.stats().execPauses > 0, 'the server paused the slow command at the agent');
        assert.equal(ptyR.exit_code, 0, 'the PTY command succeeded');
        assert.equal(ptyDone, true);

        // Phase 2: the slow reader reads on and gets everything.
        slow.call.resume();
        await untilDoneOrStalled(
          'the slow reader to finish',
          () => slow.done,
          () => slow.bytes,
          STALL_MS,
          () => `slow reader at ${slow.bytes} bytes; server ${JSON.stringify({ ...ts.server.agents.stats(), latency: undefined })}`,
        );
        const slowStatus = await slow.finished;
        sample();
        assert.equal(slowStatus.code, grpcJs.status.OK, slowStatus.details);

        for (const r of [...fast, slow]) {
          assert.deepEqual(r.errors, [], `${r.name}: no output lost`);
          assert.equal(r.exitCode, 0, `${r.name}: cat exited 0`);
          assert.equal(r.bytes, FILE_BYTES, `${r.name}: every byte`);
          assert.equal(r.hash.digest('hex'), want, `${r.name}: sha256 of what it received equals the file's`);
        }
        assert.equal(pty.gaps, 0, 'PTY: no output lost');
        assert.equal(pty.bytes, FILE_BYTES, 'PTY: every byte');
        assert.equal(pty.hash.digest('hex'), want, "PTY: sha256 equals the file's");

        const grown = { server: peak.server - rss0.server, agent: peak.agent - rss0.agent };
        const mib = (n: number): string => `${(n / MiB).toFixed(1)} MiB`;
        assert.ok(
          peak.backlog <= EXEC_BACKLOG_BOUND,
          `the largest Exec write backlog peaked at ${mib(peak.backlog)} (bound ${mib(EXEC_BACKLOG_BOUND)})`,
        );
        assert.ok(
          grown.server <= SERVER_RSS_GROWTH_BOUND,
          `server RSS grew by ${mib(grown.server)} (bound ${mib(SERVER_RSS_GROWTH_BOUND)})`,
        );
        assert.ok(grown.agent <= AGENT_RSS_GROWTH_BOUND, `agent RSS grew by ${mib(grown.agent)} (bound ${mib(AGENT_RSS_GROWTH_BOUND)})`);
        process.stdout.write(
          `# backpressure: slow reader at ${mib(slowBytesThen)} when the others finished; exec backlog peak ${mib(peak.backlog)}; ` +
            `actor outbox peak ${mib(outboxPeak)}; RSS growth server ${mib(grown.server)}, agent ${mib(grown.agent)}; pauses sent ${ts.server.agents.stats().execPauses}\n`,
        );
      } finally {
        clearInterval(sampler);
        clearInterval(outboxSampler);
        for (const r of [...fast, slow]) if (!r.done) r.call.cancel();
        commands.stop();
      }
    },
  );
});
