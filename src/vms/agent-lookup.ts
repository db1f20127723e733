/**
 * What the VM feature needs to know about agents: is the agent of a VM connected? The agents
 * registry (src/agent-link/) implements it; the VM feature never imports it, so either side can be
 * tested alone (tests inject their own lookup).
 */

/** An agent as the VM detail shows it (spec part 2, VM "agent" object). */
export interface AgentPresence {
  /** True while its gRPC stream is open (statuses Starting … Stale). */
  readonly connected: boolean;
  /** Unix ms of the current (or last) connection; null when never connected. */
  readonly connected_at: number | null;
  readonly hostname: string | null;
  /** The address the agent reported, when known. */
  readonly ip_address?: string | null;
}

export interface AgentLookup {
  /**
   * The agent of VM `vmName`: the agent whose agent_id is the VM name, or whose instance id is
   * `instanceId` (the VM uuid of VMs sandboxd provisioned). Null when no such agent is known.
   * Called on every VM detail request and every 250 ms while provisioning waits: keep it cheap.
   */
  byVm(vmName: string, instanceId: string | null): AgentPresence | null;
  /**
   * Calls `listener` after any agent's registration or status changed; returns the unsubscribe
   * function. Lets provisioning wake when an agent connects instead of at its next poll.
   */
  onChange?(listener: () => void): () => void;
}

/** A lookup that knows no agent (VM detail then shows agent.connected false). */
export const NO_AGENTS: AgentLookup = { byVm: () => null };

/** The fields of an agents-registry entry the lookup reads (src/agent-link AgentSnapshot has them). */
export interface RegistryAgentView {
  readonly status: string;
  readonly connected_at: number;
  readonly hostname: string;
  readonly ip_address: string;
  readonly instance_id: string;
}

/**
 * An AgentLookup over the agents registry (`registry.get(agentId)`): the VM's agent is the one
 * whose agent_id is the VM name; when the VM has an instance id, an entry with another instance
 * id (a former VM of the same name, still retained) does not count. Connected = any status but
 * Disconnected.
 */
export function registryAgentLookup(registry: {
  get(agentId: string): RegistryAgentView | undefined;
  subscribe?(listener: () => void): () => void;
}): AgentLookup {
  return {
    ...(registry.subscribe !== undefined && {
      onChange: (listener: () => void) => registry.subscribe?.(() => listener()) ?? (() => undefined),
    }),
    byVm(vmName, instanceId) {
      const a = registry.get(vmName);
      if (a === undefined || (instanceId !== null && a.instance_id !== instanceId)) return null;
      return { connected: a.status !== 'Disconnected', connected_at: a.connected_at, hostname: a.hostname, ip_address: a.ip_address };
    },
  };
}
