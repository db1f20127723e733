/**
 * The SSH connector as a component (README "SSH connector"): started only when
 * SVC_GATEWAY_SSH_LISTEN is set. Listed after the VM component, so a VM's known SSH address (its
 * local sshd, or a qemu guest's address) is found and the connector stops before the VMs do.
 *
 * The lease check is the `leaseCheck` option, else an `sshLeaseCheck` service, else the SSH lease
 * store's `findActive` (the `sshLeases` service of the gateway SSH component, listed before this
 * one). Without any every connection is refused with ssh.lease_required: no lease authority, no
 * sessions (fail closed).
 */
import { Counter } from 'prom-client';
import type { Component } from '../../component/component.js';
import { SshConnector, type LeaseCheck } from './connector.js';

declare module '../../component/component.js' {
  interface Services {
    sshLeaseCheck: LeaseCheck;
    sshConnector: SshConnector;
  }
}

export interface SshConnectorComponentOptions {
  /** Overrides the `sshLeaseCheck` service. */
  readonly leaseCheck?: LeaseCheck;
}

const noLeaseAuthority: LeaseCheck = () => undefined;

export function sshConnectorComponent(o: SshConnectorComponentOptions = {}): Component {
  return {
    name: 'ssh-connector',
    async start(ctx) {
      const { config } = ctx;
      const listen = config.gatewaySshListen;
      if (listen === null) return { stop: () => Promise.resolve() };
      const logger = ctx.logger.child({ component: 'ssh-connector' });
      const leases = ctx.find('sshLeases');
      const leaseCheck =
        o.leaseCheck ??
        ctx.find('sshLeaseCheck') ??
        (leases === undefined ? undefined : (actor: string, instance: string) => leases.findActive(actor, instance));
      if (leaseCheck === undefined) logger.warn('no SSH lease service: every connector session is refused (ssh.lease_required)');
      const outcomes = new Counter({
        name: 'svc_gateway_ssh_connections_total',
        help: 'SSH connector connections by outcome: opened, or the refusal code',
        labelNames: ['outcome'] as const,
        registers: [ctx.metrics.registry],
      });
      outcomes.inc({ outcome: 'opened' }, 0);
      const connector = await SshConnector.start({
        listen,
        targets: config.gatewaySshTargets,
        allowlist: config.gatewaySshAllowlist,
        leaseCheck: leaseCheck ?? noLeaseAuthority,
        lookup: async (instanceId) => (await ctx.find('vms')?.sshAddress(instanceId)) ?? null,
        audit: ctx.find('credentialAudit') ?? null,
        outcomes,
        logger,
      });
      ctx.provide('sshConnector', connector);
      logger.info({ host: listen.host, port: connector.port, rules: config.gatewaySshAllowlist.length }, 'ssh connector listening');
      return { stop: () => connector.close() };
    },
  };
}
