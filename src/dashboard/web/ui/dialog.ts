/**
 * Modal dialogs on the native <dialog> element: showModal() makes the rest of the page inert and
 * Escape closes it; Tab and Shift+Tab cycle inside the dialog (the browser alone would let focus
 * wander to its own toolbar); focus returns to the control that opened it. `confirmDialog` is the
 * yes/no case with optional checkboxes (delete's force/delete_disk).
 */
import { h, uid } from '../dom.js';

export interface DialogHandle {
  readonly dialog: HTMLDialogElement;
  /** Where the dialog's content goes. */
  readonly body: HTMLElement;
  /** Buttons row. */
  readonly actions: HTMLElement;
  close(): void;
  /** Resolves when the dialog closes for any reason. */
  readonly closed: Promise<void>;
}

/** Opens a modal dialog titled `title`; the caller fills `body` and `actions`. */
export function openDialog(title: string, opts: { wide?: boolean; describedBy?: string } = {}): DialogHandle {
  const titleId = uid('dlg-title');
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  const closeBtn = h('button', { class: 'btn-icon dialog-close', type: 'button', 'aria-label': 'Close dialog', title: 'Close (Esc)' }, '×');
  const body = h('div', { class: 'dialog-body' });
  const actions = h('div', { class: 'dialog-actions' });
  const dialog = h(
    'dialog',
    {
      class: opts.wide === true ? 'dialog dialog-wide' : 'dialog',
      'aria-labelledby': titleId,
      ...(opts.describedBy !== undefined ? { 'aria-describedby': opts.describedBy } : {}),
    },
    h('div', { class: 'dialog-head' }, h('h2', { id: titleId }, title), closeBtn),
    body,
    actions,
  );
  let resolveClosed: () => void = () => undefined;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  const close = (): void => {
    if (dialog.open) dialog.close();
  };
  closeBtn.addEventListener('click', close);
  dialog.addEventListener('keydown', (ev) => trapTab(dialog, ev));
  // A click on the backdrop (the dialog element itself, outside its content box) closes it.
  dialog.addEventListener('click', (ev) => {
    if (ev.target !== dialog) return;
    const r = dialog.getBoundingClientRect();
    const inside = ev.clientX >= r.left && ev.clientX <= r.right && ev.clientY >= r.top && ev.clientY <= r.bottom;
    if (!inside) close();
  });
  dialog.addEventListener('close', () => {
    dialog.remove();
    opener?.focus();
    resolveClosed();
  });
  document.body.appendChild(dialog);
  dialog.showModal();
  return { dialog, body, actions, close, closed };
}

const FOCUSABLE =
  'button:not([disabled]), [href], input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/** Keeps Tab inside `root`: from the last focusable element to the first, and back with Shift. */
function trapTab(root: HTMLElement, ev: KeyboardEvent): void {
  if (ev.key !== 'Tab') return;
  const items = [...root.querySelectorAll<HTMLElement>(FOCUSABLE)].filter((e) => !e.hidden && e.offsetParent !== null);
  const first = items[0];
  const last = items[items.length - 1];
  if (first === undefined || last === undefined) return;
  const active = document.activeElement;
  if (ev.shiftKey && (active === first || !root.contains(active))) {
    ev.preventDefault();
    last.focus();
  } else if (!ev.shiftKey && (active === last || !root.contains(active))) {
    ev.preventDefault();
    first.focus();
  }
}

export interface ConfirmOption {
  readonly name: string;
  readonly label: string;
  readonly hint?: string;
  readonly checked?: boolean;
}

/**
 * Asks a yes/no question. Resolves with the ticked options when confirmed, null when cancelled
 * (Cancel, Escape, the close button or the backdrop). Focus starts on Cancel: the safe choice.
 */
export async function confirmDialog(opts: {
  title: string;
  message: string | Node;
  confirmLabel: string;
  danger?: boolean;
  options?: readonly ConfirmOption[];
}): Promise<Record<string, boolean> | null> {
  const msgId = uid('dlg-msg');
  const d = openDialog(opts.title, { describedBy: msgId });
  d.body.appendChild(h('div', { id: msgId, class: 'dialog-message' }, opts.message));
  const boxes = new Map<string, HTMLInputElement>();
  for (const o of opts.options ?? []) {
    const box = h('input', { type: 'checkbox', id: uid('opt'), name: o.name, checked: o.checked === true });
    boxes.set(o.name, box);
    d.body.appendChild(
      h(
        'div',
        { class: 'check' },
        box,
        h('label', { for: box.id }, o.label, o.hint !== undefined ? h('span', { class: 'field-hint' }, ` — ${o.hint}`) : null),
      ),
    );
  }
  let result: Record<string, boolean> | null = null;
  const cancel = h('button', { class: 'btn', type: 'button' }, 'Cancel');
  const ok = h('button', { class: opts.danger === true ? 'btn btn-danger' : 'btn btn-primary', type: 'button' }, opts.confirmLabel);
  cancel.addEventListener('click', () => d.close());
  ok.addEventListener('click', () => {
    result = Object.fromEntries([...boxes].map(([k, b]) => [k, b.checked]));
    d.close();
  });
  d.actions.append(cancel, ok);
  cancel.focus();
  await d.closed;
  return result;
}
