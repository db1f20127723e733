/**
 * What the user sees of the connection: a status pill in the top bar (Live / Polling / Offline)
 * and a banner while the server cannot be reached or live updates are paused, with the time to
 * the next attempt and a "Retry now" button. Short blips (under `graceMs`) show nothing, so a
 * server restart that completes quickly does not flash the page.
 */
import { h, setText } from '../dom.js';
import type { LiveSocket, LiveState } from './live-socket.js';
import { errorMessage } from '../../../util/error-message.js';

export type ConnectionSummary = 'live' | 'polling' | 'offline' | 'connecting';

export class ConnectionMonitor {
  readonly pill: HTMLElement;
  readonly banner: HTMLElement;
  readonly #bannerText: HTMLElement;
  readonly #pillText: HTMLElement;
  readonly #live: LiveSocket;
  readonly #graceMs: number;
  #apiDownSinceMs: number | null = null;
  #apiRetryAtMs = 0;
  #apiError = '';
  #everOk = false;
  #wasOffline = false;
  #ticker: ReturnType<typeof setInterval> | undefined;
  onRetry: () => void = () => undefined;
  onRecovered: () => void = () => undefined;

  constructor(live: LiveSocket, opts: { graceMs?: number } = {}) {
    this.#live = live;
    this.#graceMs = opts.graceMs ?? 2000;
    this.#pillText = h('span', null, 'Connecting');
    this.pill = h(
      'span',
      { class: 'conn-pill', 'data-state': 'connecting', role: 'status', 'aria-live': 'polite' },
      h('span', { class: 'conn-dot', 'aria-hidden': 'true' }),
      this.#pillText,
    );
    this.#bannerText = h('span', { class: 'banner-text' });
    const retry = h('button', { type: 'button', class: 'btn btn-small' }, 'Retry now');
    retry.addEventListener('click', () => {
      this.#live.retryNow();
      this.onRetry();
    });
    this.banner = h(
      'div',
      { class: 'banner', role: 'alert', hidden: true },
      h('span', { class: 'banner-spinner', 'aria-hidden': 'true' }),
      this.#bannerText,
      retry,
    );
    live.states.on(() => this.render());
    this.#ticker = setInterval(() => this.render(), 1000);
  }

  dispose(): void {
    clearInterval(this.#ticker);
  }

  apiOk(): void {
    this.#everOk = true;
    this.#apiDownSinceMs = null;
    this.render();
  }

  apiFailed(err: unknown, nextDelayMs: number): void {
    this.#apiDownSinceMs ??= Date.now();
    this.#apiRetryAtMs = Date.now() + nextDelayMs;
    this.#apiError = errorMessage(err);
    this.render();
  }

  summary(): ConnectionSummary {
    if (this.#apiDownSinceMs !== null) return 'offline';
    const s = this.#live.state;
    if (s.kind === 'open') return 'live';
    if (!this.#everOk) return 'connecting';
    return 'polling';
  }

  render(): void {
    const now = Date.now();
    const summary = this.summary();
    this.pill.dataset['state'] = summary;
    setText(
      this.#pillText,
      summary === 'live' ? 'Live' : summary === 'polling' ? 'Polling' : summary === 'offline' ? 'Offline' : 'Connecting',
    );
    this.pill.title =
      summary === 'live'
        ? 'Live updates over the WebSocket listener'
        : summary === 'polling'
          ? 'Live updates paused; data refreshes every few seconds'
          : summary === 'offline'
            ? `Cannot reach the server: ${this.#apiError}`
            : 'Connecting to the server';

    let text: string | null = null;
    if (this.#apiDownSinceMs !== null && now - this.#apiDownSinceMs >= this.#graceMs) {
      const secs = Math.max(0, Math.ceil((this.#apiRetryAtMs - now) / 1000));
      text = `Cannot reach sandboxd — reconnecting${secs > 0 ? ` in ${secs}s` : '…'}. The page keeps its data and resumes when the server is back.`;
    } else if (this.#apiDownSinceMs === null && this.#everOk) {
      const live: LiveState = this.#live.state;
      if (live.kind === 'waiting' && live.attempt >= 2) {
        const secs = Math.max(0, Math.ceil((live.retryAtMs - now) / 1000));
        text = `Live updates paused (${live.reason}) — reconnecting${secs > 0 ? ` in ${secs}s` : '…'}. Data still refreshes every few seconds.`;
      } else if (live.kind === 'disabled') {
        text = `Live updates are off: ${live.reason}`;
      }
    }
    const offline = summary === 'offline' && text !== null;
    if (offline) this.#wasOffline = true;
    else if (this.#wasOffline && summary !== 'offline') {
      this.#wasOffline = false;
      this.onRecovered();
    }
    this.banner.hidden = text === null;
    this.banner.dataset['kind'] = offline ? 'offline' : 'degraded';
    if (text !== null) setText(this.#bannerText, text);
  }
}
