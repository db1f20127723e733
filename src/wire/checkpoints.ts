/**
 * Wire shapes of the v2 checkpoint and warm-pool routes (spec 4.10; the spec shows the request
 * bodies, the rest is ours — README "Checkpoints and warm pools"). Shared by the routes, the
 * client and `sbx pool` / `sbx checkpoint`.
 */
import type { AdminOperation } from './vms.js';

/** Where a checkpoint is (machine: src/checkpoints/checkpoint-state.ts). */
export const CHECKPOINT_STATUSES = ['creating', 'ready', 'reserved', 'restoring', 'consumed', 'failed'] as const;
export type CheckpointStatus = (typeof CHECKPOINT_STATUSES)[number];

/** POST /api/v2/admin/hypervisor/checkpoints body. */
export interface CheckpointCreateRequest {
  vm: string;
  checkpoint_id: string;
  /** Only true is accepted. */
  pre_enrollment: true;
}

/** POST /api/v2/admin/hypervisor/checkpoints/{id}/restore body (all optional). */
export interface CheckpointRestoreRequest {
  /** Must equal the checkpoint's source VM when given. */
  name?: string;
}

/** A checkpoint as the routes show it. Never holds an image path, a token or key material. */
export interface Checkpoint {
  checkpoint_id: string;
  /** The VM it was taken of; a restore brings that name back. */
  vm: string;
  /** The hypervisor host (redacted URI label) holding the image. */
  host: string;
  status: CheckpointStatus;
  pre_enrollment: true;
  /** The warm pool holding it as a slot, if any. */
  pool: string | null;
  profile: string;
  created_at: string;
  updated_at: string;
  /** After a restore: the instance id the restored VM was given. */
  restored_instance_id: string | null;
  /** When failed: why. */
  error?: string;
}

/** POST /api/v2/admin/hypervisor/warm-pools body. */
export interface WarmPoolCreateRequest {
  pool: string;
  checkpoint_ids: string[];
  /** Slots refill keeps the pool at; default the number of checkpoint_ids; 0 = no refill. */
  target_size?: number;
}

export interface WarmPool {
  pool: string;
  target_size: number;
  /** Slots held (reserved checkpoints, ready to hand off). */
  ready_slots: number;
  /** Handoffs restoring now. */
  restoring: number;
  /** Checkpoint ids of the ready slots, oldest first (the next handoff takes the first). */
  checkpoint_ids: string[];
  handoffs_total: number;
  refill: { running: boolean; failures_total: number; last_error: string | null };
  created_at: string;
}

/** The 202 of every asynchronous admin request: its operation; the Location header points at it. */
export interface AdminAccepted {
  operation: AdminOperation;
}
