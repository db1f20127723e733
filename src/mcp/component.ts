/**
 * The MCP component (issue 20 item 6; README "MCP"): an MCP server on the admin listener whose
 * fleet tools work through the existing services — the agents registry, the VM service and its
 * operations, the agents' actors (through an AgentCommandClient of its own, like tasks and
 * sessions), the task orchestrator — and its discovery document. Listed after the tasks component
 * (it uses every service above); stopped before it, closing the servers of requests still being
 * answered first, which kills the commands they still run.
 */
import { Counter } from 'prom-client';
import { AgentCommandClient } from '../agent-link/command-client.js';
import type { Component } from '../component/component.js';
import { buildDiscovery, type McpDiscovery } from './discovery.js';
import { InFlight } from './in-flight.js';
import { registerMcpRoutes } from './routes.js';
import type { FleetResource, McpServerDeps } from './server.js';
import { fleetTools } from './tools.js';

export function mcpComponent(): Component {
  return {
    name: 'mcp',
    start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'mcp' });
      const identity = ctx.need('operatorIdentity');
      const agents = ctx.need('agents');
      const vms = ctx.need('vms');
      const tasks = ctx.need('tasks');
      const commands = new AgentCommandClient(ctx.need('actors'), agents);
      const fleetInventory = ctx.find('fleetInventory');
      const tools = fleetTools({
        agents: agents.registry,
        vms: {
          list: (q) => vms.api.list(q),
          create: (req) => vms.api.create(req),
          waitForOperation: (id, opts) => vms.operations.waitFor(id, opts),
          getOperation: (id) => vms.operations.get(id),
        },
        commands,
        tasks: tasks.orchestrator,
        execDefaultTimeoutSeconds: config.execDefaultTimeoutSeconds,
        directRuntimeSsh: config.enableDirectRuntimeSsh,
        ...(fleetInventory !== undefined && { recordCreate: fleetInventory.recordCreate }),
      });
      const resources: FleetResource[] = [
        {
          name: 'agents',
          uri: 'sandboxd://fleet/agents',
          title: 'Agents',
          description: 'Every agent sandboxd knows, as GET /api/v1/agents lists them ({agents})',
          read: () => Promise.resolve({ agents: agents.registry.list() }),
        },
        {
          name: 'vms',
          uri: 'sandboxd://fleet/vms',
          title: 'VMs',
          description: 'Every VM of the hypervisor, as GET /api/v1/vms?prefix=* lists them ({vms, total})',
          read: () => vms.api.list({ state: 'all', prefix: '' }),
        },
      ];
      const calls = new Counter({
        name: 'svc_mcp_tool_calls_total',
        help: 'MCP tool calls by tool and outcome: ok, or the error code of a tool error (input that fails the schema is not counted)',
        labelNames: ['tool', 'outcome'] as const,
        registers: [ctx.metrics.registry],
      });
      for (const t of tools) calls.inc({ tool: t.name, outcome: 'ok' }, 0);
      const server: McpServerDeps = { tools, resources, logger, countCall: (tool, outcome) => calls.inc({ tool, outcome }) };
      const admin = ctx.find('adminListener');
      let discovery: Promise<McpDiscovery> | undefined;
      const inFlight = new InFlight();
      logger.info(
        { tools: tools.map((t) => t.name), admin: admin === undefined ? 'off' : `${config.adminAddr?.host}:${admin.port}` },
        'mcp server ready',
      );
      return Promise.resolve({
        routes: (router) =>
          registerMcpRoutes(router, {
            identity,
            server,
            inFlight,
            discovery: () =>
              (discovery ??= buildDiscovery(server, {
                trustDomain: config.trustDomain,
                adminAddress: admin === undefined || config.adminAddr === null ? null : { host: config.adminAddr.host, port: admin.port },
              }).catch((err: unknown) => {
                discovery = undefined;
                throw err;
              })),
          }),
        stop: async () => {
          await inFlight.closeAll();
          commands.stop();
        },
      });
    },
  };
}
