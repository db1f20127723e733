/**
 * The HTTP routes of the A2A surface (spec 4.8, 9; README "A2A"):
 *
 * | method | path | answer |
 * |---|---|---|
 * | GET | /agents/{instance_id}/v1/tasks/{task_id}/artifacts | 200 {task_id, artifacts: [record]} |
 * | GET | /agents/{instance_id}/v1/tasks/{task_id}/artifacts/{artifact_id} | 200 record |
 * | GET | /agents/{instance_id}/tasks/{task_id}/artifacts[/{artifact_id}] | the same (A2A 1.0's unprefixed base) |
 * | GET | /agents/{instance_id}/.well-known/agent-card.json | 200 AgentCard |
 *
 * `A2A-Version` (spec 9) is negotiated per request on the artifact routes: absent, empty or `0.3`
 * → A2A 0.3 semantics (`application/json`, errors in the v1 envelope `{error: {code, message}}`);
 * `1.0` → A2A 1.0 HTTP+JSON (`application/a2a+json`, errors as google.rpc.Status with an ErrorInfo
 * reason); anything else (`1`, `1.0.0`, `2.0`) → 400 google.rpc.Status, reason
 * VERSION_NOT_SUPPORTED. Every answer carries `A2A-Version` (the selected one) and
 * `Vary: A2A-Version, Accept`. Both versions are served on both bases (the reference refuses 1.0
 * on its `/v1` alias; spec 4.8 names only the `/v1` paths, so sandboxd negotiates there).
 *
 * Path confinement: ids are checked before any lookup: 1..128 characters of [A-Za-z0-9._:-], not
 * `.`/`..`-led, no `..` (else 400 a2a.invalid_id); an encoded slash decodes into the id and fails
 * that check; `.`/`..` segments are refused by the router (400) before routing. Records are
 * looked up by id in the store: no path is ever built from an id.
 */
import { SvcError, envelope, type ErrorCode } from '../core/errors.js';
import type { Router } from '../http/router.js';
import type { RawResult, RequestView } from '../http/types.js';
import { AGENT_CARD_PATH, agentCard } from './agent-card.js';
import type { A2aTaskStore } from './task-store.js';
import { rpcStatus, type A2aVersion } from './wire.js';

export const A2A_MEDIA_TYPE = 'application/a2a+json';
const ID_RE = /^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$/;

/** ErrorInfo reasons (A2A error names, UPPER_SNAKE, without "Error") of our codes. */
const REASONS: Partial<Record<ErrorCode, string>> = {
  'a2a.task_not_found': 'TASK_NOT_FOUND',
  'a2a.artifact_not_found': 'ARTIFACT_NOT_FOUND',
  'a2a.instance_not_found': 'INSTANCE_NOT_FOUND',
  'a2a.invalid_id': 'INVALID_REQUEST',
  'a2a.version_not_supported': 'VERSION_NOT_SUPPORTED',
};

export interface A2aRoutesDeps {
  readonly store: A2aTaskStore;
  /** Whether an agent with this instance id is known (connected or not). */
  readonly instanceKnown: (instanceId: string) => boolean;
  /** The caller's `http(s)://host:port` and `ws(s)://host:port`. */
  readonly origins: (req: RequestView) => { http: string; ws: string };
  readonly serverVersion: string;
  /** Counts each request's negotiated version (`0.3`, `1.0`, `rejected`). */
  readonly countVersion?: (v: A2aVersion | 'rejected') => void;
}

/** The version a request selects, or null when it names one sandboxd does not serve. */
export function negotiateVersion(header: string | undefined): A2aVersion | null {
  const v = (header ?? '').trim();
  if (v === '' || v === '0.3') return '0.3';
  if (v === '1.0') return '1.0';
  return null;
}

function body(status: number, json: unknown, version: A2aVersion | null): RawResult {
  return {
    status,
    contentType: version === '1.0' || version === null ? A2A_MEDIA_TYPE : 'application/json',
    headers: { ...(version !== null && { 'a2a-version': version }), vary: 'A2A-Version, Accept', 'cache-control': 'no-store' },
    body: JSON.stringify(json),
  };
}

