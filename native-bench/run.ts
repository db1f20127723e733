/**
 * `npm run bench [-- NAME ... --seconds N --strict --list]`: runs the bench scenarios and prints
 * one JSON result line per scenario on stdout (progress on stderr). See README.md here.
 *
 * With several scenarios selected, each runs in its own child process (this script with one
 * NAME and --in-process), so no scenario's heap, JIT state, leftover workers or RSS colours the
 * next one's figures, and a scenario that hangs can be killed.
 */
import { fileURLToPath } from 'node:url';
import { runBench, runIsolated } from './harness.js';
import { scenarios } from './scenarios/index.js';

const script = fileURLToPath(import.meta.url);
const interrupt = new AbortController();
process.once('SIGINT', () => interrupt.abort(new Error('interrupted')));

const code = await runBench(process.argv.slice(2), {
  scenarios,
  stdout: process.stdout,
  stderr: process.stderr,
  signal: interrupt.signal,
  isolate: (s, seconds) => runIsolated(script, s, seconds, interrupt.signal),
});
// A scenario that timed out may have left workers running: exit once stdout is written.
process.stdout.write('', () => process.exit(code));
