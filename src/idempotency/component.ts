/**
 * The `idempotency` component: opens the binding store (`$SVC_STATE_DIR/idempotency/
 * idempotency.db`), provides the one mechanism as the `idempotency` service (the v1 sessions route
 * uses it) and installs the spec 4.11 middleware on the shared router before any covered route is
 * registered: it is listed right after `auth` (it resolves callers with `operatorIdentity`).
 *
 * Expired bindings are swept at start and every 10 minutes. Metrics:
 * `svc_idempotency_requests_total{outcome}` (bound, replayed, key_conflict, in_progress, released,
 * unbound) and `svc_idempotency_bindings` (unexpired bindings held).
 */
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import type { Component } from '../component/component.js';
import { BindingStore } from './binding-store.js';
import { Idempotency, type IdempotencyOutcome } from './idempotency.js';
import { idempotencyMiddleware } from './middleware.js';

declare module '../component/component.js' {
  interface Services {
    idempotency: Idempotency;
  }
}

export const IDEMPOTENCY_DIR = 'idempotency';
const SWEEP_INTERVAL_MS = 10 * 60_000;
const OUTCOMES: readonly IdempotencyOutcome[] = ['bound', 'replayed', 'key_conflict', 'in_progress', 'released', 'unbound'];

export const idempotencyComponent: Component = {
  name: 'idempotency',
  start(ctx) {
    const store = new BindingStore(join(ctx.config.stateDir, IDEMPOTENCY_DIR));
    const requests = new Counter({
      name: 'svc_idempotency_requests_total',
      help: 'Requests carrying an Idempotency-Key, by outcome (bound, replayed, key_conflict, in_progress, released, unbound)',
      labelNames: ['outcome'],
      registers: [ctx.metrics.registry],
    });
    for (const o of OUTCOMES) requests.labels(o).inc(0);
    new Gauge({
      name: 'svc_idempotency_bindings',
      help: 'Unexpired Idempotency-Key bindings held',
      registers: [ctx.metrics.registry],
      collect() {
        this.set(store.count(Date.now()));
      },
    });
    const idempotency = new Idempotency({ store, onOutcome: (o) => requests.labels(o).inc() });
    ctx.provide('idempotency', idempotency);
    ctx.router.use(idempotencyMiddleware({ idempotency, identity: ctx.need('operatorIdentity') }));
    store.sweep(Date.now());
    const timer = setInterval(() => store.sweep(Date.now()), SWEEP_INTERVAL_MS);
    timer.unref();
    return Promise.resolve({
      stop: () => {
        clearInterval(timer);
        store.close();
        return Promise.resolve();
      },
    });
  },
};