function fail(code: ErrorCode, message: string, version: A2aVersion | null): RawResult {
  const err = new SvcError(code, message);
  if (version === '0.3') return body(err.httpStatus, envelope(code, message), version);
  return body(err.httpStatus, rpcStatus(err.httpStatus, REASONS[code] ?? 'INTERNAL', message), version);
}

function checkId(v: string | undefined, what: string): string {
  const id = v ?? '';
  if (!ID_RE.test(id) || id.includes('..')) {
    throw new SvcError('a2a.invalid_id', `${what} must be 1..128 characters of [A-Za-z0-9._:-] without ".."`);
  }
  return id;
}

export function registerA2aRoutes(router: Router, deps: A2aRoutesDeps): void {
  const { store } = deps;
  /** Runs `answer` under the request's negotiated version; SvcErrors become that version's error body. */
  const negotiated = (answer: (req: RequestView, instanceId: string, taskId: string) => unknown) => (req: RequestView) => {
    const version = negotiateVersion(req.headers['a2a-version']);
    deps.countVersion?.(version ?? 'rejected');
    if (version === null) {
      const asked = (req.headers['a2a-version'] ?? '').slice(0, 32);
      const r = rpcStatus(400, 'VERSION_NOT_SUPPORTED', `A2A-Version ${JSON.stringify(asked)} is not supported: use 0.3 or 1.0`, {
        requested: asked,
        supported: '0.3,1.0',
      });
      return body(400, r, null);
    }
    try {
      const instanceId = checkId(req.params['instance_id'], 'instance_id');
      const taskId = checkId(req.params['task_id'], 'task_id');
      if (!deps.instanceKnown(instanceId) && !store.hasInstance(instanceId)) {
        throw new SvcError('a2a.instance_not_found', `no instance ${instanceId}`);
      }
      return body(200, answer(req, instanceId, taskId), version);
    } catch (err) {
      if (err instanceof SvcError) return fail(err.code, err.message, version);
      throw err;
    }
  };
  const list = negotiated((_req, instanceId, taskId) => {
    const artifacts = store.artifacts(instanceId, taskId);
    if (artifacts === undefined) throw new SvcError('a2a.task_not_found', `no task ${taskId} on instance ${instanceId}`);
    return { task_id: taskId, artifacts };
  });
  const one = negotiated((req, instanceId, taskId) => {
    const artifactId = checkId(req.params['artifact_id'], 'artifact_id');
    if (store.get(instanceId, taskId) === undefined)
      throw new SvcError('a2a.task_not_found', `no task ${taskId} on instance ${instanceId}`);
    const a = store.artifact(instanceId, taskId, artifactId);
    if (a === undefined) throw new SvcError('a2a.artifact_not_found', `no artifact ${artifactId} in task ${taskId}`);
    return a;
  });
  for (const base of ['/agents/:instance_id/v1/tasks/:task_id', '/agents/:instance_id/tasks/:task_id']) {
    router.add({ method: 'GET', path: `${base}/artifacts`, handler: list });
    router.add({ method: 'GET', path: `${base}/artifacts/:artifact_id`, handler: one });
  }
  router.add({
    method: 'GET',
    path: `/agents/:instance_id${AGENT_CARD_PATH}`,
    handler: (req) => {
      const instanceId = req.params['instance_id'] ?? '';
      if (!ID_RE.test(instanceId) || instanceId.includes('..')) throw new SvcError('a2a.invalid_id', 'instance_id is malformed');
      if (!deps.instanceKnown(instanceId)) throw new SvcError('a2a.instance_not_found', `no instance ${instanceId}`);
      const o = deps.origins(req);
      return {
        status: 200,
        headers: { 'cache-control': 'no-store' },
        json: agentCard({ instanceId, httpOrigin: o.http, wsOrigin: o.ws, serverVersion: deps.serverVersion }),
      };
    },
  });
}
