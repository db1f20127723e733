/**
 * `sbx mcp`: sandboxd's MCP tools for a coding assistant that runs MCP servers as programs (stdio),
 * relayed to the admin listener's MCP endpoint with the operator certificate (README "MCP").
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { UsageError } from '../args.js';
import { relayMcp } from '../mcp-bridge.js';
import { operatorFetch } from '../operator-tls.js';
import type { CommandDef } from './command.js';

/** The endpoint's path on the admin listener. */
export const MCP_ENDPOINT_PATH = '/api/v2/admin/mcp';

const mcp: CommandDef = {
  noun: 'mcp',
  verb: '',
  summary: "serve sandboxd's MCP tools on stdin/stdout for a coding assistant (needs the admin listener)",
  details: [
    'Relays MCP over stdio to https://<admin listener>/api/v2/admin/mcp with the operator certificate:',
    '  SBX_SERVER=https://127.0.0.1:8123 SBX_OPERATOR_CERTS=DIR sbx mcp',
    'DIR holds ca.pem, operator.pem and operator-key.pem (sandboxd certs issue-operator --out DIR).',
    'stdout carries only MCP messages; problems go to stderr. Ends when stdin ends.',
  ].join('\n'),
  args: [],
  flags: [],
  async run(ctx) {
    const server = ctx.settings.server;
    const certs = ctx.io.env.SBX_OPERATOR_CERTS;
    if (!server.startsWith('https:') || certs === undefined || certs === '') {
      throw new UsageError(
        'sbx mcp needs the admin listener and an operator certificate',
        'SBX_SERVER=https://<SVC_ADMIN_ADDR> SBX_OPERATOR_CERTS=DIR sbx mcp',
      );
    }
    const fetch = operatorFetch(certs);
    const upstream = new StreamableHTTPClientTransport(new URL(MCP_ENDPOINT_PATH, server), {
      fetch: (url, init) => fetch(String(url), init),
    });
    const local = new StdioServerTransport(ctx.io.stdin, ctx.io.stdout);
    const ended = new AbortController();
    ctx.io.stdin.once('end', () => ended.abort());
    await relayMcp(local, upstream, { signal: AbortSignal.any([ctx.signal, ended.signal]), onError: (m) => ctx.err(`sbx mcp: ${m}`) });
    return undefined;
  },
};

export const MCP_COMMANDS: readonly CommandDef[] = [mcp];
