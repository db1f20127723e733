/**
 * The layering rules about actors/ in .dependency-cruiser.cjs fail when broken: a scratch tree
 * (a temporary directory with the real config and one-line modules) holds one forbidden import
 * per rule beside the imports the rules allow, and dependency-cruiser must name exactly the
 * forbidden ones.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { scratchViolations } from '../../support/layers-scratch.js';

/** from → to, as repository paths; each must break exactly the named rule. */
const forbidden: readonly { rule: string; from: string; to: string }[] = [
  {
    rule: 'src-reaches-actors-only-through-the-runtime-face-and-the-protocol',
    from: 'src/streaming/probe.ts',
    to: 'actors/replay/replay-ring.ts',
  },
  {
    rule: 'src-reaches-actors-only-through-the-runtime-face-and-the-protocol',
    from: 'src/agent-link/probe.ts',
    to: 'actors/runtime/worker-shard.ts',
  },
  { rule: 'the-protocol-imports-no-other-actors-folder', from: 'actors/protocol/probe.ts', to: 'actors/runtime/ticker.ts' },
  { rule: 'the-ring-imports-no-other-actors-folder', from: 'actors/ring/probe.ts', to: 'actors/protocol/frames.ts' },
  { rule: 'the-actor-runtime-never-imports-domain-actors', from: 'actors/runtime/probe.ts', to: 'actors/agent-connection/agent-view.ts' },
  { rule: 'replay-actors-do-not-import-the-agent-actors', from: 'actors/replay/probe.ts', to: 'actors/agent-connection/agent-view.ts' },
  { rule: 'chat-projection-does-not-import-agent-or-replay-actors', from: 'actors/chat/probe.ts', to: 'actors/replay/replay-ring.ts' },
  { rule: 'vm-actors-import-no-other-domain-actors', from: 'actors/vm/probe.ts', to: 'actors/agent-connection/agent-view.ts' },
  { rule: 'no-other-domain-actor-imports-the-vm-actors', from: 'actors/agent-connection/probe.ts', to: 'actors/vm/job-plans.ts' },
  {
    rule: 'src-reaches-actors-only-through-the-runtime-face-and-the-protocol',
    from: 'src/sessions/probe.ts',
    to: 'actors/terminal/session-screen.ts',
  },
  { rule: 'the-terminal-screens-import-no-other-actors-folder', from: 'actors/terminal/probe.ts', to: 'actors/replay/replay-ring.ts' },
  { rule: 'no-other-actors-folder-imports-the-terminal-screens', from: 'actors/replay/probe.ts', to: 'actors/terminal/sgr.ts' },
];

/** Imports the same rules allow. */
const allowed: readonly { from: string; to: string }[] = [
  { from: 'src/streaming/ok.ts', to: 'actors/protocol/frames.ts' },
  { from: 'src/agent-link/ok.ts', to: 'actors/runtime/actor-system.ts' },
  { from: 'src/agent-link/ok-lane.ts', to: 'actors/runtime/actor-lane.ts' },
  { from: 'actors/runtime/ok.ts', to: 'actors/ring/sab-ring.ts' },
  { from: 'actors/runtime/ok-protocol.ts', to: 'actors/protocol/frames.ts' },
  { from: 'actors/agent-connection/ok.ts', to: 'actors/replay/replay-ring.ts' },
  { from: 'actors/replay/ok.ts', to: 'actors/chat/projector.ts' },
  { from: 'actors/vm/ok.ts', to: 'actors/runtime/ticker.ts' },
  { from: 'src/sessions/ok.ts', to: 'actors/terminal/screen-states.ts' },
  { from: 'actors/terminal/ok.ts', to: 'actors/terminal/screen-protocol.ts' },
];

void describe('actors layering rules', () => {
  void test('each rule names the import that breaks it, and only those', async () => {
    const seen = await scratchViolations([...forbidden, ...allowed], ['src', 'actors']);
    assert.deepEqual(seen, forbidden.map((f) => `${f.rule}: ${f.from} -> ${f.to}`).sort());
  });
});
