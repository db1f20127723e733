/**
 * The MCP routes (README "MCP"):
 *
 *   POST /api/v2/admin/mcp            the MCP endpoint (streamable HTTP, stateless); admin listener only;
 *                                     admin.read to connect, each tool its own permission
 *   GET  /api/v2/admin/mcp/discovery  admin.read: what the endpoint serves (discovery.ts)
 *
 * The endpoint is the "operator mTLS": on the plaintext loopback listener (the trusted
 * local listener, which claims no operator identity) it answers 403 identity.operator_required
 * naming where it is served. GET and DELETE on it are 405 with Allow: POST (stateless: no session
 * to stream to or to end; the SDK client expects exactly that). Discovery is served on both
 * listeners: it says where the endpoint is and whether it is available.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import { kMcpMaxBodyBytes, MCP_CONNECT_PERMISSION, MCP_DISCOVERY_PATH, MCP_PATH, type McpDiscovery } from './discovery.js';
import { serveMcpRequest } from './http-bridge.js';
import { rpcMessagesOf, type InFlight } from './in-flight.js';
import { buildMcpServer, type McpServerDeps } from './server.js';

export interface McpRouteDeps {
  readonly identity: OperatorIdentity;
  readonly server: McpServerDeps;
  /** The discovery document (built once: the tools do not change while the server runs). */
  readonly discovery: () => Promise<McpDiscovery>;
  /** Servers of requests still being answered (cancellation, stop). */
  readonly inFlight: InFlight;
}

export function registerMcpRoutes(router: Router, d: McpRouteDeps): void {
  router.add({
    method: 'POST',
    path: MCP_PATH,
    body: 'raw',
    maxBodyBytes: kMcpMaxBodyBytes,
    handler: async (req) => {
      const { peer } = req;
      if (peer.transport !== 'mtls') {
        throw new SvcError(
          'identity.operator_required',
          `the MCP endpoint is served on the admin listener only (HTTPS with an operator certificate): POST https://<SVC_ADMIN_ADDR>${MCP_PATH}`,
        );
      }
      const caller = d.identity.require(req, MCP_CONNECT_PERMISSION);
      const messages = rpcMessagesOf(req.rawBody);
      const ids: unknown[] = [];
      for (const m of messages) {
        if (m.method === 'notifications/cancelled' && typeof m.params === 'object' && m.params !== null) {
          const { requestId } = m.params as { requestId?: unknown };
          if (requestId !== undefined) d.inFlight.cancel(peer.fingerprint256, requestId);
        } else if (typeof m.method === 'string' && m.id !== undefined) {
          ids.push(m.id);
        }
      }
      const server = buildMcpServer(d.server, caller);
      const forget = d.inFlight.add(peer.fingerprint256, ids, { close: () => server.close() });
      return serveMcpRequest(req, server, forget);
    },
  });

  router.add({
    method: 'GET',
    path: MCP_DISCOVERY_PATH,
    handler: async (req) => {
      d.identity.require(req, MCP_CONNECT_PERMISSION);
      return { status: 200, json: await d.discovery() };
    },
  });
}
