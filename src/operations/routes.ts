/**
 * GET /api/v1/operations/{id} (spec 4.4): 200 with the Operation, or 404 OPERATION_NOT_FOUND
 * for an id never issued or purged after its retention (see OperationStore). Clients poll until
 * status is completed or failed.
 *
 * The answer also carries `state`, equal to `status`: the reference implementation's dashboard
 * polls that name, and with it alone it never saw a VM create finish (README "Compatibility with
 * the reference dashboard"). `status` stays the spec's field.
 */
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { Operations } from './operation-tracker.js';

const OPERATION_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'string' },
    state: { type: 'string' },
    target: { type: 'string' },
    created_at: { type: 'string' },
    completed_at: { type: 'string' },
    progress_percent: { type: 'integer' },
    result: { type: 'object', additionalProperties: true },
    error: { type: 'string' },
    error_code: { type: 'string' },
  },
  required: ['id', 'type', 'status', 'target', 'created_at', 'progress_percent'],
} as const;

/** The Operation JSON schema (also used by the 202 envelopes of the VM routes). */
export const operationSchema: Record<string, unknown> = OPERATION_SCHEMA;

export function registerOperationRoutes(router: Router, deps: { operations: Pick<Operations, 'get'> }): void {
  router.add({
    method: 'GET',
    path: '/api/v1/operations/:id',
    responseSchema: operationSchema,
    handler: (req) => {
      const id = req.params['id'] ?? '';
      const op = id.length <= 64 ? deps.operations.get(id) : null;
      if (op === null) throw new SvcError('OPERATION_NOT_FOUND', `operation '${id.slice(0, 64)}' not found`);
      return { status: 200, json: { ...op, state: op.status } };
    },
  });
}
