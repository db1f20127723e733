/**
 * Scenario `terminal`: the screen-state worker of pty-ws keyframes (actors/terminal/): how fast
 * PTY output goes into its headless terminals, and what a snapshot costs.
 *
 * value   = MB/s (10^6 bytes) of shell-like output (prompts, coloured `ls`, compiler lines in
 *           256 and RGB colours) through startScreenStates: 4 KiB output() calls, 1 MiB batches
 *           each closed by a snapshot() (two in flight), timed until the last snapshot answers.
 * ceiling = the same bytes written straight into one @xterm/headless Terminal on this thread: the
 *           emulator alone, no copy, no thread hop.
 * extras  = `tuiMBps`: a full-screen program's redraws (cursor moves, colours, 120x30) through the
 *           worker; `mainUsPer4KiB`: main-thread time of one output() call (copy + postMessage);
 *           `snapshot120x30`, `snapshot240x60`: a screen full of coloured words, p50/p99 ms of
 *           snapshot() as the hub sees it (a round trip to the worker, including xterm's write
 *           callback turn) and of the serialization alone, and the snapshot's bytes.
 */
import { performance } from 'node:perf_hooks';
import xtermHeadless from '@xterm/headless';
import { SerializeAddon } from '@xterm/addon-serialize/lib/addon-serialize.mjs';
import { startScreenStates, type ScreenStates } from '../../actors/terminal/screen-states.js';
import { serializeScreen } from '../../actors/terminal/screen-snapshot.js';
import type { BenchResult, BenchScenario, JsonValue } from '../types.js';

const { Terminal } = xtermHeadless;
const utf8 = new TextEncoder();
const CHUNK_BYTES = 4096;
const BATCH_BYTES = 1 << 20;
const round = (n: number, digits = 2): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** About `bytes` of an interactive shell's output. */
function shellCorpus(bytes: number): Uint8Array {
  const prompt = '\x1b[1;32muser@build-7\x1b[0m:\x1b[1;34m~/src/project\x1b[0m$ ';
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line =
      i % 10 === 0
        ? `${prompt}ls -la src/module-${i}\r\n`
        : i % 3 === 0
          ? `-rw-r--r-- 1 user user ${(i * 7919) % 99999} Nov 26 12:00 \x1b[01;32mbuild-${i}.log\x1b[0m  \x1b[01;34mdir-${i}\x1b[0m\r\n`
          : `\x1b[38;5;${i % 256}mcc\x1b[0m -O2 -c src/file-${i}.c -o \x1b[38;2;200;${i % 256};40mout/file-${i}.o\x1b[0m  # warning: unused variable 'x${i}'\r\n`;
    parts.push(line);
    size += line.length;
  }
  return utf8.encode(parts.join(''));
}

/** About `bytes` of a full-screen program (htop-like) redrawing a 120x30 screen. */
function tuiCorpus(bytes: number): Uint8Array {
  const parts: string[] = [];
  let size = 0;
  for (let frame = 0; size < bytes; frame++) {
    let s = '\x1b[H\x1b[30;42m  PID USER       PRI  NI  VIRT   RES  CPU% MEM%   TIME+  Command\x1b[K\x1b[m';
    for (let row = 2; row < 30; row++) {
      const pid = 1000 + row;
      const cpu = ((frame * 31 + row * 17) % 1000) / 10;
      s += `\x1b[${row};1H\x1b[36m${String(pid).padStart(5)}\x1b[m root        20   0  ${(row * 1234) % 99999}K  ${(row * 77) % 9999}K \x1b[1;31m${cpu.toFixed(1).padStart(5)}\x1b[m  0.${row}  0:${row}.00 /usr/bin/worker --id ${row}\x1b[K`;
    }
    s += `\x1b[30;1H\x1b[7m F1 Help  F10 Quit  frame ${frame}\x1b[K\x1b[m`;
    parts.push(s);
    size += s.length;
  }
  return utf8.encode(parts.join(''));
}

/** A screen of cols x rows full of words in changing colours and attributes. */
function colourfulScreen(cols: number, rows: number): Uint8Array {
  let s = '\x1b[H\x1b[2J';
  for (let row = 0; row < rows; row++) {
    s += `\x1b[${row + 1};1H`;
    let col = 0;
    for (let w = 0; col + 8 < cols; w++) {
      const word = `w${row}-${w}`.padEnd(7, 'x');
      s += `\x1b[${(row + w) % 2 === 0 ? '1;' : ''}38;5;${(row * 13 + w * 7) % 256}m${word}\x1b[m `;
      col += word.length + 1;
    }
  }
  return utf8.encode(s);
}

