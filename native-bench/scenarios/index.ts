/**
 * The bench scenarios, in the order `npm run bench` runs them. Planned (later issues; targets in
 * ../README.md): ingest, fanout, latency, fleet, replay, vm-ops, dashboard, vm-real.
 */
import type { BenchScenario } from '../types.js';
import { ring } from './ring.js';

export const scenarios: readonly BenchScenario[] = [ring];
