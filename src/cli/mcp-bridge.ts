/**
 * `sbx mcp`'s relay (README "MCP"): MCP over stdio, which every coding assistant speaks, to
 * sandboxd's MCP endpoint on the admin listener (streamable HTTP with the operator certificate),
 * message for message. The assistant's requests, notifications (a cancellation too) and responses
 * go up as they are; what the endpoint answers (progress notifications, results) comes back as it
 * is. Two things the relay does itself: it tells the HTTP transport the protocol version the
 * handshake agreed on (sent with every later request), and a request the endpoint cannot be asked
 * (unreachable, refused with an HTTP error) is answered with a JSON-RPC error naming why, so the
 * assistant is never left waiting.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { errorMessage } from '../util/error-message.js';

/** The HTTP side: the SDK's StreamableHTTPClientTransport has this. */
export interface UpstreamTransport extends Transport {
  setProtocolVersion(version: string): void;
}

/** JSON-RPC "internal error": the relay could not get an answer from sandboxd. */
const kRelayErrorCode = -32603;

/** Relays until either side closes or `signal` aborts; then closes both. Never rejects. */
export function relayMcp(
  local: Transport,
  upstream: UpstreamTransport,
  o: { signal: AbortSignal; onError: (message: string) => void },
): Promise<void> {
  const initializing = new Set<RequestId>();
  return new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      o.signal.removeEventListener('abort', finish);
      void Promise.allSettled([local.close(), upstream.close()]).then(() => resolve());
    };
    local.onmessage = (m: JSONRPCMessage) => {
      const request = 'method' in m && 'id' in m ? m : undefined;
      if (request?.method === 'initialize') initializing.add(request.id);
      upstream.send(m).catch((err: unknown) => {
        o.onError(`sandboxd MCP endpoint: ${errorMessage(err)}`);
        if (request !== undefined) {
          local
            .send({ jsonrpc: '2.0', id: request.id, error: { code: kRelayErrorCode, message: `sandboxd: ${errorMessage(err)}` } })
            .catch(() => undefined);
        }
      });
    };
    upstream.onmessage = (m: JSONRPCMessage) => {
      if ('result' in m && initializing.delete(m.id)) {
        const version = (m.result as { protocolVersion?: unknown }).protocolVersion;
        if (typeof version === 'string') upstream.setProtocolVersion(version);
      }
      local.send(m).catch(() => finish());
    };
    local.onerror = (err) => o.onError(`stdio: ${err.message}`);
    upstream.onerror = (err) => o.onError(`sandboxd MCP endpoint: ${err.message}`);
    local.onclose = finish;
    upstream.onclose = finish;
    if (o.signal.aborted) return finish();
    o.signal.addEventListener('abort', finish);
    upstream
      .start()
      .then(() => local.start())
      .catch((err: unknown) => {
        o.onError(errorMessage(err));
        finish();
      });
  });
}
