/**
 * SVG path data for the small metric charts (no chart library): a polyline of the values scaled
 * into a width × height box, and the same line closed to the baseline for the filled area.
 * Non-finite values break the line (a gap while an agent was away) instead of dropping to zero.
 */

export interface SparklineOptions {
  /** Box size in SVG user units. */
  width: number;
  height: number;
  /** Value at the bottom edge; default 0. */
  min?: number;
  /** Value at the top edge; default max(values), at least min + 1. */
  max?: number;
  /** Space kept free above and below the line so its stroke and end dot are not clipped. Default 0. */
  inset?: number;
}

export interface SparklinePaths {
  /** `d` of the line (empty when there is nothing to draw). */
  readonly line: string;
  /** `d` of the filled area under the line (empty when there is nothing to draw). */
  readonly area: string;
  /** Coordinates of the last point, for a marker dot, or null. */
  readonly last: { readonly x: number; readonly y: number } | null;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

/** Path data of a sparkline; values are spread evenly over the width, oldest at the left. */
export function sparklinePaths(values: readonly number[], opts: SparklineOptions): SparklinePaths {
  const { width, height } = opts;
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { line: '', area: '', last: null };
  const min = opts.min ?? 0;
  const max = Math.max(opts.max ?? Math.max(...finite), min + 1);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const inset = Math.max(0, Math.min(opts.inset ?? 0, height / 2));
  const span = height - 2 * inset;
  const y = (v: number): number => round(height - inset - ((Math.min(max, Math.max(min, v)) - min) / (max - min)) * span);
  let line = '';
  let area = '';
  let runStartX = 0;
  let runLastX = 0;
  let inRun = false;
  let last: { x: number; y: number } | null = null;
  const closeRun = (): void => {
    if (inRun) area += `L${runLastX},${height}L${runStartX},${height}Z`;
    inRun = false;
  };
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) {
      closeRun();
      return;
    }
    const px = values.length > 1 ? round(i * step) : width;
    const py = y(v);
    if (!inRun) {
      line += `M${px},${py}`;
      area += `M${px},${py}`;
      runStartX = px;
      inRun = true;
    } else {
      line += `L${px},${py}`;
      area += `L${px},${py}`;
    }
    runLastX = px;
    last = { x: px, y: py };
  });
  closeRun();
  return { line, area, last };
}
