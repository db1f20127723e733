/**
 * The checkpoint lifecycle (STYLE point 8: on the project's state-machine type).
 *
 *   creating ──saved──► ready ──reserved──► reserved ──claimed──► restoring ──enrolled──► consumed
 *      │                  └───────────restore_requested──────────────►│
 *      └──failed──► failed ◄─────────────────────failed────────────────┘
 *
 * - creating: the VM is being saved into the image (the id is taken).
 * - ready: the image holds a pre-enrollment VM; a direct restore or a warm pool may take it.
 * - reserved: a slot of a warm pool; only that pool's handoff takes it.
 * - restoring: being restored with a fresh identity, until its agent enrolled and is Ready.
 * - consumed: restored (single use: a memory image is never started twice, so no two VMs share
 *   its in-memory state — random pools, nonces, anything the guest generated before the save).
 * - failed: the save or the restore failed (error says why); what the restore had made — the
 *   domain, the overlay, the bootstrap token — was removed.
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import type { CheckpointStatus } from '../wire/checkpoints.js';

export const CHECKPOINT_TABLE: TransitionTable<CheckpointStatus> = {
  creating: ['ready', 'failed'],
  ready: ['reserved', 'restoring'],
  reserved: ['restoring'],
  restoring: ['consumed', 'failed'],
  consumed: [],
  failed: [],
};

/** Moves a checkpoint from `current` when it is one of `from`; returns whether it moved. */
export function moveCheckpoint(
  id: string,
  current: CheckpointStatus,
  from: readonly CheckpointStatus[],
  to: CheckpointStatus,
  cause: string,
  logger?: TransitionLogger,
): boolean {
  const m = new StateMachine<CheckpointStatus>({
    name: 'checkpoint',
    initial: current,
    table: CHECKPOINT_TABLE,
    ...(logger !== undefined && { logger }),
    logFields: { checkpoint: id },
  });
  return m.transition(from, to, cause);
}

/** README's checkpoint table. */
export function checkpointTableMarkdown(): string {
  return transitionTableMarkdown(CHECKPOINT_TABLE, {
    creating: { ready: 'the VM was saved into the image', failed: 'the save failed' },
    ready: { reserved: 'a warm pool took it as a slot', restoring: 'a direct restore' },
    reserved: { restoring: "its pool's handoff claimed it" },
    restoring: {
      consumed: 'restored, enrolled with a fresh identity, its agent Ready',
      failed: 'the restore failed; what it made was removed',
    },
  });
}
