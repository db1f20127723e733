/**
 * Fleet data shared by the views: agents (polled list + live WebSocket messages, merged by
 * FleetAgents), VMs (polled while a view watches them) and the VM operations started from this
 * page (polled until completed or failed). Views subscribe to `changes` and patch what changed.
 */
import type { ApiClient } from '../../../client/api-client.js';
import type { Operation, OperationAccepted, Vm } from '../../../client/types.js';
import { FleetAgents } from '../../model/fleet-agents.js';
import { Emitter } from './emitter.js';
import type { LiveSocket } from './live-socket.js';
import { Poller } from './poller.js';
import { errorMessage } from '../../../util/error-message.js';

export type FleetChange = { kind: 'agents'; ids: ReadonlySet<string> } | { kind: 'vms' } | { kind: 'ops' };

/** An operation started from this page, as the fleet view shows it. */
export interface TrackedOperation {
  readonly op: Operation;
  /** What the user did, for the progress line ("Create agent-3"). */
  readonly label: string;
  readonly startedAtMs: number;
  /** Set when the operation finished (completed ones are hidden a while after). */
  finishedAtMs: number | null;
  /** Poll failures since the last success (the server restarting). */
  pollErrors: number;
}

const AGENTS_INTERVAL_MS = 5000;
const VMS_INTERVAL_MS = 4000;
/** A completed operation stays visible this long; a failed one until dismissed. */
const COMPLETED_VISIBLE_MS = 8000;

export class FleetService {
  readonly agents = new FleetAgents();
  readonly changes = new Emitter<FleetChange>();
  readonly ops = new Map<string, TrackedOperation>();
  /**
   * Counters for the bench's `dashboard` scenario (read through window.__sandboxd): agent rows
   * patched, and animation frames that flushed live updates.
   */
  readonly stats = { agentRowPatches: 0, liveFlushes: 0 };
  vms: readonly Vm[] = [];
  vmsLoaded = false;
  /**
   * What each VM's provider advertises (snapshot, checkpoint, fork, warm_pool), refreshed with the
   * VM list; empty when it cannot be read, so no such action is offered (spec 4.13).
   */
  capabilities: Readonly<Record<string, readonly string[]>> = {};
  /** The last VM list failure (hypervisor down); null while the list loads fine. */
  vmsError: unknown = null;
  readonly #api: ApiClient;
  readonly agentPoller: Poller;
  readonly vmPoller: Poller;
  #vmWatchers = 0;

  constructor(api: ApiClient, live: LiveSocket, hooks: { onPollError(err: unknown, nextDelayMs: number): void; onPollOk(): void }) {
    this.#api = api;
    this.agentPoller = new Poller(
      async (signal) => {
        const requestedAtMs = Date.now();
        const list = await api.listAgents({ signal, timeoutMs: 10_000 });
        const ids = this.agents.applyList(list.agents, requestedAtMs);
        this.changes.emit({ kind: 'agents', ids });
      },
      { intervalMs: AGENTS_INTERVAL_MS, onError: (err, _n, delayMs) => hooks.onPollError(err, delayMs), onSuccess: () => hooks.onPollOk() },
    );
    this.vmPoller = new Poller(
      async (signal) => {
        try {
          const list = await api.listVms({}, { signal, timeoutMs: 10_000 });
          this.vms = list.vms;
          this.vmsError = null;
          this.capabilities = await api.hypervisorCapabilities({ signal, timeoutMs: 10_000 }).then(
            (c) => c.vms,
            () => ({}),
          );
        } catch (err) {
          // A VM list failure with a response (hypervisor down: 503) is shown in the VM table;
          // only "no response" counts as losing the server.
          if ((err as { status?: number }).status === 0 || (err as { name?: string }).name === 'AbortError') throw err;
          this.vmsError = err;
        }
        this.vmsLoaded = true;
        this.changes.emit({ kind: 'vms' });
      },
      { intervalMs: VMS_INTERVAL_MS },
    );
    live.messages.on(({ msg, receivedAtMs }) => {
      if (msg.type === 'metrics') {
        if (this.agents.applyMetrics(msg, receivedAtMs)) this.changes.emit({ kind: 'agents', ids: new Set([msg.agent_id]) });
        else if (this.agents.get(msg.agent_id) === undefined && this.agents.loaded) this.agentPoller.kick();
      } else if (msg.type === 'agent_status') {
        if (this.agents.get(msg.agent_id) === undefined) this.agentPoller.kick();
        else if (this.agents.applyStatus(msg, receivedAtMs)) this.changes.emit({ kind: 'agents', ids: new Set([msg.agent_id]) });
      }
    });
  }

  start(): void {
    this.agentPoller.start();
  }

  /** Keeps the VM list fresh while the returned function has not been called. */
  watchVms(): () => void {
    if (this.#vmWatchers++ === 0) this.vmPoller.start();
    else this.vmPoller.kick();
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#vmWatchers === 0) this.vmPoller.stop();
    };
  }

  /** Refresh everything now (after an action, or "Retry now"). */
  refresh(): void {
    this.agentPoller.kick();
    this.vmPoller.kick();
  }

  /** Follows an accepted operation to its end; the VM list refreshes on each step. */
  track(accepted: OperationAccepted, label: string): TrackedOperation {
    const t: TrackedOperation = { op: accepted.operation, label, startedAtMs: Date.now(), finishedAtMs: null, pollErrors: 0 };
    this.ops.set(t.op.id, t);
    this.changes.emit({ kind: 'ops' });
    this.vmPoller.kick();
    const update = (op: Operation): void => {
      const cur = this.ops.get(op.id);
      if (cur === undefined) return;
      const next: TrackedOperation = { ...cur, op, pollErrors: 0 };
      if (op.status === 'completed' || op.status === 'failed') next.finishedAtMs = Date.now();
      this.ops.set(op.id, next);
      this.changes.emit({ kind: 'ops' });
      this.vmPoller.kick();
      this.agentPoller.kick();
      if (op.status === 'completed') setTimeout(() => this.dismiss(op.id), COMPLETED_VISIBLE_MS);
    };
    this.#api
      .waitForOperation(t.op.id, {
        pollMs: 700,
        maxConsecutiveErrors: 1000,
        onProgress: update,
        onRetry: () => {
          const cur = this.ops.get(t.op.id);
          if (cur !== undefined) {
            cur.pollErrors++;
            this.changes.emit({ kind: 'ops' });
          }
        },
      })
      .then(update, (err: unknown) => {
        // OPERATION_NOT_FOUND after a server restart (operations are in memory): say so.
        const cur = this.ops.get(t.op.id);
        if (cur === undefined) return;
        const message = errorMessage(err);
        update({ ...cur.op, status: 'failed', error: `lost track of the operation: ${message}` });
      });
    return t;
  }

  dismiss(opId: string): void {
    if (this.ops.delete(opId)) this.changes.emit({ kind: 'ops' });
  }

  /** Operations shown for a VM (newest first). */
  opsFor(vmName: string): TrackedOperation[] {
    return [...this.ops.values()].filter((t) => t.op.target === vmName).sort((a, b) => b.startedAtMs - a.startedAtMs);
  }
}
