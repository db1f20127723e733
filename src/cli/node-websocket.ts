/**
 * A WebSocket constructor for Node (sbx session attach): the global one when Node has it
 * (Node 22+, or 20 with --experimental-websocket), else the `ws` package, loaded on demand so
 * that only attach needs it. `ws` implements the browser API the client uses (onmessage with
 * `data`, binaryType 'arraybuffer', subprotocols).
 */
import type { WebSocketConstructor } from '../client/http-transport.js';

/** Resolves with a WebSocket constructor; rejects with a message naming the missing package. */
export async function loadNodeWebSocket(): Promise<WebSocketConstructor> {
  const global = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (global !== undefined) return global;
  // A variable specifier keeps bundlers and the layer check from treating ws as a static dependency.
  const specifier = 'ws';
  try {
    const mod = (await import(specifier)) as { WebSocket?: unknown; default?: unknown };
    const ctor = mod.WebSocket ?? mod.default;
    if (typeof ctor !== 'function') throw new Error('the ws module has no WebSocket export');
    return ctor as WebSocketConstructor;
  } catch (err) {
    throw new Error(`session attach needs a WebSocket client: install the ws package (npm install ws) — ${(err as Error).message}`, {
      cause: err,
    });
  }
}
