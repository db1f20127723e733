/**
 * Small building blocks shared by the views: state badges, usage meters, sparklines, empty states,
 * the page header and the "busy button" helper.
 */
import type { Badge } from '../../model/badges.js';
import { sparklinePaths } from '../../model/sparkline.js';
import { h, setText, svg } from '../dom.js';

/** A state badge (`<span class="badge tone-ok">Ready</span>`). */
export function badge(b: Badge, extraClass = ''): HTMLSpanElement {
  return h('span', { class: `badge tone-${b.tone}${extraClass !== '' ? ` ${extraClass}` : ''}` }, b.label);
}

/** Updates a badge in place (live rows). */
export function setBadge(el: HTMLElement, b: Badge): void {
  const cls = `badge tone-${b.tone}`;
  if (el.className !== cls) el.className = cls;
  setText(el, b.label);
}

/** A thin horizontal meter with a text value (CPU, memory); pct NaN shows an empty meter and `—`. */
export function meter(label: string): { el: HTMLElement; set(pct: number, text: string): void } {
  const fill = h('span', { class: 'meter-fill' });
  const value = h('span', { class: 'meter-text' }, '—');
  const bar = h('span', { class: 'meter-bar', role: 'meter', 'aria-label': label, 'aria-valuemin': 0, 'aria-valuemax': 100 }, fill);
  const el = h('span', { class: 'meter' }, bar, value);
  return {
    el,
    set(pct, text) {
      const ok = Number.isFinite(pct);
      const v = ok ? Math.min(100, Math.max(0, pct)) : 0;
      fill.style.transform = `scaleX(${(v / 100).toFixed(3)})`;
      fill.dataset['level'] = v >= 90 ? 'high' : v >= 70 ? 'mid' : 'low';
      if (ok) bar.setAttribute('aria-valuenow', v.toFixed(0));
      else bar.removeAttribute('aria-valuenow');
      setText(value, text);
    },
  };
}

/** A small SVG line chart; `update(values)` redraws it. `max` fixes the top (100 for percentages). */
export function sparkline(opts: { width: number; height: number; max?: number; label: string }): {
  el: SVGElement;
  update(values: readonly number[]): void;
} {
  const area = svg('path', { class: 'spark-area' });
  const line = svg('path', { class: 'spark-line' });
  // The newest point: a zero-length round-capped stroke stays a round dot when the chart is
  // stretched (preserveAspectRatio none), where a <circle> would become an ellipse.
  const dot = svg('path', { class: 'spark-dot' });
  const title = svg('title');
  title.textContent = opts.label;
  const el = svg(
    'svg',
    {
      class: 'sparkline',
      viewBox: `0 0 ${opts.width} ${opts.height}`,
      width: opts.width,
      height: opts.height,
      role: 'img',
      'aria-label': opts.label,
      preserveAspectRatio: 'none',
    },
    title,
    area,
    line,
    dot,
  );
  return {
    el,
    update(values) {
      const p = sparklinePaths(values, {
        width: opts.width,
        height: opts.height,
        inset: 3,
        ...(opts.max !== undefined ? { max: opts.max } : {}),
      });
      area.setAttribute('d', p.area);
      line.setAttribute('d', p.line);
      if (p.last !== null) {
        dot.setAttribute('d', `M${p.last.x},${p.last.y}h0`);
        dot.removeAttribute('visibility');
      } else {
        dot.setAttribute('visibility', 'hidden');
      }
    },
  };
}

/** An empty state: a sentence and, optionally, the action that fills it. */
export function emptyState(title: string, detail?: string, action?: HTMLElement): HTMLElement {
  return h(
    'div',
    { class: 'empty' },
    h('div', { class: 'empty-title' }, title),
    detail !== undefined ? h('div', { class: 'empty-detail' }, detail) : null,
    action ?? null,
  );
}

/** The header of a view: title, optional subtitle, right-aligned actions. */
export function pageHeader(title: string | Node, subtitle?: string | Node | null, ...actions: HTMLElement[]): HTMLElement {
  return h(
    'header',
    { class: 'page-head' },
    h(
      'div',
      { class: 'page-title' },
      h('h1', null, title),
      subtitle !== undefined && subtitle !== null ? h('div', { class: 'page-sub' }, subtitle) : null,
    ),
    actions.length > 0 ? h('div', { class: 'page-actions' }, ...actions) : null,
  );
}

/** A section (card) with a heading and optional actions in its header. */
export function section(title: string, content: Node, ...actions: HTMLElement[]): HTMLElement {
  return h(
    'section',
    { class: 'card' },
    h('div', { class: 'card-head' }, h('h2', null, title), actions.length > 0 ? h('div', { class: 'card-actions' }, ...actions) : null),
    content,
  );
}

/** A button (type=button) with a label; `variant` picks the style. */
export function button(
  label: string,
  onClick: (ev: MouseEvent) => void,
  variant: 'default' | 'primary' | 'danger' | 'ghost' = 'default',
  attrs: Record<string, string> = {},
): HTMLButtonElement {
  const cls = variant === 'default' ? 'btn' : `btn btn-${variant}`;
  const b = h('button', { type: 'button', class: cls, ...attrs }, label);
  b.addEventListener('click', onClick);
  return b;
}

/**
 * Runs an async action from a button: the button is disabled and marked busy while it runs, so a
 * double click does not send the request twice.
 */
export async function withBusy<T>(btn: HTMLButtonElement, action: () => Promise<T>): Promise<T> {
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  try {
    return await action();
  } finally {
    btn.disabled = false;
    btn.removeAttribute('aria-busy');
  }
}

/** A definition list of label → value pairs (system info, task fields). */
export function facts(rows: ReadonlyArray<readonly [string, string | Node]>): HTMLElement {
  const dl = h('dl', { class: 'facts' });
  for (const [k, v] of rows) dl.append(h('dt', null, k), h('dd', null, v));
  return dl;
}
