/**
 * Toasts: short notices in the corner. Errors carry the server's code and message and stay until
 * dismissed (a user must be able to read and copy them); successes fade after a few seconds.
 * The region is an ARIA live region, so screen readers announce each toast.
 */
import { ApiError } from '../../../client/api-error.js';
import { h } from '../dom.js';

export type ToastKind = 'success' | 'error' | 'info';

export class Toasts {
  readonly el: HTMLElement;

  constructor() {
    this.el = h('div', { class: 'toasts', role: 'region', 'aria-label': 'Notifications', 'aria-live': 'polite' });
  }

  show(kind: ToastKind, title: string, detail?: string, opts: { timeoutMs?: number } = {}): HTMLElement {
    const close = h('button', { class: 'btn-icon', type: 'button', 'aria-label': 'Dismiss notification', title: 'Dismiss' }, '×');
    const toast = h(
      'div',
      { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
      h(
        'div',
        { class: 'toast-body' },
        h('div', { class: 'toast-title' }, title),
        detail !== undefined && detail !== '' ? h('div', { class: 'toast-detail' }, detail) : null,
      ),
      close,
    );
    const remove = (): void => {
      toast.classList.add('leaving');
      setTimeout(() => toast.remove(), 150);
    };
    close.addEventListener('click', remove);
    this.el.appendChild(toast);
    // Keep the stack short: the oldest non-error toasts go first.
    const all = [...this.el.children];
    if (all.length > 5) (all.find((t) => !t.classList.contains('toast-error')) ?? all[0])?.remove();
    const timeoutMs = opts.timeoutMs ?? (kind === 'error' ? 0 : 4000);
    if (timeoutMs > 0) setTimeout(remove, timeoutMs);
    return toast;
  }

  /** A failed call: the server's code and message (or what went wrong below HTTP). */
  error(what: string, err: unknown): HTMLElement {
    return this.show('error', what, describeError(err));
  }

  success(title: string, detail?: string): HTMLElement {
    return this.show('success', title, detail);
  }

  info(title: string, detail?: string): HTMLElement {
    return this.show('info', title, detail);
  }
}

/** `VM_ALREADY_EXISTS: VM 'agent-1' already exists` — the code first, for searching the docs. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) return err.status === 0 ? err.message : `${err.code} (${err.status}): ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
