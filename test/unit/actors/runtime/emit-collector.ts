/** Collects onEmit frames (copied) by key, and lets a test await a condition on them. */
export class EmitCollector {
  readonly byKey = new Map<string, Uint8Array[]>();
  readonly kinds = new Map<string, number[]>();
  #waiters: { check: () => boolean; resolve: () => void }[] = [];

  readonly onEmit = (kind: number, key: string, payload: Uint8Array): void => {
    let list = this.byKey.get(key);
    if (list === undefined) this.byKey.set(key, (list = []));
    list.push(payload.slice());
    let kinds = this.kinds.get(key);
    if (kinds === undefined) this.kinds.set(key, (kinds = []));
    kinds.push(kind);
    this.#waiters = this.#waiters.filter((w) => {
      if (!w.check()) return true;
      w.resolve();
      return false;
    });
  };

  frames(key: string): Uint8Array[] {
    return this.byKey.get(key) ?? [];
  }

  /** Resolves once `check` holds (checked now and after every frame). */
  until(check: () => boolean): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ check, resolve }));
  }

  /** Resolves once `key` has at least `count` frames. */
  count(key: string, count: number): Promise<void> {
    return this.until(() => this.frames(key).length >= count);
  }
}
