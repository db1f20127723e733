/**
 * The A2A artifact record of spec 4.8 as sandboxd serves it (src/a2a/artifact-record-v1.schema.json;
 * README "A2A"): the store builds it, the client reads it.
 */

export interface A2aArtifactRecord {
  readonly artifact_id: string;
  readonly task_id: string;
  /** RFC 3339. */
  readonly created_at: string;
  readonly artifact: {
    /** `output_chunk`, or `output_truncated` once the task's output cap was reached. */
    readonly kind: 'output_chunk' | 'output_truncated';
    readonly stream: 'stdout' | 'stderr';
    /** The bytes as UTF-8 text ('' for output_truncated). */
    readonly data: string;
    /** The same bytes, base64. */
    readonly data_base64: string;
    readonly command_id: string;
    /** 1, 2, … per task, over both streams. */
    readonly seq: number;
  };
}

/** GET /agents/{instance_id}/v1/tasks/{task_id}/artifacts */
export interface A2aArtifactList {
  readonly task_id: string;
  readonly artifacts: readonly A2aArtifactRecord[];
}
