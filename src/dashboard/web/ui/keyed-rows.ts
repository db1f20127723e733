/**
 * Table rows kept by key and patched in place. Re-rendering a table every few seconds would
 * steal keyboard focus from its buttons and reset text selection; here a row's elements live as
 * long as its key, rows are only moved when the order really changed, and `update` patches cells.
 */

export interface KeyedRow {
  readonly tr: HTMLTableRowElement;
}

export class KeyedRows<R extends KeyedRow> {
  readonly #tbody: HTMLTableSectionElement;
  readonly #create: (key: string) => R;
  readonly #update: (row: R, key: string) => void;
  readonly #rows = new Map<string, R>();

  constructor(tbody: HTMLTableSectionElement, create: (key: string) => R, update: (row: R, key: string) => void) {
    this.#tbody = tbody;
    this.#create = create;
    this.#update = update;
  }

  /** Makes the body hold exactly `keys`, in order, every row updated. */
  sync(keys: readonly string[]): void {
    const wanted = new Set(keys);
    for (const [k, r] of this.#rows) {
      if (!wanted.has(k)) {
        r.tr.remove();
        this.#rows.delete(k);
      }
    }
    let cursor: ChildNode | null = this.#tbody.firstChild;
    for (const k of keys) {
      let r = this.#rows.get(k);
      if (r === undefined) {
        r = this.#create(k);
        this.#rows.set(k, r);
      }
      this.#update(r, k);
      if (r.tr === cursor) cursor = cursor.nextSibling;
      else this.#tbody.insertBefore(r.tr, cursor);
    }
  }

  /** Updates one row if it exists; false when it does not (the caller should sync). */
  patch(key: string): boolean {
    const r = this.#rows.get(key);
    if (r === undefined) return false;
    this.#update(r, key);
    return true;
  }

  get(key: string): R | undefined {
    return this.#rows.get(key);
  }

  get size(): number {
    return this.#rows.size;
  }
}
