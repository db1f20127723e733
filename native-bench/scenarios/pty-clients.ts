/**
 * Entry of the `pty` scenario's client process (forked by pty.ts, never imported): one controller
 * and N observers on a session's pty-ws.v1 socket (sandboxd's own client, src/client/pty-ws.ts,
 * over the `ws` package), or the same number of bare WebSocket clients on the raw ceiling's
 * socket, decoding each message as the real client does (decodeServerMessage). Driven over IPC:
 * each request {id, op, args} is answered {id, ok, result | error}.
 *
 *   open      {url, binary, observers, raw}   connect (and join: controller first) → {protocol}
 *   type      {text}                          the controller types `text`
 *   waitFor   {text, ms}                      until the controller's screen shows `text`
 *   arm       {base}                          the next flood counts bytes from now (base: totals count
 *                                             Output above the controller's sequence, once all reached it)
 *   totals    {quietMs}                       after quiet, Output bytes per client above the base
 *   flood     {typing, floodBytes, stopAfterMs, quietMs, recordBytes}  one flood measured (see flood() below)
 *   close
 */
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as hdr from 'hdr-histogram-js';
import type { WebSocketConstructor, WebSocketLike } from '../../src/client/http-transport.js';
import { PtyConnection } from '../../src/client/pty-ws.js';
import { decodeServerMessage } from '../../src/client/pty-ws-wire.js';
import { histogramJson } from '../report/histogram.js';
import { StreamTally, tallyDifferences } from './pty-tally.js';

const WebSocket = (createRequire(import.meta.url)('ws') as { WebSocket: WebSocketConstructor }).WebSocket;

type Args = Record<string, unknown>;

interface Client {
  bytes: number;
  /** Output and drawn keyframes above the base arm's stream position (real clients): the nothing-lost check. */
  tally: StreamTally;
  /** Highest session sequence received or covered by a keyframe (-1: none; raw clients: none). */
  lastSequence(): number;
  /** performance.now() of the first and the latest output message. */
  firstAt: number;
  lastAt: number;
  closed: string | null;
  lagged: number;
  input(text: string): void;
  close(): void;
}

let clients: Client[] = [];
/** The controller's output since the last measure started (for echo detection). */
let onControllerOutput: ((bytes: Uint8Array) => void) | undefined;
/** The controller's output as latin1 text, last 4 KiB (waitFor). */
let controllerTail = '';

/**
 * The `ws` constructor, with the first pty.join_session of each socket carrying `start` (the
 * session_backend, session_class, argv and terminal_size that start a native session, spec 4.2):
 * sandboxd's client joins existing sessions only, so the bench adds what starts one.
 */
function startingCtor(start: Record<string, unknown>): WebSocketConstructor {
  const Base = WebSocket as unknown as new (url: string, protocols?: string | string[]) => { send(data: unknown): void };
  class Starting extends Base {
    #started = false;
    override send(data: unknown): void {
      if (!this.#started && typeof data === 'string' && data.includes('"pty.join_session"')) {
        this.#started = true;
        const f = JSON.parse(data) as { payload: Record<string, unknown> };
        Object.assign(f.payload, start);
        data = JSON.stringify(f);
      }
      super.send(data);
    }
  }
  return Starting as unknown as WebSocketConstructor;
}

