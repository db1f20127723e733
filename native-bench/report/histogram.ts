/**
 * An HDR histogram as the result-line shape the report plots (report-data.ts):
 * `{unit, count, percentiles: [[p, value], …]}`, p in percent, 100 = the maximum.
 */
import type * as hdr from 'hdr-histogram-js';

/** The percentiles a line carries: the body, then each further nine of the tail. */
export const REPORTED_PERCENTILES = [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100] as const;

/** `h` recorded in integer units (e.g. µs); `divisor` turns them into `unit` (1000 for ms). */
export function histogramJson(
  h: hdr.Histogram,
  divisor: number,
  unit: string,
): { unit: string; count: number; percentiles: [number, number][] } {
  const v = (x: number): number => Math.round((x / divisor) * 1000) / 1000;
  // getValueAtPercentile gives each bucket's highest equivalent value, so 0 and 100 come from it too (monotonic)
  return { unit, count: h.totalCount, percentiles: REPORTED_PERCENTILES.map((p) => [p, v(h.getValueAtPercentile(p))]) };
}
