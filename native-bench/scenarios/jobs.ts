/**
 * Scenario `jobs`: the main thread's event-loop delay while the server's CPU-bound work runs, with
 * the job pool in worker threads (the default) and inline (SVC_ACTORS=inline, where the same jobs
 * run on the main thread: the "before"). One run measures both, job kind by job kind:
 *
 *   hashFile        sha256 of 4 MiB artifact files (task completing)
 *   scanTar         a 32 MiB guest outbox archive of 64 files, arriving as 4 KiB output chunks (task completing)
 *   issueLeaf       an agent certificate: P-256 key and signature (every VM created)
 *   parseManifest   a 60 KiB YAML task manifest (POST /api/v1/tasks)
 *
 * Each kind runs for a slice of the time with two jobs always in flight, through the real JobPool
 * and the features' own job calls (task-jobs.ts, ca.ts), while perf_hooks.monitorEventLoopDelay
 * (1 ms resolution) samples how late the main thread's timers fire.
 *
 * value  = inline p99 ÷ pool p99 of the event-loop delay, for the kind where the pool gains least
 *          (target ≥ 1: DESIGN.md's "workers ahead on every scenario", here on every kind).
 * extras = p50/p99/max in ms and jobs/s per kind and mode, and per mode the worst kind's figures.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';
import { JobPool } from '../../actors/jobs/job-pool.js';
import { ensureCa, issueAgentCert } from '../../src/identity/ca.js';
import { IDENTITY_JOBS_MODULE } from '../../src/identity/identity-jobs.js';
import { hashFileJob, parseSubmissionJob, readTarJob, TASK_JOBS_MODULE } from '../../src/tasks/task-jobs.js';
import { ByteSlabs } from '../../src/util/byte-slabs.js';
import type { JobRunner } from '../../src/util/job-runner.js';
import type { JsonValue, BenchResult, BenchScenario } from '../types.js';

const MiB = 1024 * 1024;
const HASH_FILES = 8;
const HASH_FILE_BYTES = 4 * MiB;
const TAR_FILES = 64;
const TAR_FILE_BYTES = MiB / 2;
const MANIFEST_BYTES = 60 * 1024;
/** Jobs kept in flight per kind. */
const CONCURRENCY = 2;

interface Delay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface KindResult extends Delay {
  jobs: number;
  jobsPerSecond: number;
}

type Mode = 'workers' | 'inline';

const round = (n: number, digits = 2): number => Math.round(n * 10 ** digits) / 10 ** digits;

function delayOf(h: IntervalHistogram): Delay {
  return { p50Ms: round(h.percentile(50) / 1e6), p99Ms: round(h.percentile(99) / 1e6), maxMs: round(h.max / 1e6) };
}

/** One ustar entry (header with checksum, data, padding), as `tar -c` of a regular file writes it. */
function tarEntry(name: string, data: Uint8Array): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100, 'latin1');
  h.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  h.write('0', 156, 'latin1');
  h.write('ustar\x0000', 257, 'latin1');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return Buffer.concat([h, data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
}

/** A manifest of about `bytes` of YAML: the 32 labels a manifest may have and a long prompt. */
function bigManifest(bytes: number): string {
  const lines = ['name: bench-manifest', 'repository: {url: /srv/repos/app, branch: main}', 'metadata:', '  labels:'];
  for (let i = 0; i < 32; i++) lines.push(`    label-${i}: value-${i}`);
  lines.push('lifecycle: {timeout: 1h30m, failure_action: preserve}', 'artifacts: {patterns: ["reports/**", "*.diff"]}', 'prompt: |');
  while (lines.join('\n').length < bytes) lines.push(`  ${'Fix the login bug and explain the change. '.repeat(2).trim()}`);
  return `${lines.join('\n')}\n`;
}

interface Fixtures {
  dir: string;
  files: string[];
  archiveChunks: Buffer[];
  manifestYaml: string;
}

async function fixtures(): Promise<Fixtures> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-jobs-'));
  const files: string[] = [];
  for (let i = 0; i < HASH_FILES; i++) {
    const path = join(dir, `artifact-${i}.bin`);
    await writeFile(path, Buffer.alloc(HASH_FILE_BYTES, i + 1));
    files.push(path);
  }
  const entries = Array.from({ length: TAR_FILES }, (_, i) => tarEntry(`reports/file-${i}.bin`, Buffer.alloc(TAR_FILE_BYTES, i)));
  const archive = Buffer.concat([...entries, Buffer.alloc(1024)]);
  // as the agent's output arrives: 4 KiB chunks
  const archiveChunks: Buffer[] = [];
  for (let at = 0; at < archive.length; at += 4096) archiveChunks.push(archive.subarray(at, at + 4096));
  return { dir, files, archiveChunks, manifestYaml: bigManifest(MANIFEST_BYTES) };
}

