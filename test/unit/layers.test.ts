/**
 * The layering rules of .dependency-cruiser.cjs about src/ folders, the bench and the test kit
 * fail when broken: a scratch tree holds one forbidden import per rule beside imports the rules
 * allow, and dependency-cruiser must name exactly the forbidden ones (the actors rules:
 * test/unit/actors/layers.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { scratchViolations } from '../support/layers-scratch.js';

/** from → to, as repository paths; each must break exactly the named rule. */
const forbidden: readonly { rule: string; from: string; to: string }[] = [
  { rule: 'features-never-import-the-server-root', from: 'src/tasks/probe.ts', to: 'src/server/health.ts' },
  { rule: 'features-never-import-the-server-root', from: 'src/sessions/probe.ts', to: 'src/server/dashboard.ts' },
  { rule: 'the-component-contract-imports-no-feature', from: 'src/component/probe.ts', to: 'src/vms/vm-service.ts' },
  { rule: 'the-component-contract-imports-no-feature', from: 'src/component/probe-actors.ts', to: 'actors/runtime/actor-system.ts' },
  { rule: 'http-never-imports-features', from: 'src/http/probe-component.ts', to: 'src/component/component.ts' },
  { rule: 'http-never-imports-features', from: 'src/http/probe.ts', to: 'src/sessions/session-hub.ts' },
  { rule: 'http-never-imports-features', from: 'src/http/probe-actors.ts', to: 'actors/runtime/actor-system.ts' },
  { rule: 'the-guest-agent-never-imports-server-folders', from: 'src/guest-agent/probe.ts', to: 'src/sessions/session-service.ts' },
  { rule: 'the-guest-agent-never-imports-server-folders', from: 'src/guest-agent/probe-http.ts', to: 'src/http/router.ts' },
  { rule: 'client-cli-and-dashboard-never-import-server-folders', from: 'src/client/probe.ts', to: 'src/agent-link/agent-registry.ts' },
  { rule: 'client-cli-and-dashboard-never-import-server-folders', from: 'src/cli/probe.ts', to: 'src/core/errors.ts' },
  { rule: 'client-cli-and-dashboard-never-import-server-folders', from: 'src/dashboard/probe.ts', to: 'src/http/router.ts' },
  { rule: 'the-wire-types-are-a-leaf', from: 'src/wire/probe.ts', to: 'src/tasks/task-state.ts' },
  { rule: 'the-wire-types-are-a-leaf', from: 'src/wire/probe-core.ts', to: 'src/core/agent-status.ts' },
  { rule: 'the-wire-types-are-a-leaf', from: 'src/wire/probe-util.ts', to: 'src/util/deadline.ts' },
  { rule: 'the-wire-types-are-a-leaf', from: 'src/wire/probe-client.ts', to: 'src/client/api-client.ts' },
  { rule: 'the-wire-types-are-a-leaf', from: 'src/wire/probe-actors.ts', to: 'actors/protocol/agent-frames.ts' },
  {
    rule: 'the-bench-imports-no-test-but-the-support-kit',
    from: 'native-bench/scenarios/probe.ts',
    to: 'test/integration/agents-harness.ts',
  },
  { rule: 'the-bench-imports-no-test-but-the-support-kit', from: 'native-bench/probe.ts', to: 'test/unit/layers.test.ts' },
  { rule: 'the-support-kit-imports-no-test', from: 'test/support/probe.ts', to: 'test/integration/vms-harness.ts' },
  { rule: 'the-support-kit-imports-no-test', from: 'test/support/probe-bench.ts', to: 'native-bench/harness.ts' },
  // Package rules: the packages stand in as files under node_modules/ (cruised as leaves, never followed).
  { rule: 'uws-only-in-http', from: 'src/sessions/probe-uws.ts', to: 'node_modules/@trufflesuite/uws-js-unofficial/index.ts' },
  { rule: 'libvirt-only-in-hypervisor-libvirt', from: 'src/vms/probe-libvirt.ts', to: 'node_modules/@unraid/libvirt/index.ts' },
  { rule: 'grpc-only-in-the-agent-link-and-the-guest-agent', from: 'src/tasks/probe-grpc.ts', to: 'node_modules/@grpc/grpc-js/index.ts' },
];

/** Imports the same rules allow. */
const allowed: readonly { from: string; to: string }[] = [
  { from: 'src/tasks/ok.ts', to: 'src/http/router.ts' },
  { from: 'src/vms/ok.ts', to: 'src/component/component.ts' },
  { from: 'src/component/ok.ts', to: 'src/http/router.ts' },
  { from: 'src/server/ok.ts', to: 'src/tasks/routes.ts' },
  { from: 'src/main.ts', to: 'src/server/health.ts' },
  { from: 'src/bin/ok.ts', to: 'src/main.ts' },
  { from: 'src/http/ok.ts', to: 'src/core/errors.ts' },
  { from: 'src/guest-agent/ok.ts', to: 'src/core/tmux-argv.ts' },
  { from: 'src/guest-agent/ok-config.ts', to: 'src/config/parsers.ts' },
  { from: 'src/sessions/ok.ts', to: 'src/core/tmux-argv.ts' },
  { from: 'src/storage/ok.ts', to: 'src/core/ids.ts' },
  { from: 'src/cli/ok.ts', to: 'src/client/api-client.ts' },
  { from: 'src/dashboard/ok.ts', to: 'src/client/types.ts' },
  { from: 'src/client/ok.ts', to: 'src/util/deadline.ts' },
  { from: 'src/client/ok-wire.ts', to: 'src/wire/tasks.ts' },
  { from: 'src/dashboard/ok-wire.ts', to: 'src/wire/vms.ts' },
  { from: 'src/wire/ok.ts', to: 'src/wire/agents.ts' },
  { from: 'src/core/ok-wire.ts', to: 'src/wire/agents.ts' },
  { from: 'src/http/ok-wire.ts', to: 'src/wire/health.ts' },
  { from: 'src/guest-agent/ok-wire.ts', to: 'src/wire/sessions.ts' },
  { from: 'src/tasks/ok-wire.ts', to: 'src/wire/tasks.ts' },
  { from: 'actors/protocol/ok-wire.ts', to: 'src/wire/agents.ts' },
  { from: 'native-bench/scenarios/ok.ts', to: 'test/support/realvm.ts' },
  { from: 'test/support/ok.ts', to: 'src/main.ts' },
  { from: 'test/integration/ok.ts', to: 'test/support/ports.ts' },
  { from: 'test/unit/ok.ts', to: 'native-bench/harness.ts' },
  { from: 'src/http/ok-uws.ts', to: 'node_modules/@trufflesuite/uws-js-unofficial/index.ts' },
  { from: 'src/hypervisor/libvirt/ok.ts', to: 'node_modules/@unraid/libvirt/index.ts' },
  { from: 'src/agent-link/ok-grpc.ts', to: 'node_modules/@grpc/grpc-js/index.ts' },
];

void describe('src layering rules', () => {
  void test('each rule names the import that breaks it, and only those', async () => {
    const seen = await scratchViolations([...forbidden, ...allowed], ['src', 'actors', 'native-bench', 'test']);
    assert.deepEqual(seen, forbidden.map((f) => `${f.rule}: ${f.from} -> ${f.to}`).sort());
  });
});
