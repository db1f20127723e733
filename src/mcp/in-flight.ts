/**
 * The MCP servers of requests still being answered: the component closes them all at stop, and a
 * client's `notifications/cancelled` closes the one answering the request it cancels.
 *
 * Why this exists: the endpoint is stateless (one server per HTTP request, README "MCP"), and an
 * SDK client cancels a request (an aborted callTool) by POSTing `notifications/cancelled` — a new
 * HTTP request, which a new server would not know. So the route looks at each body first: request
 * ids are registered under the client certificate that sent them, and a cancellation from the same
 * certificate closes the server answering that id, which aborts its tool (run_command kills its
 * command). Keyed by certificate, a client can only cancel its own requests; two clients sharing
 * one certificate and one request id at the same moment would both be cancelled (ids are the
 * clients' counters), which costs a retry and nothing else.
 */

export interface OpenServer {
  close(): Promise<void>;
}

/** The JSON-RPC messages of a body, as far as they matter here (nothing when it is not JSON). */
export function rpcMessagesOf(body: Uint8Array | null): { method?: unknown; id?: unknown; params?: unknown }[] {
  if (body === null || body.byteLength === 0) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    return [];
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  return list.filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null);
}

export class InFlight {
  readonly #all = new Set<OpenServer>();
  readonly #byRequest = new Map<string, Set<OpenServer>>();

  get size(): number {
    return this.#all.size;
  }

  /** Registers `server` answering `ids` for `client`; returns the function that forgets it. */
  add(client: string, ids: readonly unknown[], server: OpenServer): () => void {
    this.#all.add(server);
    const keys = ids.map((id) => keyOf(client, id));
    for (const k of keys) {
      let set = this.#byRequest.get(k);
      if (set === undefined) this.#byRequest.set(k, (set = new Set()));
      set.add(server);
    }
    return () => {
      this.#all.delete(server);
      for (const k of keys) {
        const set = this.#byRequest.get(k);
        set?.delete(server);
        if (set?.size === 0) this.#byRequest.delete(k);
      }
    };
  }

  /** Closes the servers answering request `id` of `client`; how many there were. */
  cancel(client: string, id: unknown): number {
    const set = this.#byRequest.get(keyOf(client, id));
    if (set === undefined) return 0;
    for (const s of [...set]) s.close().catch(() => undefined);
    return set.size;
  }

  /** Closes every open server (stop). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#all].map((s) => s.close().catch(() => undefined)));
  }
}

function keyOf(client: string, id: unknown): string {
  return `${client}\0${JSON.stringify(id) ?? ''}`;
}
