/**
 * The `loadouts` component: the loadout catalog (src/loadouts/loadout-store.ts, durable under
 * `$SVC_STATE_DIR/loadouts/`) and its routes. Listed before `profiles` (a profile names a
 * loadout) and looked up late by `vms` (the provisioner applies a VM's loadout).
 */
import { join } from 'node:path';
import type { Component } from '../component/component.js';
import { LoadoutStore } from './loadout-store.js';
import { registerLoadoutRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    loadouts: LoadoutStore;
  }
}

export const LOADOUTS_DIR = 'loadouts';

export const loadoutsComponent: Component = {
  name: 'loadouts',
  start(ctx) {
    const store = new LoadoutStore(join(ctx.config.stateDir, LOADOUTS_DIR));
    ctx.provide('loadouts', store);
    return Promise.resolve({
      routes: (router) => registerLoadoutRoutes(router, { store, identity: ctx.need('operatorIdentity') }),
      stop: () => {
        store.close();
        return Promise.resolve();
      },
    });
  },
};
