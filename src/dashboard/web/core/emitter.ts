/** A minimal typed event emitter: `on` returns the unsubscribe function. */
export class Emitter<T> {
  readonly #listeners = new Set<(value: T) => void>();

  on(fn: (value: T) => void): () => void {
    this.#listeners.add(fn);
    return () => {
      this.#listeners.delete(fn);
    };
  }

  emit(value: T): void {
    for (const fn of [...this.#listeners]) {
      try {
        fn(value);
      } catch (err) {
        // One broken view must not stop the others from updating.
        console.error('dashboard listener failed', err);
      }
    }
  }

  get size(): number {
    return this.#listeners.size;
  }
}
