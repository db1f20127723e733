/**
 * The `profiles` component: startup profiles (src/profiles/profile-service.ts, durable under
 * `$SVC_STATE_DIR/profiles/`) and their routes; the VM create route selects by its `catalog`, the
 * provisioner asks it what a VM's loadout and profile give it (both looked up late by `vms`).
 * Needs `loadouts` (listed before it), the hypervisor (bound VMs) and the operations store
 * (launching VMs).
 */
import { join } from 'node:path';
import type { Component } from '../component/component.js';
import { ProfileService } from './profile-service.js';
import { ProfileStore } from './profile-store.js';
import { registerProfileRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    profiles: ProfileService;
  }
}

export const PROFILES_DIR = 'profiles';

export const profilesComponent: Component = {
  name: 'profiles',
  start(ctx) {
    const store = new ProfileStore(join(ctx.config.stateDir, PROFILES_DIR));
    const service = new ProfileService({
      store,
      loadouts: ctx.need('loadouts'),
      hypervisor: ctx.need('hypervisor'),
      // The VM feature's operations store (the operations component's, or its own in a subset).
      operationStatus: (id) => (ctx.find('vms')?.operations ?? ctx.find('operations'))?.get(id)?.status ?? null,
      imageRefs: () => ctx.find('vms')?.containerImages.map((i) => i.ref) ?? [],
      network: ctx.config.vmNetwork,
    });
    ctx.provide('profiles', service);
    return Promise.resolve({
      routes: (router) => registerProfileRoutes(router, { service, identity: ctx.need('operatorIdentity') }),
      stop: () => {
        store.close();
        return Promise.resolve();
      },
    });
  },
};
