/**
 * SSE fanout on the main thread: topic → subscribers. `publish` writes the SAME frame bytes to
 * every subscriber of the topic (no per-subscriber encoding); each subscriber applies its own
 * bounded-queue policy (src/http/live-subscriber.ts), so one slow client never delays the others.
 * Closed subscribers leave their topic by themselves; an empty topic is forgotten.
 */
import type { LiveSubscriber } from '../http/live-subscriber.js';

export class SseTopics {
  readonly #topics = new Map<string, Set<LiveSubscriber>>();
  #subscribers = 0;
  #published = 0;

  /** Add `sub` to `topic` until it closes or the returned function is called. */
  subscribe(topic: string, sub: LiveSubscriber): () => void {
    if (sub.closed) return () => undefined;
    let set = this.#topics.get(topic);
    if (set === undefined) {
      set = new Set();
      this.#topics.set(topic, set);
    }
    if (set.has(sub)) return () => this.#remove(topic, sub);
    set.add(sub);
    this.#subscribers++;
    const remove = (): void => this.#remove(topic, sub);
    sub.onClose(remove);
    return remove;
  }

  /** Send `frame` (with its event id) to every subscriber of `topic`; returns how many took it. */
  publish(topic: string, frame: Uint8Array, cursor?: string): number {
    const set = this.#topics.get(topic);
    if (set === undefined) return 0;
    let n = 0;
    // A subscriber cut off during the loop removes itself; Set iteration tolerates that.
    for (const sub of set) if (sub.send(frame, cursor)) n++;
    this.#published++;
    return n;
  }

  /**
   * End the stream of every subscriber of `topic` with `frame` as its last event (written in order
   * after what each already has queued); returns how many took it.
   */
  publishEnd(topic: string, frame: Uint8Array): number {
    const set = this.#topics.get(topic);
    if (set === undefined) return 0;
    let n = 0;
    for (const sub of [...set]) {
      if (sub.closed) continue;
      sub.endWith(frame);
      n++;
    }
    this.#published++;
    return n;
  }

  /** Subscribers of `topic`, or of all topics. */
  subscriberCount(topic?: string): number {
    return topic === undefined ? this.#subscribers : (this.#topics.get(topic)?.size ?? 0);
  }

  /** True when anyone listens on `topic` (to skip encoding for nobody). */
  has(topic: string): boolean {
    return this.#topics.has(topic);
  }

  get topicCount(): number {
    return this.#topics.size;
  }

  /** Frames published to a topic with subscribers (for a metric). */
  get publishedFrames(): number {
    return this.#published;
  }

  /** Close every subscriber (server stop); `finalFrame`, when given, is written to each first. */
  closeAll(finalFrame?: Uint8Array): void {
    for (const set of [...this.#topics.values()]) {
      for (const sub of [...set]) {
        if (finalFrame !== undefined) sub.send(finalFrame);
        sub.close();
      }
    }
  }

  #remove(topic: string, sub: LiveSubscriber): void {
    const set = this.#topics.get(topic);
    if (set === undefined || !set.delete(sub)) return;
    this.#subscribers--;
    if (set.size === 0) this.#topics.delete(topic);
  }
}
