/**
 * Entry of the bench client process (started by client-process.ts with fork, never imported):
 * simulated agents and subscribers, driven over IPC by the bench in the parent process. Each op
 * answers {id, ok, result} or {id, ok: false, error}; `fanout.follow` also sends {event: 'ack',
 * min} (the slowest subscriber's seq) every 2 ms for the parent's flow control, and
 * `fanout.agent` takes such acks back ({event: 'ack', min}, forwarded by the parent) to keep its
 * simulated agent at most `windowChunks` ahead of the subscribers in another process.
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { minSeq, SseSubscriber, totalBytes, WsSubscriber, type LightSubscriber, type SeqListener } from './light-subscribers.js';
import { postActivity } from './activity-collectors.js';
import { fleetStats, runFleet, stopFleet } from './fleet-agents.js';
import { fillReplay, runLatency, timeReplay } from './latency-client.js';
import { ptyText, SimAgent, type SimAgentTls } from './sim-agent.js';
import { cpuBetween, threadCpu } from './thread-cpu.js';

type Args = Record<string, unknown>;

let subs: LightSubscriber[] = [];
let waiter: (() => void) | undefined;
const notify: SeqListener = () => {
  const w = waiter;
  if (w !== undefined) {
    waiter = undefined;
    w();
  }
};
/** Resolves on the next subscriber event, or after `ms`. */
function progress(ms = 20): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    waiter = () => {
      clearTimeout(t);
      resolve();
    };
  });
}

async function connect(a: Args): Promise<{ sse: number; ws: number }> {
  for (const s of subs) s.close();
  subs = [];
  const opened: Promise<LightSubscriber>[] = [];
  for (let i = 0; i < Number(a['sse']); i++) opened.push(SseSubscriber.open(String(a['sseUrl']), notify));
  for (let i = 0; i < Number(a['ws']); i++)
    opened.push(WsSubscriber.open(Number(a['wsPort']), a['wsSubscribe'] as string | undefined, notify));
  subs = await Promise.all(opened);
  // let the subscriptions settle (WS subscribe replies)
  await sleep(200);
  return { sse: Number(a['sse']), ws: Number(a['ws']) };
}

interface Measured {
  bytes: number;
  seconds: number;
}

/** Measures bytes delivered to `subs` between warm-up end and measure end, calling `tick` meanwhile. */
async function measure(warmupMs: number, measureMs: number, run: (until: number) => Promise<void>): Promise<Measured> {
  const t0 = performance.now();
  await run(t0 + warmupMs);
  const b0 = totalBytes(subs);
  const m0 = performance.now();
  await run(m0 + measureMs);
  return { bytes: totalBytes(subs) - b0, seconds: (performance.now() - m0) / 1000 };
}

async function produce(a: Args): Promise<Record<string, unknown>> {
  const agent = new SimAgent({
    target: String(a['target']),
    tls: a['tls'] as SimAgentTls,
    agentId: String(a['agentId']),
    instanceId: String(a['instanceId']),
  });
  agent.register();
  await agent.acked;
  const commandId = String(a['commandId']);
  const chunkBytes = Number(a['chunkBytes']);
  const window = Number(a['windowChunks']);
  const variants = Array.from({ length: 8 }, (_, i) => ptyText(chunkBytes, i * 1000));
  let seq = 0;
  let offset = 0;
  const run = async (until: number): Promise<void> => {
    while (performance.now() < until) {
      if (seq - minSeq(subs) >= window) {
        await progress();
        continue;
      }
      const data = variants[seq % variants.length] as Buffer;
      seq++;
      const ok = agent.chunk(commandId, seq, offset, data);
      offset += data.length;
      if (!ok) await agent.drained();
    }
  };
  const m = await measure(Number(a['warmupMs']), Number(a['measureMs']), run);
  const verified = await verify(seq, 20_000);
  agent.close();
  return { ...m, chunks: seq, ...verified };
}

async function verify(lastSeq: number, timeoutMs: number): Promise<Record<string, unknown>> {
  const deadline = performance.now() + timeoutMs;
  while (minSeq(subs) < lastSeq && performance.now() < deadline && !subs.every((s) => s.closed)) await progress(50);
  return {
    lastSeq,
    minSeq: minSeq(subs),
    holes: subs.reduce((n, s) => n + s.holes, 0),
    errors: subs.reduce((n, s) => n + s.errors, 0),
    closed: subs.filter((s) => s.closed).length,
    incomplete: subs.filter((s) => s.lastSeq < lastSeq).length,
  };
}

async function follow(a: Args): Promise<Measured> {
  const timer = setInterval(() => process.send?.({ event: 'ack', min: minSeq(subs) }), 2);
  try {
    return await measure(Number(a['warmupMs']), Number(a['measureMs']), (until) => sleep(Math.max(0, until - performance.now())));
  } finally {
    clearInterval(timer);
  }
}

