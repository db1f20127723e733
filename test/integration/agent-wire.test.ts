/**
 * The real sandbox-agent process against a minimal mTLS gRPC server written here with the same
 * raw serializers (no sandboxd): registration with real SystemInfo, heartbeats at the
 * acknowledged 1 s interval, Ping/Pong, a command's output with correct seq/offset/eof, the
 * server going away and coming back (output produced meanwhile delivered once, in order), and
 * ShutdownSignal.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, hostname, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { AgentServiceMethods, v1 } from '../../proto/index.js';
import { createStandaloneCa, writeAgentBundle, type CaMaterial } from '../../src/identity/ca.js';
import { DEADLINE_MS, waitFor as waitForCondition } from '../support/wait.js';

const AGENT_BIN = fileURLToPath(new URL('../../src/bin/sandbox-agent.js', import.meta.url));
const INSTANCE = 'i-wire-1';

type Call = grpc.ServerDuplexStream<v1.AgentMessage, v1.IManagementMessage>;

/** One Connect stream as the test server sees it. */
interface Conn {
  readonly call: Call;
  readonly messages: v1.AgentMessage[];
  send(m: v1.IManagementMessage): void;
}

/** A Connect-only server; `onRegistration` answers the agent's registration. */
class WireServer {
  readonly conns: Conn[] = [];
  readonly #server = new grpc.Server();
  onRegistration: (conn: Conn, reg: v1.IAgentRegistration) => void = () => undefined;
  /** While true, received messages are dropped (a server that crashed with data in its buffers). */
  deaf = false;

  constructor(readonly ca: CaMaterial) {
    this.#server.register<v1.AgentMessage, v1.IManagementMessage>(
      AgentServiceMethods.Connect.path,
      (call: Call) => this.#connect(call),
      (m: v1.IManagementMessage) => Buffer.from(v1.ManagementMessage.encode(m).finish()),
      (b: Buffer) => v1.AgentMessage.decode(b),
      'bidi',
    );
  }

  #connect(call: Call): void {
    const san = call.getAuthContext()?.sslPeerCertificate?.subjectaltname ?? '';
    const id = call.metadata.get('x-agent-instance-id')[0];
    if (typeof id !== 'string' || !san.split(', ').includes(`URI:spiffe://sandbox.local/agent/${id}`)) {
      call.emit('error', { code: grpc.status.PERMISSION_DENIED, details: 'identity mismatch' });
      return;
    }
    const conn: Conn = { call, messages: [], send: (m) => void call.write(m) };
    this.conns.push(conn);
    call.on('data', (m: v1.AgentMessage) => {
      if (this.deaf) return;
      conn.messages.push(m);
      if (m.payload === 'registration') this.onRegistration(conn, m.registration as v1.IAgentRegistration);
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined);
  }

  listen(port = 0): Promise<number> {
    const creds = grpc.ServerCredentials.createSsl(
      Buffer.from(this.ca.caCertPem),
      [{ private_key: Buffer.from(this.ca.serverKeyPem), cert_chain: Buffer.from(this.ca.serverCertPem) }],
      true,
    );
    return new Promise((res, rej) => this.#server.bindAsync(`127.0.0.1:${port}`, creds, (err, p) => (err ? rej(err) : res(p))));
  }

  /** All messages of all streams, in arrival order per stream. */
  all(): v1.AgentMessage[] {
    return this.conns.flatMap((c) => c.messages);
  }

  stop(): void {
    this.#server.forceShutdown();
  }
}

function accept(conn: Conn, extra: v1.IRegistrationAck = {}): void {
  conn.send({ registrationAck: { accepted: true, message: 'welcome', heartbeatIntervalSeconds: 1, serverTimeMs: Date.now(), ...extra } });
  conn.send({ sessionQuery: { reportAll: true } });
}

/** Waits for `get` to answer (the shared helper, with this file's argument order). */
function waitFor<T>(get: () => T | undefined | false, what: string, deadlineMs: number = DEADLINE_MS.process): Promise<T> {
  return waitForCondition(what, get, { deadlineMs, intervalMs: 20 });
}

interface AgentProc {
  readonly child: ChildProcess;
  log: string;
  readonly exited: Promise<number | null>;
}