function realClient(
  url: string,
  binary: boolean,
  role: 'controller' | 'observer',
  label: string,
  ctor: WebSocketConstructor = WebSocket,
): Promise<Client> {
  return new Promise((resolve, reject) => {
    const c: Client = {
      bytes: 0,
      tally: new StreamTally(),
      lastSequence: () => conn.lastSequence,
      firstAt: 0,
      lastAt: 0,
      closed: null,
      lagged: 0,
      input: (text) => void conn.input(text),
      close: () => conn.close(),
    };
    const conn = new PtyConnection(ctor, url, {
      role,
      cols: 120,
      rows: 30,
      binary,
      pingIntervalMs: 0,
      clientLabel: label,
      onRole: (granted) => {
        if (granted === role) resolve(c);
        else reject(new Error(`${label} was granted ${granted}, not ${role}`));
      },
      onOutput: (bytes, sequence) => {
        c.bytes += bytes.byteLength;
        c.tally.output(sequence, bytes.byteLength);
        c.lastAt = performance.now();
        if (c.firstAt === 0) c.firstAt = c.lastAt;
        if (role === 'controller') {
          controllerTail = (controllerTail + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')).slice(-4096);
          onControllerOutput?.(bytes);
        }
      },
      onKeyframe: (k) => {
        c.tally.keyframe(k.anchorSequence);
        if (role === 'controller') controllerTail = (controllerTail + Buffer.from(k.snapshot).toString('latin1')).slice(-4096);
      },
      onError: (code) => {
        if (code === 'PTY_OUTPUT_LAGGED') c.lagged++;
      },
      onClose: (code, reason) => {
        c.closed = `${code} ${reason}`;
        reject(new Error(`${label} closed before joining: ${code} ${reason}`));
      },
    });
  });
}

function rawClient(url: string, isController: boolean): Promise<Client> {
  return new Promise((resolve, reject) => {
    // the raw ceiling's socket speaks no subprotocol; the frames are the binding's all the same
    const ws: WebSocketLike = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    const c: Client = {
      bytes: 0,
      tally: new StreamTally(),
      lastSequence: () => -1,
      firstAt: 0,
      lastAt: 0,
      closed: null,
      lagged: 0,
      input: () => undefined,
      close: () => ws.close(1000, 'done'),
    };
    ws.onmessage = (ev) => {
      const m = decodeServerMessage(ev.data);
      if (m.type !== 'output') return;
      c.bytes += m.bytes.byteLength;
      c.lastAt = performance.now();
      if (c.firstAt === 0) c.firstAt = c.lastAt;
      if (isController) onControllerOutput?.(m.bytes);
    };
    ws.onopen = () => resolve(c);
    ws.onclose = (ev) => {
      c.closed = `${ev.code} ${ev.reason}`;
      reject(new Error(`raw client closed: ${ev.code}`));
    };
  });
}

async function open(a: Args): Promise<{ clients: number }> {
  for (const c of clients) c.close();
  clients = [];
  controllerTail = '';
  nextKeys.clear();
  const url = String(a['url']);
  const binary = a['binary'] === true;
  const observers = Number(a['observers']);
  const raw = a['raw'] === true;
  const start = a['start'] as Record<string, unknown> | undefined;
  const controllerUrl = typeof a['controllerUrl'] === 'string' ? a['controllerUrl'] : url;
  // the controller joins first (and starts the session): the first member holds the lease
  clients.push(
    raw
      ? await rawClient(url, true)
      : await realClient(controllerUrl, binary, 'controller', 'bench-controller', start ? startingCtor(start) : WebSocket),
  );
  const observer = async (i: number): Promise<Client> => {
    // the session may still be starting on the agent: a refused upgrade is tried again
    for (let attempt = 0; ; attempt++) {
      try {
        return raw ? await rawClient(url, false) : await realClient(url, binary, 'observer', `bench-observer-${i}`);
      } catch (err) {
        if (attempt >= 50) throw err;
        await sleep(100);
      }
    }
  };
  const rest: Promise<Client>[] = [];
  for (let i = 0; i < observers; i++) rest.push(observer(i));
  clients.push(...(await Promise.all(rest)));
  return { clients: clients.length };
}

/** A keystroke every this many ms while the flood lasts: a fast typist. */
const kKeystrokeMs = 40;

function histogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 });
}

/**
 * One flood, from the first output byte any client receives after the call until every client
 * has been quiet for `quietMs` (or `deadlineMs`): bytes per client, the time from that first byte
 * to the last observer's last byte, and with `typing` (real sessions) the controller types `S`
 * to start the flood, then `K` every 40 ms while it lasts, timing each until `[K<n>]` shows on
 * its screen (a keystroke still unanswered when the flood has drained counts as missed). Keeps up to `recordBytes` of the controller's chunks for the ceiling.
 */
/** Echo times per `echoKey`, over every flood with that key. */
const echoHistograms = new Map<string, hdr.Histogram>();
/** The next keystroke's number per `echoKey`. */
const nextKeys = new Map<string, number>();

/** Each client's bytes at the last `arm`: a flood counts from there. */
let armed: number[] = [];

/**
 * `base` (the first arm of a session): `totals` counts each client's Output above one stream
 * position, the newest sequence the controller has now. The clients read at their own pace (an
 * observer whose join keyframe is still being made has not yet got what the controller drew), so
 * the base first waits (up to 10 s) until every client has reached the controller's sequence,
 * and each client's tally counts by sequence: what is at or below the base, arriving late, is
 * not counted (pty-tally.ts).
 */
async function arm(a: Args): Promise<null> {
  if (a['base'] === true) {
    const base = clients[0]?.lastSequence() ?? -1;
    const deadline = performance.now() + 10_000;
    while (clients.some((c) => c.lastSequence() < base) && performance.now() < deadline) await sleep(20);
    for (const c of clients) c.tally.rebase(base);
  }
  armed = clients.map((c) => c.bytes);
  for (const c of clients) {
    c.firstAt = 0;
    c.lastAt = 0;
  }
  return null;
}

