/**
 * The bench scenarios, in the order `npm run bench` runs them (targets in ../README.md). vm-real
 * needs root and QEMU; elsewhere it fails with the reason, like any scenario that cannot run.
 */
import type { BenchScenario } from '../types.js';
import { activityIngest } from './activity-ingest.js';
import { dashboard } from './dashboard.js';
import { fanout } from './fanout.js';
import { fleet } from './fleet.js';
import { ingest } from './ingest.js';
import { jobs } from './jobs.js';
import { pty } from './pty.js';
import { latency } from './latency.js';
import { replay } from './replay.js';
import { ring } from './ring.js';
import { terminal } from './terminal.js';
import { vmOps } from './vm-ops.js';
import { poolHandoff } from './pool-handoff.js';
import { vmReal } from './vm-real.js';

export const scenarios: readonly BenchScenario[] = [
  ring,
  ingest,
  fanout,
  latency,
  replay,
  fleet,
  vmOps,
  poolHandoff,
  activityIngest,
  jobs,
  terminal,
  pty,
  dashboard,
  vmReal,
];
