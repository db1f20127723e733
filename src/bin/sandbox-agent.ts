#!/usr/bin/env node
/**
 * The sandbox-agent binary (runs inside each VM; see sandbox-agent-main.ts for its options and
 * exit codes). Guest images run the bundled form of the same program (src/image/agent-bundle.ts).
 */
import { main } from './sandbox-agent-main.js';

main();
