/**
 * VM events into the v1 event store:
 * - every hypervisor lifecycle event (port.onEvent: our own calls, the poller, virsh events) as
 *   its vm.* record with vm_name set (toEventRecordInput);
 * - every operation's start and end as vm.operation.started / vm.operation.completed /
 *   vm.operation.failed (details: operation_id, type, progress_percent, error, error_code).
 *
 * It also keeps local agents in step with changes made behind sandboxd's back (virsh destroy,
 * a guest power-off seen by the poller): the agent of a VM that stopped, crashed or was
 * undefined is stopped; a managed test-driver VM started from outside gets its agent started.
 */
import type { Logger } from 'pino';
import type { EventRecord } from '../events/event-store.js';
import { toEventRecordInput, type HypervisorEvent, type HypervisorPort } from '../hypervisor/port.js';
import { isTestDriverUri } from '../hypervisor/uri.js';
import { publicTypeOf } from '../../actors/protocol/vm-frames.js';
import type { JobSnapshot } from './vm-ops-bridge.js';
import type { LocalAgentSupervisor } from './local-agents.js';
import type { Provisioner } from './provisioner.js';

export interface EventSink {
  append(input: Partial<EventRecord> & { event_type: string }): unknown;
}

/** The event a job change gives, or null. */
export function operationEvent(s: JobSnapshot, previous: JobSnapshot | null): (Partial<EventRecord> & { event_type: string }) | null {
  const type = publicTypeOf(s.type);
  if (type === null || previous?.status === s.status) return null;
  const name = s.status === 'running' ? 'started' : s.status === 'completed' ? 'completed' : s.status === 'failed' ? 'failed' : null;
  if (name === null) return null;
  const details: Record<string, unknown> = { operation_id: s.id, type, job: s.type, progress_percent: s.progressPercent };
  if (s.error !== null) {
    details['error'] = s.error.message;
    details['error_code'] = s.error.code;
  }
  return { event_type: `vm.operation.${name}`, vm_name: s.target, timestamp: new Date().toISOString(), details };
}

export class VmEventBridge {
  readonly #hv: HypervisorPort;
  readonly #events: EventSink;
  readonly #agents: LocalAgentSupervisor;
  readonly #prov: Provisioner;
  readonly #logger: Pick<Logger, 'warn'>;
  #unsubscribe: (() => void) | null = null;
  readonly #stopping = new AbortController();

  constructor(opts: {
    hypervisor: HypervisorPort;
    events: EventSink;
    localAgents: LocalAgentSupervisor;
    provisioner: Provisioner;
    logger: Pick<Logger, 'warn'>;
  }) {
    this.#hv = opts.hypervisor;
    this.#events = opts.events;
    this.#agents = opts.localAgents;
    this.#prov = opts.provisioner;
    this.#logger = opts.logger;
  }

  start(): void {
    this.#unsubscribe ??= this.#hv.onEvent((e) => this.#onHypervisorEvent(e));
  }

  stop(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.#stopping.abort();
  }

  onJob(s: JobSnapshot, previous: JobSnapshot | null): void {
    const e = operationEvent(s, previous);
    if (e !== null) this.#events.append(e);
  }

  #onHypervisorEvent(e: HypervisorEvent): void {
    this.#events.append(toEventRecordInput(e));
    if (e.source === 'sandboxd' || this.#stopping.signal.aborted) return;
    if (e.type === 'vm.stopped' || e.type === 'vm.crashed' || e.type === 'vm.undefined') {
      if (this.#agents.info(e.vmName)?.running === true) {
        this.#agents
          .stop(e.vmName)
          .catch((err: unknown) => this.#logger.warn({ vm: e.vmName, err }, 'could not stop the agent of a VM stopped outside sandboxd'));
      }
    } else if (e.type === 'vm.started' && isTestDriverUri(e.host)) {
      this.#prov
        .agentUp(e.vmName, false, this.#stopping.signal)
        .catch((err: unknown) => this.#logger.warn({ vm: e.vmName, err }, 'could not start the agent of a VM started outside sandboxd'));
    }
  }
}