function startAgent(port: number, certs: string, workDir: string): AgentProc {
  const child = spawn(
    process.execPath,
    [
      AGENT_BIN,
      '--server',
      `127.0.0.1:${port}`,
      '--certs',
      certs,
      '--agent-id',
      'agent-wire',
      '--instance-id',
      INSTANCE,
      '--work-dir',
      workDir,
      '--labels',
      'zone=test',
      '--log-level',
      'debug',
      '--reconnect-max-ms',
      '1000',
      '--kill-grace-ms',
      '500',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const p: AgentProc = { child, log: '', exited: new Promise((res) => child.once('exit', (code) => res(code))) };
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => (p.log += d));
  return p;
}

/** Output chunks of a command from a message list: [stream, chunk]. */
function chunksOf(msgs: readonly v1.AgentMessage[], commandId: string): ['stdout' | 'stderr' | 'log', v1.IOutputChunk][] {
  const out: ['stdout' | 'stderr' | 'log', v1.IOutputChunk][] = [];
  for (const m of msgs) {
    const s = m.payload === 'stdout' || m.payload === 'stderr' || m.payload === 'log' ? m.payload : undefined;
    const c = s ? m[s] : undefined;
    if (s && c && c.streamId === commandId) out.push([s, c]);
  }
  return out;
}

function resultOf(msgs: readonly v1.AgentMessage[], commandId: string): v1.ICommandResult | undefined {
  return msgs.find((m) => m.payload === 'commandResult' && m.commandResult?.commandId === commandId)?.commandResult ?? undefined;
}

describe('sandbox-agent on the wire', () => {
  let ca: CaMaterial;
  let dir: string;
  let certs: string;
  const agents: AgentProc[] = [];
  const servers: WireServer[] = [];

  before(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'agent-wire-')));
    ca = await createStandaloneCa('sandbox.local');
    certs = join(dir, 'certs');
    await writeAgentBundle(certs, ca, { instanceId: INSTANCE });
  });

  after(async () => {
    for (const a of agents) a.child.kill('SIGKILL');
    await Promise.all(agents.map((a) => a.exited));
    for (const s of servers) s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('registers with real system info, heartbeats every second, answers pings, streams a command', async () => {
    const server = new WireServer(ca);
    servers.push(server);
    server.onRegistration = (conn) => accept(conn);
    const port = await server.listen();
    const agent = startAgent(port, certs, dir);
    agents.push(agent);

    const conn = await waitFor(() => server.conns[0], 'a Connect stream');
    const first = await waitFor(() => conn.messages[0], 'first message');
    assert.equal(first.payload, 'registration', 'registration is the first message');
    const reg = first.registration as v1.IAgentRegistration;
    assert.equal(reg.agentId, 'agent-wire');
    assert.equal(reg.instanceId, INSTANCE);
    assert.equal(reg.hostname, hostname());
    assert.equal(reg.profile, 'basic');
    assert.deepEqual(reg.labels, { zone: 'test' });
    assert.match(reg.agentVersion ?? '', /^\d+\.\d+\.\d+/);
    assert.match(reg.system?.os ?? '', /^Linux/);
    assert.equal(reg.system?.cpuCores, cpus().length);
    assert.equal(reg.system?.memoryBytes, totalmem());
    assert.ok((reg.system?.diskBytes ?? 0) > 0);

    await waitFor(() => conn.messages.some((m) => m.payload === 'sessionReport'), 'session report');
    const beats = await waitFor(() => {
      const hb = conn.messages.filter((m) => m.payload === 'heartbeat');
      return hb.length >= 4 ? hb : undefined;
    }, '4 heartbeats');
    const times = beats.map((b) => b.heartbeat?.timestampMs ?? 0);
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
    assert.ok(
      gaps.slice(1).every((g) => g >= 500 && g <= 5000),
      `heartbeat gaps ${gaps.join(',')} follow the 1 s interval`,
    );
    assert.equal(beats[0]?.heartbeat?.status, v1.AgentStatus.READY);
    const metrics = conn.messages.filter((m) => m.payload === 'metrics').map((m) => m.metrics as v1.IMetrics);
    assert.ok(metrics.length >= 3);
    assert.equal(metrics[0]?.memoryTotalBytes, totalmem());
    assert.equal(metrics[0]?.loadAvg?.length, 3);

    conn.send({ ping: { timestampMs: 424242 } });
    await waitFor(() => conn.messages.some((m) => m.payload === 'pong' && m.pong?.timestampMs === 424242), 'pong');

    conn.send({
      command: {
        commandId: 'cmd-1',
        command: 'sh',
        args: ['-c', 'for i in 1 2 3; do echo "line-$i"; done; echo oops >&2; printf tail; exit 3'],
      },
    });
    const res = await waitFor(() => resultOf(conn.messages, 'cmd-1'), 'command result');
    const chunks = chunksOf(conn.messages, 'cmd-1');
    assert.deepEqual(
      chunks.map(([, c]) => c.seq),
      chunks.map((_, i) => i + 1),
      'seq counts 1..n over all streams',
    );
    for (const stream of ['stdout', 'stderr'] as const) {
      const mine = chunks.filter(([s]) => s === stream).map(([, c]) => c);
      let offset = 0;
      for (const c of mine) {
        assert.equal(c.offset, offset, `${stream} offsets are contiguous`);
        offset += c.data?.length ?? 0;
      }
      assert.equal(mine.at(-1)?.eof, true, `${stream} ends with eof`);
    }
    const text = (s: string): string => Buffer.concat(chunks.filter(([k]) => k === s).map(([, c]) => Buffer.from(c.data ?? []))).toString();
    assert.equal(text('stdout'), 'line-1\nline-2\nline-3\ntail');
    assert.equal(text('stderr'), 'oops\n');
    assert.deepEqual([res.exitCode, res.success, res.lastSeq], [3, false, chunks.length]);
    const idxResult = conn.messages.findIndex((m) => m.payload === 'commandResult');
    const lastChunk = conn.messages.findLastIndex(
      (m) => (m.payload === 'stdout' || m.payload === 'stderr') && m[m.payload]?.streamId === 'cmd-1',
    );
    assert.ok(idxResult > lastChunk, 'the result follows the last chunk');

    conn.send({ config: { config: { heartbeat_interval_seconds: '2', surprise: 'x' } } });
    await waitFor(() => agent.log.includes('unknown config key ignored'), 'unknown config key logged');
    assert.match(agent.log, /"key":"heartbeat_interval_seconds","value":"2","msg":"config applied"/);
    assert.ok(!agent.log.includes('DEP0123'), 'no TLS-servername-is-an-IP warning');

    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, 'SIGTERM stops the agent gracefully');
    server.stop();
  });

  test('survives the server going away: output produced meanwhile arrives once, in order', async () => {
    const work = join(dir, 'resume');
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work);
    const serverA = new WireServer(ca);
    servers.push(serverA);
    serverA.onRegistration = (conn) => accept(conn);
    const port = await serverA.listen();
    const agent = startAgent(port, certs, work);
    agents.push(agent);
    const connA = await waitFor(() => serverA.conns[0], 'stream to server A');
    await waitFor(() => connA.messages.some((m) => m.payload === 'heartbeat'), 'registered with A');

    // Batch 1 while connected; batch 2 only once the test says so (after A is gone); then "end".
    const script = [
      'i=0; while [ $i -lt 50 ]; do echo "before-$i"; i=$((i+1)); done',
      'while [ ! -e go ]; do sleep 0.05; done',
      'i=0; while [ $i -lt 500 ]; do echo "during-$i"; i=$((i+1)); done; touch printed',
      'while [ ! -e go2 ]; do sleep 0.05; done; echo end',
    ].join('; ');
    connA.send({ command: { commandId: 'res-1', command: 'sh', args: ['-c', script] } });
    await waitFor(
      () =>
        chunksOf(connA.messages, 'res-1')
          .map(([, c]) => Buffer.from(c.data ?? []).toString())
          .join('')
          .includes('before-49\n'),
      'batch 1 at A',
    );

    serverA.stop();
    await waitFor(() => agent.log.includes('"msg":"disconnected"'), 'agent noticed the disconnect');
    writeFileSync(join(work, 'go'), '');
    await waitFor(() => existsSync(join(work, 'printed')), 'batch 2 printed while disconnected');

    const serverB = new WireServer(ca);
    servers.push(serverB);
    const heldByA = Math.max(0, ...chunksOf(connA.messages, 'res-1').map(([, c]) => c.seq ?? 0));
    let cursorsSeen: v1.ICommandCursor[] = [];
    serverB.onRegistration = (conn, reg) => {
      cursorsSeen = reg.cursors ?? [];
      // B stands for the same logical server: it holds what A received.
      accept(conn, { cursors: [{ commandId: 'res-1', lastSeq: heldByA }] });
    };
    await serverB.listen(port);
    const connB = await waitFor(() => serverB.conns[0], 'agent reconnected to B');
    await waitFor(
      () =>
        chunksOf(connB.messages, 'res-1')
          .map(([, c]) => Buffer.from(c.data ?? []).toString())
          .join('')
          .includes('during-499\n'),
      'batch 2 at B',
    );
    writeFileSync(join(work, 'go2'), '');
    const res = await waitFor(() => resultOf(connB.messages, 'res-1'), 'result at B');

    assert.ok(
      cursorsSeen.some((c) => c.commandId === 'res-1' && (c.lastSeq ?? 0) >= heldByA),
      'registration carries the resume cursor',
    );
    const all = [...chunksOf(connA.messages, 'res-1'), ...chunksOf(connB.messages, 'res-1').filter(([, c]) => (c.seq ?? 0) > heldByA)];
    assert.deepEqual(
      all.map(([, c]) => c.seq),
      all.map((_, i) => i + 1),
      'every seq once, in order, across both servers',
    );
    assert.ok(!connB.messages.some((m) => m.payload === 'outputGap'), 'nothing was lost');
    const text = Buffer.concat(all.map(([, c]) => Buffer.from(c.data ?? []))).toString();
    const want = [
      ...Array.from({ length: 50 }, (_, i) => `before-${i}\n`),
      ...Array.from({ length: 500 }, (_, i) => `during-${i}\n`),
      'end\n',
    ].join('');
    assert.equal(text, want);
    assert.equal(res.exitCode, 0);
    assert.equal(res.lastSeq, all.length);

    // ShutdownSignal: running commands get the grace period, then their group is killed; exit 0.
    connB.send({ command: { commandId: 'long-1', command: 'sleep', args: ['1000'] } });
    await waitFor(
      () => connB.messages.some((m) => m.payload === 'heartbeat' && m.heartbeat?.status === v1.AgentStatus.BUSY),
      'busy heartbeat',
    );
    connB.send({ shutdown: { reason: 'test over', gracePeriodSeconds: 1 } });
    const killed = await waitFor(() => resultOf(connB.messages, 'long-1'), 'result of the long command');
    assert.equal(killed.exitCode, 137);
    assert.ok(connB.messages.some((m) => m.payload === 'heartbeat' && m.heartbeat?.status === v1.AgentStatus.SHUTTING_DOWN));
    assert.equal(await agent.exited, 0);
  });

  test('a stream cut mid-output loses nothing: what was in flight is resent after the server cursor', async (t) => {
    const serverA = new WireServer(ca);
    servers.push(serverA);
    serverA.onRegistration = (conn) => accept(conn);
    const port = await serverA.listen();
    const agent = startAgent(port, certs, dir);
    agents.push(agent);
    const connA = await waitFor(() => serverA.conns[0], 'stream to server A');
    await waitFor(() => connA.messages.some((m) => m.payload === 'heartbeat'), 'registered with A');
    const lines = 3000;
    // Throttled (a pause every 100 lines) so the cut lands mid-output.
    connA.send({
      command: {
        commandId: 'cut-1',
        command: 'sh',
        args: ['-c', `i=0; while [ $i -lt ${lines} ]; do echo "n-$i"; i=$((i+1)); [ $((i % 100)) -eq 0 ] && sleep 0.02; done; true`],
      },
    });
    // Cut while output is streaming: A stops taking in data (what the agent sends now is lost in
    // flight), then dies; B restarts on the same port and holds what A received.
    await waitFor(() => chunksOf(connA.messages, 'cut-1').length >= 1, 'output streaming to A', 30_000);
    serverA.deaf = true;
    // The behaviour under test: 150 ms in which what the agent sends is lost in flight.
    await sleep(150);
    serverA.stop();
    const heldByA = Math.max(0, ...chunksOf(connA.messages, 'cut-1').map(([, c]) => c.seq ?? 0));
    const serverB = new WireServer(ca);
    servers.push(serverB);
    let sentBeforeCut = 0;
    serverB.onRegistration = (conn, reg) => {
      sentBeforeCut = reg.cursors?.find((c) => c.commandId === 'cut-1')?.lastSeq ?? 0;
      accept(conn, { cursors: [{ commandId: 'cut-1', lastSeq: heldByA }] });
    };
    await serverB.listen(port);
    const connB = await waitFor(() => serverB.conns[0], 'agent reconnected to B');
    const res = await waitFor(() => resultOf(connB.messages, 'cut-1') ?? resultOf(connA.messages, 'cut-1'), 'result');
    const fromB = chunksOf(connB.messages, 'cut-1');
    assert.ok(
      fromB.every(([, c]) => (c.seq ?? 0) > heldByA),
      'B gets nothing it already holds',
    );
    const all = [...chunksOf(connA.messages, 'cut-1'), ...fromB];
    assert.deepEqual(
      all.map(([, c]) => c.seq),
      all.map((_, i) => i + 1),
    );
    const text = Buffer.concat(all.map(([, c]) => Buffer.from(c.data ?? []))).toString();
    assert.equal(text, Array.from({ length: lines }, (_, i) => `n-${i}\n`).join(''));
    assert.equal(res.lastSeq, all.length);
    assert.ok(heldByA < all.length, 'the cut happened before the end of the output');
    assert.ok(sentBeforeCut > heldByA, 'output was lost in flight (and resent)');
    t.diagnostic(`cut: A held seq ${heldByA}, the agent had sent ${sentBeforeCut}, ${all.length} chunks in all`);
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
  });
});
