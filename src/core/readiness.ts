/**
 * Readiness: /readyz answers 503 with the first reason until every registered component has
 * reported ready, and again once shutdown begins.
 */
export class Readiness {
  readonly #pending = new Map<string, string>();
  #shuttingDown = false;

  /** Registers a component that must become ready; `reason` is shown until it does. */
  expect(component: string, reason = `${component} starting`): void {
    this.#pending.set(component, reason);
  }

  ready(component: string): void {
    this.#pending.delete(component);
  }

  notReady(component: string, reason: string): void {
    this.#pending.set(component, reason);
  }

  beginShutdown(): void {
    this.#shuttingDown = true;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  state(): { ready: boolean; reason: string } {
    if (this.#shuttingDown) return { ready: false, reason: 'shutting down' };
    const first = this.#pending.values().next();
    return first.done === true ? { ready: true, reason: 'ok' } : { ready: false, reason: first.value };
  }
}
