/**
 * The profile and loadout routes against real stores (SQLite in a temporary directory) and the
 * real operator-identity resolver: a viewer reads profiles and loadouts but cannot create,
 * change or delete them (403 auth.permission_denied); an operator can; an mTLS operator certificate
 * resolves through the same function. No hypervisor here: deletes of unbound profiles only.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { LoadoutStore } from '../../../src/loadouts/loadout-store.js';
import { registerLoadoutRoutes } from '../../../src/loadouts/routes.js';
import { ProfileService } from '../../../src/profiles/profile-service.js';
import { ProfileStore } from '../../../src/profiles/profile-store.js';
import { registerProfileRoutes } from '../../../src/profiles/routes.js';

const TD = 'sandboxd.test';

void describe('profile and loadout routes: permissions', () => {
  let dir: string;
  let profiles: ProfileStore;
  let loadouts: LoadoutStore;

  function routerAs(localRole: 'viewer' | 'operator'): Router {
    const router = new Router();
    const identity = new OperatorIdentity({
      trustDomain: TD,
      localRole,
      roles: () => ({ ok: true, roles: new Map([['bob', 'operator']]) }),
    });
    const service = new ProfileService({
      store: profiles,
      loadouts,
      hypervisor: { list: () => Promise.resolve([]) },
      operationStatus: () => null,
      imageRefs: () => [],
      network: 'default',
    });
    registerProfileRoutes(router, { service, identity });
    registerLoadoutRoutes(router, { store: loadouts, identity });
    return router;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-profile-routes-'));
    profiles = new ProfileStore(join(dir, 'profiles'));
    loadouts = new LoadoutStore(join(dir, 'loadouts'));
  });
  after(async () => {
    profiles.close();
    loadouts.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('a viewer reads but cannot change; an operator (local or by certificate) can', async () => {
    const viewer = routerAs('viewer');
    const operator = routerAs('operator');
    const code = (r: { json(): unknown }): string => String((r.json() as { error?: { code?: string } }).error?.code);

    for (const [method, url, body] of [
      ['POST', '/api/v2/startup-profiles', { name: 'p1' }],
      ['PUT', '/api/v2/startup-profiles/p1', { expected_revision: 1 }],
      ['DELETE', '/api/v2/startup-profiles/p1', undefined],
      ['POST', '/api/v2/loadouts/l1', 'metadata: {name: l1}\n'],
    ] as const) {
      const r = await inject(viewer, { method, url, ...(body !== undefined && { body }) });
      assert.deepEqual([r.status, code(r)], [403, 'auth.permission_denied'], `${method} ${url}`);
    }
    assert.equal((await inject(operator, { method: 'POST', url: '/api/v2/startup-profiles', body: { name: 'p1' } })).status, 201);
    assert.equal((await inject(operator, { method: 'POST', url: '/api/v2/loadouts/l1', body: 'metadata: {name: l1}\n' })).status, 201);
    const json = await inject(operator, {
      method: 'POST',
      url: '/api/v2/loadouts/l2',
      headers: { 'content-type': 'application/json' },
      body: { document: 'metadata: {name: l2}\n' },
    });
    assert.equal(json.status, 201, json.text);
    for (const url of [
      '/api/v2/startup-profiles',
      '/api/v2/startup-profiles/p1',
      '/api/v2/loadouts',
      '/api/v2/loadouts/l1',
      '/api/v1/loadouts',
    ])
      assert.equal((await inject(viewer, { method: 'GET', url })).status, 200, url);
    const bob = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/bob`, fingerprint256: 'AB:CD' } as const;
    const byCert = await inject(viewer, {
      method: 'PUT',
      url: '/api/v2/startup-profiles/p1',
      body: { vcpus: 2, expected_revision: 1 },
      peer: bob,
    });
    assert.equal(byCert.status, 200, byCert.text);
    assert.equal((await inject(viewer, { method: 'DELETE', url: '/api/v2/startup-profiles/p1', peer: bob })).status, 200);
  });
});

void describe('profile delete: launching and bound', () => {
  test('a create holding the profile blocks its delete until its operation ends; a VM created with it blocks it while it exists', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-profile-holds-'));
    const profiles = new ProfileStore(join(dir, 'profiles'));
    const loadouts = new LoadoutStore(join(dir, 'loadouts'));
    const status = new Map<string, string>();
    let domains: { name: string; metadata: { profile?: string } }[] = [];
    const service = new ProfileService({
      store: profiles,
      loadouts,
      hypervisor: { list: () => Promise.resolve(domains as never) },
      operationStatus: (id) => status.get(id) ?? null,
      imageRefs: () => [],
      network: 'default',
    });
    try {
      service.create({ name: 'p' });
      const refusal = async (): Promise<string> =>
        service.delete('p').then(
          () => 'deleted',
          (e: unknown) => `${(e as { code: string }).code}: ${(e as Error).message}`,
        );
      // Refused create: the mark goes.
      service.catalog.hold('p', 'agent-x').release();
      // Accepted create: held while its operation runs (and before it is even bound to one).
      const hold = service.catalog.hold('p', 'agent-a');
      assert.match(await refusal(), /^profile\.in_use: p is launching VM\(s\) agent-a/);
      hold.bind('op-1');
      status.set('op-1', 'running');
      assert.match(await refusal(), /^profile\.in_use: p is launching/);
      // Done: the VM exists now, so the profile is bound to it.
      status.set('op-1', 'completed');
      domains = [{ name: 'agent-a', metadata: { profile: 'p' } }];
      assert.match(await refusal(), /^profile\.in_use: p is bound to VM\(s\) agent-a/);
      domains = [{ name: 'agent-b', metadata: { profile: 'other' } }];
      assert.equal(await refusal(), 'deleted');
      assert.equal(service.find('p'), undefined);
    } finally {
      profiles.close();
      loadouts.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
