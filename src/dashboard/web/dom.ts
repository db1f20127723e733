/**
 * A few DOM helpers instead of a framework: `h()` builds elements, views keep references to the
 * nodes they patch. Text always goes through textContent (never innerHTML), so server data can
 * not inject markup.
 */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/**
 * `h('button', {class: 'btn', onclick: fn, disabled: true}, 'Start')`. Attributes starting with
 * `on` are listeners; `true` sets a boolean attribute, `false`/null/undefined leave it out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs !== null) setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function setAttrs(el: Element, attrs: Attrs): void {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el: Node, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces an element's children. */
export function replaceChildren(el: Element, ...children: Child[]): void {
  el.textContent = '';
  append(el, children);
}

/** Sets text only when it changed (cheap patches of live cells without layout churn). */
export function setText(el: Node, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

const SVG_NS = 'http://www.w3.org/2000/svg' as const;

/** An SVG element (`svg('path', {d: …})`). */
export function svg(tag: keyof SVGElementTagNameMap, attrs: Record<string, string | number> = {}, ...children: Element[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.appendChild(c);
  return el;
}

let idCounter = 0;
/** A page-unique id for label/input pairs and aria references. */
export function uid(prefix = 'id'): string {
  return `${prefix}-${++idCounter}`;
}

/** A labelled form field: label, control, hint and an error slot wired with aria-describedby. */
export function field(
  label: string,
  control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  hint?: string,
): { el: HTMLElement; error: HTMLElement } {
  const id = control.id !== '' ? control.id : (control.id = uid('f'));
  const error = h('div', { class: 'field-error', id: `${id}-error`, role: 'alert' });
  const hintEl = hint !== undefined ? h('div', { class: 'field-hint', id: `${id}-hint` }, hint) : null;
  control.setAttribute('aria-describedby', [hintEl !== null ? `${id}-hint` : '', `${id}-error`].filter((s) => s !== '').join(' '));
  const el = h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl, error);
  return { el, error };
}

/** Shows (or clears) a field's error and marks the control invalid for assistive tech. */
export function setFieldError(control: HTMLElement, errorEl: HTMLElement, message: string | undefined): void {
  setText(errorEl, message ?? '');
  if (message === undefined || message === '') control.removeAttribute('aria-invalid');
  else control.setAttribute('aria-invalid', 'true');
}

/** Runs `fn` at most once per animation frame (coalesces bursts of live updates). */
export function frameThrottle(fn: () => void): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}
