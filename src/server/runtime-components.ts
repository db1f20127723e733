/**
 * The server's runtime parts as components: the actor system (first: every feature's actors run
 * on it), the job pool for the features' CPU-bound work, the hypervisor, and the HTTP listener
 * (after every component with WebSocket routes: it takes them at start).
 */
import { cpus } from 'node:os';
import { ActorSystem } from '../../actors/runtime/actor-system.js';
import { JobPool } from '../../actors/jobs/job-pool.js';
import type { Component } from '../component/component.js';
import { startHttpListener, type HttpListener } from '../http/uws-server.js';
import { LibvirtHypervisor } from '../hypervisor/libvirt/libvirt-hypervisor.js';
import { IDENTITY_JOBS_MODULE } from '../identity/identity-jobs.js';
import { TASK_JOBS_MODULE } from '../tasks/task-jobs.js';
import { VM_JOBS_MODULE } from '../vms/vm-jobs.js';

declare module '../component/component.js' {
  interface Services {
    actors: ActorSystem;
    jobs: JobPool;
    hypervisor: LibvirtHypervisor;
    http: HttpListener;
  }
}

/** The ActorSystem hosting every listed component's actor modules; its frames go to the components' handlers. */
export const actorsComponent: Component = {
  name: 'actors',
  readiness: ['actors'],
  async start(ctx) {
    const { config } = ctx;
    const actors = await ActorSystem.start({
      mode: config.actorsMode,
      shards: config.actorShards,
      actorModules: ctx.actorModules,
      ringBytes: config.actorRingBytes,
      ring: config.actorRing,
      logger: ctx.logger.child({ component: 'actors' }),
      onEmit: ctx.dispatchFrame,
      onShardRestart: ctx.shardRestarted,
    });
    ctx.provide('actors', actors);
    return { stop: () => actors.stop({ deadlineMs: Math.max(500, config.shutdownDeadlineMs / 2) }) };
  },
};

/** CPU-bound work of the features (hashing, archive reading, certificates, manifests, local VM process scans), off the main thread. */
export const jobsComponent: Component = {
  name: 'jobs',
  async start(ctx) {
    const jobs = await JobPool.start({
      mode: ctx.config.actorsMode,
      threads: Math.max(1, Math.min(2, cpus().length - 1)),
      jobModules: [TASK_JOBS_MODULE, IDENTITY_JOBS_MODULE, VM_JOBS_MODULE],
      logger: ctx.logger.child({ component: 'jobs' }),
    });
    ctx.provide('jobs', jobs);
    return { stop: () => jobs.stop() };
  },
};

export const hypervisorComponent: Component = {
  name: 'hypervisor',
  async start(ctx) {
    const { config } = ctx;
    const hypervisor = new LibvirtHypervisor({
      uris: config.hypervisorUris,
      readBudgetMs: config.hypervisorReadBudgetMs,
      writeBudgetMs: config.hypervisorWriteBudgetMs,
      failureThreshold: config.hypervisorFailureThreshold,
      coolDownMs: config.hypervisorCooldownMs,
      pollIntervalMs: config.hypervisorPollIntervalMs,
      virshEvents: config.hypervisorVirshEvents,
      domainType: config.hypervisorDomainType,
      logger: ctx.logger.child({ component: 'hypervisor' }),
    });
    await hypervisor.start();
    ctx.provide('hypervisor', hypervisor);
    return { stop: () => hypervisor.stop() };
  },
};

/** The HTTP listener (SVC_HTTP_ADDR): the shared router and the WebSocket routes of the components before it. */
export const httpComponent: Component = {
  name: 'http',
  readiness: ['http'],
  async start(ctx) {
    const { config } = ctx;
    const http = await startHttpListener({
      host: config.httpAddr.host,
      port: config.httpAddr.port,
      router: ctx.router,
      logger: ctx.logger.child({ component: 'http' }),
      maxBodyBytes: config.maxBodyBytes,
      metrics: ctx.metrics,
      wsRoutes: ctx.wsRoutes,
    });
    ctx.provide('http', http);
    return { stop: () => http.close() };
  },
};
