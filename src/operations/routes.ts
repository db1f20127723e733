/**
 * The two readers of the one operations store (README "Operations: durability, restarts and the
 * v2 route"):
 *
 * GET /api/v1/operations/{id} (spec 4.4): 200 with the Operation, or 404 OPERATION_NOT_FOUND for an
 * id never issued or purged after its retention (see OperationStore). Clients poll until status is
 * completed or failed.
 *
 * GET /api/v2/admin/operations/{id} (spec 4.10): the poll target of every asynchronous v2 admin
 * request (their 202 carries `Location: adminOperationLocation(id)`). Permission admin.read,
 * resolved by the one operator-identity function. The spec does not show its answer; ours is the
 * v1 answer, field for field, plus `links: {self}`, so one client parses both. An id that cannot
 * be an operation id (over 128 characters, or characters beyond letters, digits and `. _ : -`) is
 * 400 request.invalid without echoing it; an unknown one is 404 operation.not_found. Its 200 carries
 * Cache-Control: no-store.
 *
 * Both answers also carry `state`, equal to `status`: the reference implementation's dashboard
 * polls that name, and with it alone it never saw a VM create finish (README "Compatibility with
 * the reference dashboard"). `status` stays the spec's field.
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { AdminOperation, Operation } from '../wire/vms.js';
import type { Operations } from './operation-tracker.js';

const OPERATION_PROPERTIES = {
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
} as const;
const REQUIRED = ['id', 'type', 'status', 'target', 'created_at', 'progress_percent'] as const;

/** The Operation JSON schema (also used by the 202 envelopes of the VM routes). */
export const operationSchema: Record<string, unknown> = { type: 'object', properties: OPERATION_PROPERTIES, required: REQUIRED };

/** The v2 admin operation: the v1 schema plus links. */
export const adminOperationSchema: Record<string, unknown> = {
  type: 'object',
  properties: {
    ...OPERATION_PROPERTIES,
    links: { type: 'object', properties: { self: { type: 'string' } }, required: ['self'] },
  },
  required: [...REQUIRED, 'links'],
};

/** Where a v2 admin operation is polled: the `Location` of a 202 that started it. */
export function adminOperationLocation(id: string): string {
  return `/api/v2/admin/operations/${id}`;
}

/** The v2 admin JSON of an operation: the v1 Operation, its `state`, and `links.self`. */
export function adminOperationJson(op: Operation): AdminOperation {
  return { ...op, state: op.status, links: { self: adminOperationLocation(op.id) } };
}

/** What an operation id may look like at the v2 route (ours are `op-<uuid>`). */
const OPERATION_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

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

export function registerAdminOperationRoutes(
  router: Router,
  deps: { operations: Pick<Operations, 'get'>; identity: Pick<OperatorIdentity, 'require'> },
): void {
  router.add({
    method: 'GET',
    path: '/api/v2/admin/operations/:id',
    responseSchema: adminOperationSchema,
    handler: (req) => {
      deps.identity.require(req, 'admin.read');
      const id = req.params['id'] ?? '';
      if (!OPERATION_ID_RE.test(id)) {
        throw new SvcError('request.invalid', 'the operation id must be op-<uuid> (at most 128 letters, digits and . _ : -)', {
          field: 'id',
          length: id.length,
        });
      }
      const op = deps.operations.get(id);
      if (op === null)
        throw new SvcError('operation.not_found', `operation '${id}' not found (never issued, or purged after its retention)`);
      // A poll target: a cached answer would hide the change the client polls for.
      return { status: 200, headers: { 'cache-control': 'no-store' }, json: adminOperationJson(op) };
    },
  });
}
