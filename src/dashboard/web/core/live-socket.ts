/**
 * The dashboard's connection to the WebSocket listener (spec 4.18: `metrics`, `agent_status`,
 * `output` messages). Its address comes from GET /api/v1/dashboard/config, asked again before
 * every reconnect because a restarted server may listen elsewhere. Reconnects forever with
 * jittered backoff; state changes drive the "reconnecting" banner.
 */
import type { ApiClient } from '../../../client/api-client.js';
import { backoffDelayMs } from '../../model/backoff.js';
import { parseLiveMessage, type LiveMessage } from '../../model/live-messages.js';
import { Emitter } from './emitter.js';
import { errorMessage } from '../../../util/error-message.js';

export type LiveState =
  | { readonly kind: 'connecting' }
  | { readonly kind: 'open'; readonly sinceMs: number }
  | { readonly kind: 'waiting'; readonly retryAtMs: number; readonly attempt: number; readonly reason: string }
  | { readonly kind: 'disabled'; readonly reason: string };

/** GET /api/v1/dashboard/config. */
export interface DashboardConfig {
  ws_url: string | null;
}

export class LiveSocket {
  readonly messages = new Emitter<{ msg: LiveMessage; receivedAtMs: number }>();
  readonly states = new Emitter<LiveState>();
  readonly #api: ApiClient;
  #state: LiveState = { kind: 'connecting' };
  #ws: WebSocket | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #attempt = 0;
  #stopped = true;
  /** Messages received since start (diagnostics and the bench's update-rate hook). */
  messageCount = 0;

  constructor(api: ApiClient) {
    this.#api = api;
  }

  get state(): LiveState {
    return this.#state;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    void this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#ws?.close(1000, 'dashboard closed');
    this.#ws = null;
  }

  /** Reconnect now instead of waiting out the backoff ("Retry now"). */
  retryNow(): void {
    if (this.#stopped || this.#state.kind === 'open' || this.#state.kind === 'connecting') return;
    clearTimeout(this.#timer);
    void this.#connect();
  }

  #setState(s: LiveState): void {
    this.#state = s;
    this.states.emit(s);
  }

  async #connect(): Promise<void> {
    this.#setState({ kind: 'connecting' });
    let url: string | null;
    try {
      url = (await this.#api.requestJson<DashboardConfig>('GET', '/api/v1/dashboard/config', undefined, { timeoutMs: 5000 })).ws_url;
    } catch (err) {
      this.#scheduleRetry(err instanceof Error ? err.message : 'cannot reach the server');
      return;
    }
    if (this.#stopped) return;
    if (url === null || url === '') {
      this.#scheduleRetry('the WebSocket listener is not up yet');
      return;
    }
    let ws: WebSocket;
    try {
      ws = new WebSocket(url);
    } catch (err) {
      this.#setState({ kind: 'disabled', reason: `bad WebSocket address ${url}: ${errorMessage(err)}` });
      return;
    }
    this.#ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.#attempt = 0;
      this.#setState({ kind: 'open', sinceMs: Date.now() });
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data !== 'string') return;
      const msg = parseLiveMessage(ev.data);
      this.messageCount++;
      if (msg !== null) this.messages.emit({ msg, receivedAtMs: Date.now() });
    };
    ws.onclose = (ev: CloseEvent) => {
      if (this.#ws !== ws) return;
      this.#ws = null;
      if (this.#stopped) return;
      this.#scheduleRetry(
        opened ? `connection closed (${ev.code}${ev.reason !== '' ? ` ${ev.reason}` : ''})` : 'cannot connect to the WebSocket listener',
      );
    };
  }

  #scheduleRetry(reason: string): void {
    if (this.#stopped) return;
    const delayMs = backoffDelayMs(this.#attempt, { baseMs: 1000, maxMs: 15_000 });
    this.#attempt++;
    this.#setState({ kind: 'waiting', retryAtMs: Date.now() + delayMs, attempt: this.#attempt, reason });
    this.#timer = setTimeout(() => void this.#connect(), delayMs);
  }
}