async function flood(a: Args): Promise<Record<string, unknown>> {
  const typing = a['typing'] === true;
  const floodBytes = Number(a['floodBytes'] ?? 0);
  let stopAfterMs = Number(a['stopAfterMs'] ?? Infinity);
  let stopped = false;
  const quietMs = Number(a['quietMs'] ?? 500);
  const deadline = performance.now() + Number(a['deadlineMs'] ?? 60_000);
  const recordBytes = Number(a['recordBytes'] ?? 0);
  const echoKey = typeof a['echoKey'] === 'string' ? a['echoKey'] : '';
  const echoes = echoHistograms.get(echoKey) ?? histogram();
  echoHistograms.set(echoKey, echoes);
  const echoesBefore = echoes.totalCount;
  const recorded: Uint8Array[] = [];
  let recordedBytes = 0;
  // the program numbers keystrokes over the whole session
  let nextKey = nextKeys.get(echoKey) ?? 1;
  /** Keystrokes typed and not yet echoed, oldest first (the program draws them in order). */
  const waiting: { marker: string; at: number }[] = [];
  let tail = '';
  onControllerOutput = (bytes) => {
    if (recordedBytes < recordBytes) {
      recorded.push(bytes.slice());
      recordedBytes += bytes.byteLength;
    }
    if (waiting.length === 0) return;
    let text = tail + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
    const now = performance.now();
    for (let at = text.indexOf(waiting[0]?.marker ?? '\0'); waiting.length > 0 && at >= 0; at = text.indexOf(waiting[0]?.marker ?? '\0')) {
      const w = waiting.shift()!;
      echoes.recordValue(Math.max(1, Math.round((now - w.at) * 1000)));
      text = text.slice(at + w.marker.length);
    }
    tail = text.slice(-16);
  };
  const before = armed;
  let firstAt = 0;
  let typedAt = 0;
  const began = performance.now();
  if (typing) clients[0]?.input('S');
  for (;;) {
    const now = performance.now();
    if (firstAt === 0) {
      const got = clients.filter((c, i) => c.bytes > before[i]!);
      if (got.length > 0) firstAt = Math.min(...got.map((c) => c.firstAt));
    }
    const last = Math.max(0, ...clients.map((c) => c.lastAt));
    if (firstAt > 0 && now - last >= quietMs && waiting.length === 0) break;
    if (firstAt > 0 && now - last >= quietMs * 4) break;
    if (now > deadline) break;
    // keystrokes only while the flood lasts: their echoes are output too, and would never let it end
    let flooding = (clients[0]?.bytes ?? 0) - (before[0] ?? 0) < floodBytes;
    if (typing && flooding && now - began > stopAfterMs) {
      // the time is up: the program stops writing (what it wrote still arrives and is counted)
      clients[0]?.input('E');
      stopAfterMs = Infinity;
      stopped = true;
    }
    if (stopped) flooding = false;
    if (typing && firstAt > 0 && flooding && now - typedAt >= kKeystrokeMs) {
      typedAt = now;
      waiting.push({ marker: `[K${nextKey++}]`, at: now });
      clients[0]?.input('K');
    }
    await sleep(5);
  }
  onControllerOutput = undefined;
  const typed = nextKey - (nextKeys.get(echoKey) ?? 1);
  nextKeys.set(echoKey, nextKey);
  const deltas = clients.map((c, i) => c.bytes - before[i]!);
  const observers = clients.slice(1);
  const lastObserverAt = Math.max(0, ...observers.map((c) => c.lastAt));
  return {
    seconds: firstAt > 0 ? Math.max(1e-3, (lastObserverAt - firstAt) / 1000) : 0,
    waitedSeconds: (performance.now() - began) / 1000,
    controllerBytes: deltas[0] ?? 0,
    observerBytes: deltas.slice(1).reduce((s, b) => s + b, 0),
    perObserver: deltas.slice(1),
    echoes: echoes.totalCount,
    echoMissed: typed - (echoes.totalCount - echoesBefore),
    echo: echoes.totalCount > 0 ? histogramJson(echoes, 1000, 'ms') : null,
    closed: clients.flatMap((c, i) => (c.closed === null ? [] : [`client ${i}: ${c.closed}`])),
    lagged: clients.reduce((s, c) => s + c.lagged, 0),
    recorded,
  };
}

/** After the last flood: waits until no client got anything for `quietMs`, then each client's bytes since the base `arm`. */
async function totals(a: Args): Promise<{ controllerBytes: number; perObserver: number[]; keyframes: number[]; differences: string[] }> {
  const quietMs = Number(a['quietMs'] ?? 1000);
  const deadline = performance.now() + 30_000;
  while (performance.now() - Math.max(0, ...clients.map((c) => c.lastAt)) < quietMs && performance.now() < deadline) await sleep(20);
  const since = clients.map((c) => c.tally.bytes);
  const differences =
    clients.length === 0
      ? []
      : tallyDifferences(
          clients[0]!.tally,
          clients.slice(1).map((c) => c.tally),
        );
  return { controllerBytes: since[0] ?? 0, perObserver: since.slice(1), keyframes: clients.map((c) => c.tally.keyframes), differences };
}

async function waitFor(a: Args): Promise<null> {
  const text = String(a['text']);
  const deadline = performance.now() + Number(a['ms'] ?? 30_000);
  while (!controllerTail.includes(text)) {
    if (performance.now() > deadline)
      throw new Error(`no ${JSON.stringify(text)} on the controller's screen; it shows ${JSON.stringify(controllerTail.slice(-300))}`);
    await sleep(20);
  }
  return null;
}

const ops: Record<string, (a: Args) => Promise<unknown>> = {
  open,
  flood,
  arm,
  totals,
  waitFor,
  type: (a) => {
    clients[0]?.input(String(a['text']));
    return Promise.resolve(null);
  },
  close: () => {
    for (const c of clients) c.close();
    clients = [];
    return Promise.resolve(null);
  },
};

process.on('message', (m: { id: number; op: string; args: Args }) => {
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
