/**
 * The MCP server of one request (README "MCP"): the official SDK's McpServer with the fleet tools
 * (tools.ts) and the fleet resources registered, bound to the caller that request resolved to.
 *
 * Every tool checks the caller's permission itself (the route let in anyone with admin.read), so a
 * viewer lists every tool — discovery and listTools are the same for everyone — and is refused the
 * ones it may not call with a tool error `auth.permission_denied` naming the permission. A tool
 * that fails reports `<code>: <message>` as a tool error (isError, with {error: {code, message}}
 * as structured content): bad input never crashes anything. Input that fails a tool's schema is
 * reported by the SDK the same way, before the tool runs.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Authority } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import { AGENT_VERSION } from '../guest-agent/version.js';
import type { FleetTool, ToolCall } from './tools.js';

/** The server's name in the MCP handshake (serverInfo). */
export const kMcpServerName = 'sandboxd';
/** sandboxd's version (one package, one version). */
export const kMcpServerVersion = AGENT_VERSION;
/** The `_meta` key of a tool's required permission (listTools shows it; discovery too). */
export const kPermissionMetaKey = 'sandboxd/permission';

export const kMcpInstructions =
  'sandboxd manages a fleet of agent VMs. list_agents and list_vms show the fleet; create_vm creates a VM (its agent id is the ' +
  'VM name); run_command runs a program on an agent and streams its output; read_task_log pages through a task log. ' +
  'Tool errors read "<code>: <message>" with the codes of sandboxd\'s error table.';

/** A fleet resource: a read-only JSON view. */
export interface FleetResource {
  readonly name: string;
  readonly uri: string;
  readonly title: string;
  readonly description: string;
  read(): Promise<unknown>;
}

export interface McpServerDeps {
  readonly tools: readonly FleetTool[];
  readonly resources: readonly FleetResource[];
  readonly logger: Logger;
  /** Counts each tool call by outcome (`ok` or the error code): svc_mcp_tool_calls_total{tool,outcome}. */
  readonly countCall?: (tool: string, outcome: string) => void;
}

/** A new server for one caller (stateless transport: one per HTTP request). */
export function buildMcpServer(d: McpServerDeps, caller: Authority): McpServer {
  const server = new McpServer(
    { name: kMcpServerName, version: kMcpServerVersion },
    { capabilities: { tools: {}, resources: {} }, instructions: kMcpInstructions },
  );
  for (const tool of d.tools) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.input,
        annotations: { title: tool.title, readOnlyHint: tool.readOnly, destructiveHint: false, openWorldHint: false },
        _meta: { [kPermissionMetaKey]: tool.permission },
      },
      async (args: unknown, extra): Promise<CallToolResult> => {
        if (!caller.permissions.includes(tool.permission)) {
          const as = caller.fail_closed
            ? `an unresolved identity (${caller.reason ?? 'unknown'})`
            : `${caller.actor ?? '?'} (role ${caller.role ?? 'none'})`;
          d.countCall?.(tool.name, 'auth.permission_denied');
          return toolError('auth.permission_denied', `${tool.name} needs permission ${tool.permission}, which ${as} does not have`);
        }
        const token = extra._meta?.progressToken;
        const call: ToolCall = {
          signal: extra.signal,
          caller: { actor: caller.actor, mode: caller.mode },
          ...(token !== undefined && {
            progress: (progress: number, message?: string, total?: number) => {
              extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: {
                    progressToken: token,
                    progress,
                    ...(total !== undefined && { total }),
                    ...(message !== undefined && { message }),
                  },
                })
                .catch(() => undefined);
            },
          }),
        };
        try {
          const result = await tool.run(args, call);
          d.logger.info({ tool: tool.name, actor: caller.actor }, 'mcp tool call');
          d.countCall?.(tool.name, 'ok');
          return { content: [{ type: 'text', text: tool.text?.(result) ?? JSON.stringify(result) }], structuredContent: result };
        } catch (err) {
          if (err instanceof SvcError) {
            d.countCall?.(tool.name, err.code);
            return toolError(err.code, err.message);
          }
          d.countCall?.(tool.name, 'server.internal');
          d.logger.error({ err, tool: tool.name }, 'mcp tool failed');
          return toolError('server.internal', 'an unexpected failure; the log has the details');
        }
      },
    );
  }
  for (const r of d.resources) {
    server.registerResource(r.name, r.uri, { title: r.title, description: r.description, mimeType: 'application/json' }, async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(await r.read()) }],
    }));
  }
  return server;
}

function toolError(code: string, message: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], structuredContent: { error: { code, message } } };
}
