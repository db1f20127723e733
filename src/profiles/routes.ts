/**
 * The startup-profile routes (spec 4.13; paths and shapes are ours, the list key is the
 * reference's `startup_profiles`). Every caller is resolved through the one operator-identity
 * function: `fleet.read` to read, `profiles.write` to change. Mutations take Idempotency-Key (the
 * middleware of src/idempotency covers everything under /api/v2/startup-profiles, spec 4.11).
 *
 * | method | path | answer |
 * |---|---|---|
 * | GET | /api/v2/startup-profiles | 200 {startup_profiles, total} (built-ins first) |
 * | GET | /api/v2/startup-profiles/{name} | 200 profile + ETag "<revision>"; 404 profile.not_found |
 * | POST | /api/v2/startup-profiles | 201 profile + ETag + Location; 400 profile.invalid / loadout.unknown / loadout.secret_field; 409 profile.exists / profile.builtin |
 * | PUT | /api/v2/startup-profiles/{name} | full replacement with expected_revision or If-Match; 200 profile + ETag; 409 profile.revision_mismatch / profile.builtin |
 * | DELETE | /api/v2/startup-profiles/{name} | 200 {deleted: true, name}; 409 profile.in_use / profile.builtin; 404 |
 */
import type { OperatorIdentity } from '../auth/operator-identity.js';
import type { Router } from '../http/router.js';
import type { JsonResult } from '../http/types.js';
import { profileJson, type StartupProfile } from './profile-record.js';
import type { ProfileService } from './profile-service.js';

export const PROFILES_PATH = '/api/v2/startup-profiles';
const MAX_BODY_BYTES = 64 * 1024;

function one(p: StartupProfile, status: number, extra: Record<string, string> = {}): JsonResult {
  return { status, headers: { etag: `"${p.revision}"`, ...extra }, json: profileJson(p) };
}

export function registerProfileRoutes(
  router: Router,
  deps: { service: ProfileService; identity: Pick<OperatorIdentity, 'require'> },
): void {
  const { service, identity } = deps;
  router.add({
    method: 'GET',
    path: PROFILES_PATH,
    handler: (req) => {
      identity.require(req, 'fleet.read');
      const startup_profiles = service.list().map(profileJson);
      return { status: 200, json: { startup_profiles, total: startup_profiles.length } };
    },
  });
  router.add({
    method: 'GET',
    path: `${PROFILES_PATH}/:name`,
    handler: (req) => {
      identity.require(req, 'fleet.read');
      return one(service.get(req.params['name'] ?? ''), 200);
    },
  });
  router.add({
    method: 'POST',
    path: PROFILES_PATH,
    maxBodyBytes: MAX_BODY_BYTES,
    handler: (req) => {
      identity.require(req, 'profiles.write');
      const p = service.create(req.body);
      return one(p, 201, { location: `${PROFILES_PATH}/${p.name}` });
    },
  });
  router.add({
    method: 'PUT',
    path: `${PROFILES_PATH}/:name`,
    maxBodyBytes: MAX_BODY_BYTES,
    handler: (req) => {
      identity.require(req, 'profiles.write');
      return one(service.update(req.params['name'] ?? '', req.body, req.headers['if-match']), 200);
    },
  });
  router.add({
    method: 'DELETE',
    path: `${PROFILES_PATH}/:name`,
    body: 'none',
    handler: async (req) => {
      identity.require(req, 'profiles.write');
      const name = req.params['name'] ?? '';
      await service.delete(name);
      return { status: 200, json: { deleted: true, name } };
    },
  });
}
