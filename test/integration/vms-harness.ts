/**
 * The VM feature on real parts, for the vms-*.test.ts files: startServer with the events,
 * actors, hypervisor (test:///default) and VM components, a real CA, real local sandbox-agent
 * processes, the routes on the server's router driven with inject() (no listener). Only the
 * agents registry is stood in for (AgentLookup): an agent counts as connected while its local
 * process runs, unless the test put its VM in `unreachable`.
 *
 * test:///default is shared by every connection of the process: each test uses names of its own.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { ActorMode, ActorSystem } from '../../actors/runtime/actor-system.js';
import { loadConfig } from '../../src/config/load.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { bootstrapComponent } from '../../src/bootstrap/component.js';
import type { Component } from '../../src/component/component.js';
import { eventsComponent } from '../../src/events/component.js';
import type { EventStore } from '../../src/events/event-store.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import type { Router } from '../../src/http/router.js';
import type { LibvirtHypervisor } from '../../src/hypervisor/libvirt/libvirt-hypervisor.js';
import { createStandaloneCa } from '../../src/identity/ca.js';
import { startServer } from '../../src/main.js';
import { idempotencyComponent } from '../../src/idempotency/component.js';
import { operationsComponent } from '../../src/operations/component.js';
import { actorsComponent, hypervisorComponent, httpComponent, jobsComponent } from '../../src/server/runtime-components.js';
import type { AgentLookup } from '../../src/vms/agent-lookup.js';
import { vmsComponent, type VmsComponentOptions } from '../../src/vms/component.js';
import type { VmService, VmServiceOptions } from '../../src/vms/vm-service.js';
import { closedPort } from '../support/ports.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

export interface VmHarness {
  readonly hv: LibvirtHypervisor;
  readonly actors: ActorSystem;
  readonly svc: VmService;
  readonly router: Router;
  readonly events: EventStore;
  readonly stateDir: string;
  /** VMs whose agent never "connects". */
  readonly unreachable: Set<string>;
  /** VM → ms after its agent process started before it counts as connected (default 0). */
  readonly connectDelayMs: Map<string, number>;
  req(method: string, url: string, body?: unknown): Promise<InjectResponse>;
  /** Polls GET /api/v1/operations/{id} until completed or failed. */
  waitOp(id: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Creates a VM through the API and waits for its operation to complete. */
  createVm(name: string, body?: Record<string, unknown>): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

export async function startVmHarness(
  opts: {
    mode?: ActorMode;
    agents?: (h: { svc: () => VmService; unreachable: Set<string> }) => AgentLookup;
    grpcPort?: number;
    /** Default test:///default. */
    uri?: string;
    pollIntervalMs?: number;
  } & Partial<VmServiceOptions> = {},
): Promise<VmHarness> {
  const { mode, agents: agentsFactory, grpcPort, uri, pollIntervalMs, ...rest } = opts;
  const stateDir = await mkdtemp(join(tmpdir(), 'sandboxd-vms-'));
  const config = loadConfig({
    SVC_STATE_DIR: stateDir,
    SVC_ACTORS: mode ?? 'workers',
    SVC_ACTOR_SHARDS: '2',
    SVC_HYPERVISOR_URI: uri ?? 'test:///default',
    SVC_HYPERVISOR_POLL_INTERVAL_MS: String(pollIntervalMs ?? 60_000),
    // Files here start up to twenty VMs and their agent processes at once beside libvirt's calls on
    // libuv's four pool threads: on a loaded two-core machine (the suite's stress mode) a read can
    // queue past the 2 s default budget, fail, and open the circuit. The budget is not what these
    // files test (hypervisor-circuit and vms-errors set their own).
    SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
    LOG_LEVEL: 'silent',
  });
  // The stand-in agents registry asks the VM service, which exists once the server started.
  const ref: { svc?: VmService } = {};
  const unreachable = new Set<string>();
  const connectDelayMs = new Map<string, number>();
  const svcOf = (): VmService => {
    if (ref.svc === undefined) throw new Error('service not started');
    return ref.svc;
  };
  const agents: AgentLookup = agentsFactory?.({ svc: svcOf, unreachable }) ?? {
    byVm: (name) => {
      const a = ref.svc?.localAgents.info(name);
      if (a === undefined || a === null || unreachable.has(name)) return null;
      if (Date.now() - a.startedAtMs < (connectDelayMs.get(name) ?? 0)) return null;
      return { connected: a.running, connected_at: a.startedAtMs, hostname: `${name}.local`, ip_address: '127.0.0.1' };
    },
  };
  const ca = await createStandaloneCa('sandbox.local');
  const vmsOptions: VmsComponentOptions = {
    agents,
    grpcAddress: { host: '127.0.0.1', port: grpcPort ?? (await closedPort()) },
    caProvider: () => Promise.resolve(ca),
    enableDirectRuntimeSsh: false,
    agentConnectTimeoutMs: 4000,
    localAgentStopGraceMs: 3000,
    // Local agents get their whole grace at stop (half of this).
    stopDeadlineMs: 6000,
    ...rest,
  };
  const server = await startServer(config, pino({ level: 'silent' }), {
    components: [eventsComponent(), actorsComponent, hypervisorComponent, vmsComponent(vmsOptions)],
  });
  const svc = server.vms;
  ref.svc = svc;
  const { router, events, hypervisor: hv } = server;
  const actors = server.service('actors');
  const req = (method: string, url: string, body?: unknown): Promise<InjectResponse> =>
    inject(router, { method, url, ...(body !== undefined ? { body } : {}) });
  const waitOp = (id: string, deadlineMs: number = DEADLINE_MS.agent): Promise<Record<string, unknown>> => {
    let last = '';
    return waitFor(
      `operation ${id} to finish`,
      async () => {
        const r = await req('GET', `/api/v1/operations/${id}`);
        assert.equal(r.status, 200, r.text);
        last = r.text;
        const op = r.json() as Record<string, unknown>;
        assert.equal(op['state'], op['status'], "state mirrors status (the reference dashboard's name)");
        return op['status'] === 'completed' || op['status'] === 'failed' ? op : undefined;
      },
      { deadlineMs, intervalMs: 50, lastState: () => last },
    );
  };
  return {
    hv,
    actors,
    svc,
    router,
    events,
    stateDir,
    unreachable,
    connectDelayMs,
    req,
    waitOp,
    async createVm(name, body = {}) {
      const r = await req('POST', '/api/v1/vms', { name, ...body });
      assert.equal(r.status, 202, r.text);
      const op = await waitOp((r.json() as { operation: { id: string } }).operation.id);
      assert.equal(op['status'], 'completed', JSON.stringify(op));
      return op;
    },
    async stop() {
      await server.stop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** True while process `pid` exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function uniqueName(base: string): string {
  return `agent-${base}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * The components of a whole server that creates VMs on the test driver with local agents, in start
 * order: identity and idempotency, events, operations, actors and agents, the hypervisor, the HTTP
 * listener, the admin listener and bootstrap when asked, the agents' listener, `beforeVms`, the
 * VMs (90 s for an agent to connect on a loaded machine), then `afterVms` (the feature under test).
 */
export function vmServerComponents(opts: {
  readonly admin?: boolean;
  readonly bootstrap?: boolean;
  readonly beforeVms?: readonly Component[];
  readonly afterVms: readonly Component[];
}): Component[] {
  return [
    authComponent,
    idempotencyComponent,
    eventsComponent(),
    operationsComponent(),
    actorsComponent,
    agentsComponent,
    jobsComponent,
    hypervisorComponent,
    httpComponent,
    ...(opts.admin === true ? [adminListenerComponent] : []),
    ...(opts.bootstrap === true ? [bootstrapComponent()] : []),
    agentListenerComponent,
    ...(opts.beforeVms ?? []),
    vmsComponent({ agentConnectTimeoutMs: 90_000 }),
    ...opts.afterVms,
  ];
}