/**
 * An outbox archive as pullOutbox gets it: 4 KiB chunks of command output arriving with event-loop
 * turns between them (a batch per turn, as a gRPC read delivers several), collected into slabs,
 * then read on the pool.
 */
async function receiveAndRead(pool: JobRunner, chunks: readonly Buffer[]): Promise<unknown> {
  const slabs = new ByteSlabs();
  for (let i = 0; i < chunks.length; i++) {
    slabs.push(chunks[i] ?? Buffer.alloc(0));
    if (i % 16 === 15) await new Promise<void>((r) => setImmediate(r));
  }
  return readTarJob(pool, slabs);
}

/** Keeps CONCURRENCY jobs in flight for `ms`; resolves with how many finished. */
async function keepBusy(ms: number, signal: AbortSignal, job: (i: number) => Promise<unknown>): Promise<number> {
  const until = performance.now() + ms;
  let done = 0;
  let next = 0;
  const lane = async (): Promise<void> => {
    while (performance.now() < until) {
      signal.throwIfAborted();
      await job(next++);
      done++;
      // a server has sockets to serve between jobs: give the event loop its turn (and the timers
      // that sample the delay their chance to fire), as I/O between requests would
      await new Promise<void>((r) => setImmediate(r));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return done;
}

async function runMode(mode: Mode, fx: Fixtures, sliceMs: number, signal: AbortSignal): Promise<Record<string, KindResult>> {
  const pool = await JobPool.start({
    mode,
    threads: Math.max(1, Math.min(2, cpus().length - 1)),
    jobModules: [TASK_JOBS_MODULE, IDENTITY_JOBS_MODULE],
  });
  try {
    const ca = await ensureCa({ secretsDir: join(fx.dir, `secrets-${mode}`), trustDomain: 'bench.local', jobs: pool });
    const kinds: [string, (i: number) => Promise<unknown>][] = [
      ['hashFile', (i) => hashFileJob(pool, fx.files[i % fx.files.length] ?? '')],
      ['scanTar', () => receiveAndRead(pool, fx.archiveChunks)],
      ['issueLeaf', (i) => issueAgentCert(ca, { instanceId: `i-bench-${i}` })],
      ['parseManifest', () => parseSubmissionJob(pool, { manifest_yaml: fx.manifestYaml }, {})],
    ];
    // warm up: JIT, thread start, the CA loaded in each thread
    for (const [, job] of kinds) await Promise.all([job(0), job(1)]);
    const results: Record<string, KindResult> = {};
    for (const [name, job] of kinds) {
      const h = monitorEventLoopDelay({ resolution: 1 });
      h.enable();
      const started = performance.now();
      const jobs = await keepBusy(sliceMs, signal, job);
      const seconds = (performance.now() - started) / 1000;
      h.disable();
      results[name] = { ...delayOf(h), jobs, jobsPerSecond: round(jobs / seconds, 1) };
    }
    return results;
  } finally {
    await pool.stop();
  }
}

export const jobs: BenchScenario = {
  name: 'jobs',
  description:
    "main thread's event-loop delay while hashing, archive reading, certificate issuance and manifest parsing run on the job pool vs inline",
  unit: 'x',
  target: { valueAtLeast: 1 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const fx = await fixtures();
    try {
      const sliceMs = Math.max(400, (seconds * 1000) / 8);
      const inline = await runMode('inline', fx, sliceMs, signal);
      const workers = await runMode('workers', fx, sliceMs, signal);
      const kinds: Record<string, JsonValue> = {};
      for (const name of Object.keys(workers)) kinds[name] = { workers: { ...workers[name]! }, inline: { ...inline[name]! } };
      const worst = (r: Record<string, KindResult>): Delay => ({
        p50Ms: Math.max(...Object.values(r).map((k) => k.p50Ms)),
        p99Ms: Math.max(...Object.values(r).map((k) => k.p99Ms)),
        maxMs: Math.max(...Object.values(r).map((k) => k.maxMs)),
      });
      const gains = Object.keys(workers).map((name) => (inline[name]?.p99Ms ?? 0) / Math.max(0.001, workers[name]?.p99Ms ?? 0));
      return {
        value: round(Math.min(...gains)),
        ceiling: null,
        extra: {
          workers: { ...worst(workers) },
          inline: { ...worst(inline) },
          kinds,
          concurrency: CONCURRENCY,
          notes:
            'event-loop delay of the main thread in ms (monitorEventLoopDelay, 1 ms resolution); inline = SVC_ACTORS=inline, the same jobs on the main thread; value = min over kinds of inline p99 / pool p99; workers/inline = the worst kind per figure',
        },
      };
    } finally {
      await rm(fx.dir, { recursive: true, force: true });
    }
  },
};
