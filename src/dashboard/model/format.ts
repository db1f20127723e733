/**
 * Text formatting for the dashboard: sizes, percentages, durations, times. Pure functions (no DOM,
 * no Node), shared by the browser bundle and the unit tests.
 *
 * Sizes use binary units (KiB, MiB, GiB) because memory and disks are reported in bytes and
 * configured in MiB/GiB; one decimal below 10 units, none above, so columns stay narrow.
 */

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

/** `1536` → `1.5 KiB`; `0` → `0 B`; negative or non-finite → `—`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '—';
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < BYTE_UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  if (u === 0) return `${Math.round(v)} B`;
  // 1023.96 KiB would print as "1024 KiB": carry into the next unit instead.
  const text = v < 10 ? v.toFixed(1) : String(Math.round(v));
  if (text === '1024' && u < BYTE_UNITS.length - 1) return `1.0 ${BYTE_UNITS[u + 1]}`;
  return `${text.endsWith('.0') && v >= 10 ? text.slice(0, -2) : text} ${BYTE_UNITS[u]}`;
}

/** Memory configured in MiB (VM memory_mb): `8192` → `8 GiB`, `768` → `768 MiB`. */
export function formatMiB(mib: number): string {
  if (!Number.isFinite(mib) || mib < 0) return '—';
  if (mib >= 1024 && mib % 1024 === 0) return `${mib / 1024} GiB`;
  if (mib >= 1024) return `${(mib / 1024).toFixed(1)} GiB`;
  return `${Math.round(mib)} MiB`;
}

/** `12.345` → `12%`, `3.21` → `3.2%`, `0` → `0%`; clamps to 0..100; non-finite → `—`. */
export function formatPercent(pct: number): string {
  if (!Number.isFinite(pct)) return '—';
  const v = Math.min(100, Math.max(0, pct));
  if (v === 0) return '0%';
  return v < 10 ? `${v.toFixed(1)}%` : `${Math.round(v)}%`;
}

/** used/total as a percentage 0..100, or NaN when total is not positive. */
export function ratioPercent(used: number, total: number): number {
  if (!(total > 0) || !Number.isFinite(used)) return Number.NaN;
  return Math.min(100, Math.max(0, (used / total) * 100));
}

/**
 * A duration in seconds as its two largest units: `59` → `59s`, `61` → `1m 1s`,
 * `3725` → `1h 2m`, `90061` → `1d 1h`. Null or negative → `—`.
 */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '—';
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d > 0) return h > 0 ? `${d}d ${h}h` : `${d}d`;
  if (h > 0) return m > 0 ? `${h}h ${m}m` : `${h}h`;
  if (m > 0) return sec > 0 ? `${m}m ${sec}s` : `${m}m`;
  return `${sec}s`;
}

/**
 * How long ago `thenMs` was, from `nowMs` (both Unix ms): `just now` under 5 s, then `12s ago`,
 * `5m ago`, `3h ago`, `2d ago`. A time in the future (clock skew) reads `just now`.
 */
export function formatAgo(thenMs: number, nowMs: number): string {
  if (!Number.isFinite(thenMs) || thenMs <= 0) return '—';
  const s = Math.floor((nowMs - thenMs) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** A time of day in local time, `14:03:22`; input is Unix ms or an ISO string. Invalid → `—`. */
export function formatClock(t: number | string): string {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '—';
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

/** A local date and time, `2026-03-01 14:03:22`; input is Unix ms or an ISO string. Invalid → `—`. */
export function formatDateTime(t: number | string): string {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '—';
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${formatClock(d.getTime())}`;
}

/** Load averages `[0.5, 0.25, 0.1]` → `0.50 0.25 0.10`. */
export function formatLoad(load: readonly number[] | undefined): string {
  if (load === undefined || load.length === 0) return '—';
  return load.map((v) => (Number.isFinite(v) ? v.toFixed(2) : '—')).join(' ');
}

/** Counts with a noun: `1 agent`, `3 agents`, `0 agents`. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}

/** Shortens an id in the middle for narrow cells: `task-1234567890abcdef` → `task-1234…cdef`. */
export function shortId(id: string, max = 16): string {
  if (id.length <= max) return id;
  const keep = Math.max(2, Math.floor((max - 1) / 2));
  return `${id.slice(0, keep)}…${id.slice(-keep)}`;
}

/**
 * The top bar's one-line fleet summary: `12 agents, 10 ready · 3 of 4 VMs running`; parts not
 * loaded yet are left out; an empty fleet reads `No agents · No VMs`.
 */
export function fleetSummaryText(f: {
  agentsLoaded: boolean;
  agents: number;
  ready: number;
  vmsLoaded: boolean;
  vms: number;
  vmsRunning: number;
}): string {
  const parts: string[] = [];
  if (f.agentsLoaded)
    parts.push(
      f.agents === 0
        ? 'No agents'
        : f.ready === f.agents
          ? `${plural(f.agents, 'agent')}, all ready`
          : `${plural(f.agents, 'agent')}, ${f.ready} ready`,
    );
  if (f.vmsLoaded) parts.push(f.vms === 0 ? 'No VMs' : `${f.vmsRunning} of ${plural(f.vms, 'VM')} running`);
  return parts.join(' · ');
}