/** Feeds `data` through the worker in 4 KiB calls, 1 MiB per snapshot, until `ms` have passed. */
async function throughWorker(states: ScreenStates, id: string, data: Uint8Array, ms: number): Promise<{ mbps: number; mainUs: number }> {
  let seq = 0;
  let bytes = 0;
  let mainMs = 0;
  let calls = 0;
  let previous: Promise<unknown> = Promise.resolve();
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let at = 0; at < data.length; at += BATCH_BYTES) {
      const t0 = performance.now();
      const end = Math.min(data.length, at + BATCH_BYTES);
      for (let c = at; c < end; c += CHUNK_BYTES) {
        states.output(id, ++seq, data.subarray(c, Math.min(end, c + CHUNK_BYTES)));
        calls++;
      }
      mainMs += performance.now() - t0;
      bytes += end - at;
      const snap = states.snapshot(id);
      await previous;
      previous = snap;
    }
  }
  await previous;
  return { mbps: bytes / 1e6 / ((performance.now() - start) / 1000), mainUs: (mainMs * 1000) / calls };
}

/** The emulator alone: the same bytes in 4 KiB writes, until `ms` have passed. */
async function emulatorAlone(data: Uint8Array, ms: number): Promise<number> {
  const term = new Terminal({ cols: 120, rows: 30, scrollback: 0, allowProposedApi: true });
  let bytes = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let c = 0; c < data.length; c += CHUNK_BYTES) term.write(data.subarray(c, c + CHUNK_BYTES));
    await new Promise<void>((resolve) => term.write('', resolve));
    bytes += data.length;
  }
  const mbps = bytes / 1e6 / ((performance.now() - start) / 1000);
  term.dispose();
  return mbps;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** Snapshot costs for a full coloured screen of cols x rows. */
async function snapshotCost(states: ScreenStates, cols: number, rows: number, samples: number): Promise<Record<string, JsonValue>> {
  const id = `snap-${cols}x${rows}`;
  const screen = colourfulScreen(cols, rows);
  states.open(id, cols, rows);
  states.output(id, 1, screen);
  const round1 = await states.snapshot(id);
  const trip: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    await states.snapshot(id);
    trip.push(performance.now() - t0);
  }
  states.close(id);
  const term = new Terminal({ cols, rows, scrollback: 0, allowProposedApi: true });
  const addon = new SerializeAddon();
  term.loadAddon(addon);
  await new Promise<void>((resolve) => term.write(screen, resolve));
  const cpu: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    serializeScreen(term, addon);
    cpu.push(performance.now() - t0);
  }
  term.dispose();
  trip.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  return {
    roundTripP50Ms: round(percentile(trip, 50), 3),
    roundTripP99Ms: round(percentile(trip, 99), 3),
    serializeP50Ms: round(percentile(cpu, 50), 3),
    serializeP99Ms: round(percentile(cpu, 99), 3),
    bytes: round1.data.byteLength,
  };
}

export const terminal: BenchScenario = {
  name: 'terminal',
  description: 'PTY output into the screen-state worker (pty-ws keyframes), MB/s, and snapshot cost at 120x30 and 240x60',
  unit: 'MB/s',
  target: { ratioAtLeast: 0.8 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const shell = shellCorpus(8 << 20);
    const tui = tuiCorpus(4 << 20);
    const states = startScreenStates({ maxBacklogBytes: 64 << 20 });
    try {
      const sliceMs = Math.max(500, (seconds * 1000) / 5);
      states.open('shell', 120, 30);
      states.open('tui', 120, 30);
      // warm-up of both paths, uncounted
      await throughWorker(states, 'shell', shell.subarray(0, BATCH_BYTES), 0);
      await emulatorAlone(shell.subarray(0, BATCH_BYTES), 0);
      signal.throwIfAborted();
      const worker = await throughWorker(states, 'shell', shell, sliceMs * 1.5);
      signal.throwIfAborted();
      const alone = await emulatorAlone(shell, sliceMs * 1.5);
      signal.throwIfAborted();
      const tuiRun = await throughWorker(states, 'tui', tui, sliceMs);
      signal.throwIfAborted();
      const small = await snapshotCost(states, 120, 30, 200);
      const large = await snapshotCost(states, 240, 60, 200);
      const { overruns } = states.stats();
      return {
        value: round(worker.mbps),
        ceiling: round(alone),
        extra: {
          tuiMBps: round(tuiRun.mbps),
          mainUsPer4KiB: round(worker.mainUs),
          snapshot120x30: small,
          snapshot240x60: large,
          notes:
            'value: shell output through the worker in 4 KiB calls; ceiling: the same into an in-thread @xterm/headless; snapshot round trip = snapshot() as the hub awaits it, serialize = the text alone',
        },
        ...(overruns > 0 ? { problems: [`${overruns} overruns: output was dropped`] } : {}),
      };
    } finally {
      await states.stop();
    }
  },
};
