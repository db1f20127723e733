/**
 * The loadout routes (spec 4.13: create-only, a bounded YAML document, metadata.name equal to the
 * catalog key; the paths are ours). v2 routes resolve the caller through the one operator-identity
 * function: `fleet.read` to read, `profiles.write` to create. GET /api/v1/loadouts keeps the
 * reference dashboard's shape so that dashboard lists them unchanged.
 *
 * | method | path | answer |
 * |---|---|---|
 * | POST | /api/v2/loadouts/{name} | body: the YAML document (≤ 64 KiB; with Content-Type application/json: {"document": "<yaml>"}); 201 loadout (with Location); 400 loadout.invalid / loadout.name_mismatch / loadout.secret_field; 409 loadout.exists |
 * | GET | /api/v2/loadouts | 200 {loadouts: [loadout without content and document], total} |
 * | GET | /api/v2/loadouts/{name} | 200 loadout with file contents and the document; 404 loadout.not_found |
 * | GET | /api/v1/loadouts | 200 {loadouts: [{name, path, description, category?, complexity?}]} (reference shape; path `profiles/<name>.yaml`, which its dashboard sends back as the VM create `loadout`) |
 * | GET | /api/v1/loadouts/{name} | 200 {name, path, description, …} ({name} may be `<name>.yaml`); 404 loadout.not_found |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import type { Router } from '../http/router.js';
import {
  checkLoadoutName,
  loadoutJson,
  loadoutNameOf,
  MAX_LOADOUT_YAML_BYTES,
  referenceLoadoutJson,
  type Loadout,
} from './loadout-record.js';
import type { LoadoutStore } from './loadout-store.js';

export const LOADOUTS_PATH = '/api/v2/loadouts';

function found(store: LoadoutStore, raw: string): Loadout {
  const l = LOADOUT_NAME_OK.test(raw) ? store.get(raw) : undefined;
  if (l === undefined) throw new SvcError('loadout.not_found', `no loadout named ${JSON.stringify(raw.slice(0, 64))}`);
  return l;
}
const LOADOUT_NAME_OK = /^[a-z0-9][a-z0-9._-]{0,62}$/;

function documentOf(json: string): string {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new SvcError('request.malformed_json', 'the body is not valid JSON');
  }
  const doc = (v as { document?: unknown } | null)?.document;
  if (typeof doc !== 'string') throw new SvcError('loadout.invalid', 'a JSON body must be {"document": "<the loadout YAML>"}');
  return doc;
}

export function registerLoadoutRoutes(router: Router, deps: { store: LoadoutStore; identity: Pick<OperatorIdentity, 'require'> }): void {
  const { store, identity } = deps;
  router.add({
    method: 'POST',
    path: `${LOADOUTS_PATH}/:name`,
    body: 'raw',
    maxBodyBytes: MAX_LOADOUT_YAML_BYTES,
    handler: (req) => {
      identity.require(req, 'profiles.write');
      const name = checkLoadoutName(req.params['name'] ?? '', 'the path name');
      if (req.rawBody === null || req.rawBody.byteLength === 0)
        throw new SvcError('loadout.invalid', 'the body must be the loadout YAML document');
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(req.rawBody);
      } catch {
        throw new SvcError('loadout.invalid', 'the document is not UTF-8');
      }
      // A JSON client (sbx, api-client) sends {"document": "<yaml>"}.
      if (/^application\/json\b/i.test(req.headers['content-type'] ?? '')) text = documentOf(text);
      const created = store.create(name, text);
      return { status: 201, headers: { location: `${LOADOUTS_PATH}/${name}` }, json: loadoutJson(created, true) };
    },
  });
  router.add({
    method: 'GET',
    path: LOADOUTS_PATH,
    handler: (req) => {
      identity.require(req, 'fleet.read');
      const loadouts = store.list().map((l) => loadoutJson(l, false));
      return { status: 200, json: { loadouts, total: loadouts.length } };
    },
  });
  router.add({
    method: 'GET',
    path: `${LOADOUTS_PATH}/:name`,
    handler: (req) => {
      identity.require(req, 'fleet.read');
      return { status: 200, json: loadoutJson(found(store, req.params['name'] ?? ''), true) };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/v1/loadouts',
    handler: () => ({ status: 200, json: { loadouts: store.list().map(referenceLoadoutJson) } }),
  });
  router.add({
    method: 'GET',
    path: '/api/v1/loadouts/:name',
    handler: (req) => ({ status: 200, json: referenceLoadoutJson(found(store, loadoutNameOf(req.params['name'] ?? ''))) }),
  });
}
