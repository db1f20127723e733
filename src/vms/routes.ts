/**
 * The VM routes (spec 4.3). Handlers parse and validate, then call the VmApi
 * (src/vms/vm-controller.ts documents the semantics and the decisions the spec leaves open).
 *
 * | route                                  | success                                | errors                                   |
 * |----------------------------------------|----------------------------------------|------------------------------------------|
 * | GET /api/v1/vms?state=&prefix=         | 200 {vms, total}                       | 400 bad state                            |
 * | GET /api/v1/vms/{name}                 | 200 VM detail (with agent)             | 404 VM_NOT_FOUND                         |
 * | POST /api/v1/vms                       | 202 {operation, vm: null[, warnings]}  | 400 INVALID_VM_NAME / request.invalid, 409 VM_ALREADY_EXISTS |
 * | POST /api/v1/vms/{name}/start|stop|destroy | 200 {vm: {name, state}, message}   | 404 VM_NOT_FOUND, 409 VM_BUSY            |
 * | POST /api/v1/vms/{name}/restart        | 202 {operation, vm: null}              | 404, 409 VM_NOT_RUNNING / VM_BUSY        |
 * | DELETE /api/v1/vms/{name}?force&delete_disk | 200 {deleted, name, disk_deleted} | 404, 409 VM_RUNNING / VM_BUSY            |
 * | POST /api/v1/vms/{name}/deploy-agent   | 202 {operation, vm: null}              | 404, 409 VM_NOT_RUNNING / VM_BUSY        |
 *
 * Every route answers 503 HYPERVISOR_UNAVAILABLE with Retry-After while the hypervisor is down or
 * its circuit is open. A {name} that no libvirt domain could have (over 64 characters, or
 * characters outside A-Z a-z 0-9 _ . + -) is 404 VM_NOT_FOUND without asking the hypervisor.
 */
import { SvcError } from '../core/errors.js';
import { parseBoolParam, parseEnumParam, parseStringParam } from '../http/body.js';
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';
import { parseCreateVm, parseRestart, type StartupCatalog } from './create-request.js';
import type { LifecycleAction, VmApi } from './vm-controller.js';
import { VM_DETAIL_SCHEMA, VM_LIST_SCHEMA } from './vm-view.js';
import { operationSchema } from '../operations/routes.js';

const ANY_DOMAIN_NAME = /^[A-Za-z0-9_.+-]{1,64}$/;

const ACCEPTED_SCHEMA = {
  type: 'object',
  properties: { operation: operationSchema, vm: { type: 'null' }, warnings: { type: 'array', items: { type: 'string' } } },
  required: ['operation', 'vm'],
};
const LIFECYCLE_SCHEMA = {
  type: 'object',
  properties: { vm: { type: 'object', properties: { name: { type: 'string' }, state: { type: 'string' } } }, message: { type: 'string' } },
  required: ['vm', 'message'],
};
const DELETE_SCHEMA = {
  type: 'object',
  properties: { deleted: { type: 'boolean' }, name: { type: 'string' }, disk_deleted: { type: 'boolean' } },
  required: ['deleted', 'name', 'disk_deleted'],
};

function vmName(req: RequestView): string {
  const name = req.params['name'] ?? '';
  if (!ANY_DOMAIN_NAME.test(name)) throw new SvcError('VM_NOT_FOUND', `VM '${name.slice(0, 64)}' not found`);
  return name;
}

export function registerVmRoutes(
  router: Router,
  deps: { vms: VmApi; directRuntimeSsh: boolean; catalog?: () => StartupCatalog | undefined },
): void {
  const { vms } = deps;
  router.add({
    method: 'GET',
    path: '/api/v1/vms',
    responseSchema: VM_LIST_SCHEMA,
    handler: async (req) => {
      const state = parseEnumParam(req.query, 'state', ['running', 'stopped', 'all'] as const, { default: 'all' });
      const rawPrefix = parseStringParam(req.query, 'prefix', { maxLength: 64 }) ?? 'agent-';
      return { status: 200, json: await vms.list({ state, prefix: rawPrefix === '*' ? '' : rawPrefix }) };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v1/vms/:name',
    responseSchema: VM_DETAIL_SCHEMA,
    handler: async (req) => ({ status: 200, json: await vms.detail(vmName(req)) }),
  });
  router.add({
    method: 'POST',
    path: '/api/v1/vms',
    maxBodyBytes: 64 * 1024,
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => {
      const catalog = deps.catalog?.();
      const parsed = parseCreateVm(req.body, { directRuntimeSsh: deps.directRuntimeSsh, ...(catalog !== undefined && { catalog }) });
      // Taken in the same turn as the profile was looked up: a delete of the profile sees this create.
      const hold = catalog?.hold(parsed.profile, parsed.name);
      try {
        const accepted = await vms.create(parsed);
        hold?.bind(accepted.operation.id);
        return { status: 202, json: accepted };
      } catch (err) {
        hold?.release();
        throw err;
      }
    },
  });
  for (const action of ['start', 'stop', 'destroy'] as const satisfies readonly LifecycleAction[]) {
    router.add({
      method: 'POST',
      path: `/api/v1/vms/:name/${action}`,
      body: 'none',
      responseSchema: LIFECYCLE_SCHEMA,
      handler: async (req) => ({ status: 200, json: await vms.lifecycle(vmName(req), action) }),
    });
  }
  router.add({
    method: 'POST',
    path: '/api/v1/vms/:name/restart',
    maxBodyBytes: 4096,
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => {
      const name = vmName(req);
      return { status: 202, json: await vms.restart(name, parseRestart(req.body)) };
    },
  });
  router.add({
    method: 'DELETE',
    path: '/api/v1/vms/:name',
    body: 'none',
    responseSchema: DELETE_SCHEMA,
    handler: async (req) => {
      const name = vmName(req);
      const force = parseBoolParam(req.query, 'force', { default: false });
      const deleteDisk = parseBoolParam(req.query, 'delete_disk', { default: false });
      return { status: 200, json: await vms.remove(name, { force, deleteDisk }) };
    },
  });
  router.add({
    method: 'POST',
    path: '/api/v1/vms/:name/deploy-agent',
    body: 'none',
    responseSchema: ACCEPTED_SCHEMA,
    handler: async (req) => ({ status: 202, json: await vms.deployAgent(vmName(req)) }),
  });
}