/** The slowest subscriber's seq as forwarded by the parent (fanout.agent). */
let ackedMin = 0;
let ackWaiter: (() => void) | undefined;

/** A simulated agent producing `commandId` output, at most `windowChunks` ahead of ackedMin, for `runMs`. */
async function agentOnly(a: Args): Promise<{ chunks: number }> {
  const agent = new SimAgent({
    target: String(a['target']),
    tls: a['tls'] as SimAgentTls,
    agentId: String(a['agentId']),
    instanceId: String(a['instanceId']),
  });
  agent.register();
  await agent.acked;
  const commandId = String(a['commandId']);
  const chunkBytes = Number(a['chunkBytes']);
  const window = Number(a['windowChunks']);
  const variants = Array.from({ length: 8 }, (_, i) => ptyText(chunkBytes, i * 1000));
  const until = performance.now() + Number(a['runMs']);
  ackedMin = 0;
  let seq = 0;
  let offset = 0;
  while (performance.now() < until) {
    if (seq - ackedMin >= window) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 20);
        ackWaiter = () => {
          clearTimeout(t);
          resolve();
        };
      });
      continue;
    }
    const data = variants[seq % variants.length] as Buffer;
    seq++;
    const ok = agent.chunk(commandId, seq, offset, data);
    offset += data.length;
    if (!ok) await agent.drained();
  }
  agent.close();
  return { chunks: seq };
}

async function ingest(a: Args): Promise<Record<string, unknown>> {
  const list = a['agents'] as Array<{ tls: SimAgentTls; agentId: string; instanceId: string }>;
  const chunkBytes = Number(a['chunkBytes']);
  const seconds = Number(a['seconds']);
  const register = a['register'] !== false;
  const agents = list.map((x) => new SimAgent({ target: String(a['target']), tls: x.tls, agentId: x.agentId, instanceId: x.instanceId }));
  if (register) {
    for (const ag of agents) ag.register();
    await Promise.all(agents.map((ag) => ag.acked));
  }
  // Eight different chunks in turn, so a lost, repeated or reordered chunk changes the hash.
  const variants = Array.from({ length: 8 }, (_, i) => ptyText(chunkBytes, 7 + i * 1000));
  const round = Number(a['round'] ?? 0);
  const cpu0 = process.cpuUsage();
  const threads0 = threadCpu();
  const start = performance.now();
  const until = start + seconds * 1000;
  let sent = 0;
  const streams = await Promise.all(
    agents.map(async (ag, i) => {
      const hash = createHash('sha256');
      let seq = 0;
      while (performance.now() < until) {
        const data = variants[seq % variants.length] as Buffer;
        seq++;
        sent += data.length;
        hash.update(data);
        if (!ag.chunk(`ingest-${round}-${i}`, seq, (seq - 1) * chunkBytes, data)) await ag.drained();
      }
      return { agentId: ag.agentId, commandId: `ingest-${round}-${i}`, chunks: seq, sha256: hash.digest('hex') };
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  const threads = cpuBetween(threads0, threadCpu());
  for (const ag of agents) ag.close();
  // CPU of this process while it sent (ms): all of it, and its main thread's share.
  const client = { cpuMs: (cpu.user + cpu.system) / 1000, mainMs: threads.mainMs };
  return { sentBytes: sent, seconds: (performance.now() - start) / 1000, streams, client };
}

const ops: Record<string, (a: Args) => Promise<unknown>> = {
  'fanout.connect': connect,
  'fanout.produce': produce,
  'fanout.follow': follow,
  'fanout.agent': agentOnly,
  'fanout.verify': (a) => verify(Number(a['lastSeq']), Number(a['timeoutMs'] ?? 20_000)),
  'fanout.close': () => {
    for (const s of subs) s.close();
    subs = [];
    return Promise.resolve(null);
  },
  'latency.run': runLatency,
  'replay.fill': fillReplay,
  'replay.time': timeReplay,
  'ingest.run': ingest,
  'fleet.run': runFleet,
  'fleet.stats': fleetStats,
  'fleet.stop': stopFleet,
  'activity.post': postActivity,
};

process.on('message', (m: { id: number; op: string; args: Args; event?: string; min?: number }) => {
  if (m.event === 'ack') {
    ackedMin = Number(m.min);
    const w = ackWaiter;
    ackWaiter = undefined;
    w?.();
    return;
  }
  const op = ops[m.op];
  if (op === undefined) {
    process.send?.({ id: m.id, ok: false, error: `unknown op ${m.op}` });
    return;
  }
  op(m.args).then(
    (result) => process.send?.({ id: m.id, ok: true, result }),
    (err: unknown) => process.send?.({ id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
