/**
 * Layering check (run by `npm test` through `npm run layers`). Layers point one way:
 *   src/util -> src/core, src/config, src/observability -> src/http and the drivers
 *   (src/hypervisor, src/identity, src/image) -> src/component (the contract every component
 *   implements) -> the features (src/agent-link, src/sessions, src/streaming, src/vms,
 *   src/operations, src/tasks, src/storage, src/events; each holds its own routes and exports
 *   its component) -> src/server (server-level routes and runtime components) -> src/main.ts
 *   (the list of components and the loop that starts them) and src/bin.
 * The features never import src/server or main.ts; src/http imports no feature. The guest agent
 * (src/guest-agent, the program inside a VM) uses only util, core, config, observability and proto;
 * what it shares with the server (tmux argv) lives in src/core. The client, the CLI and the
 * dashboard use only each other, src/util and src/wire, never a server folder. src/wire holds the
 * HTTP API's wire shapes, declared once (pure types and the few value lists both sides need): the
 * server's features build them, the client reads them. It is a leaf: it imports nothing (no other
 * src/ folder, no actors/, no package, no Node built-in), and every folder may import it (src/util,
 * the bottom, has no need to). test/support is the test
 * kit: helpers both the tests and the bench (native-bench) use; the bench imports nothing else
 * of test/, and the kit imports no test and nothing of the bench.
 * actors/ may use src/util, src/core, src/observability, src/wire and proto/, never a transport. Inside it:
 *   actors/protocol (the main⇄worker contract) and actors/ring import no other actors folder;
 *   actors/runtime uses only those two; the domain actors point one way,
 *   agent-connection -> replay -> chat, with vm on its own, and terminal (the screen states of
 *   pty-ws keyframes) apart from all of them. src/ reaches actors/ only through the runtime's
 *   face (actors/runtime/actor-system.ts, actor-lane.ts), the job pool (actors/jobs/job-pool.ts),
 *   the screen states (actors/terminal/screen-states.ts) and actors/protocol/**; the other
 *   modules are worker-side.
 * Only src/http imports uWebSockets.js; only src/hypervisor/libvirt imports the libvirt binding;
 * only src/agent-link (server) and src/guest-agent (the agent's client) import grpc-js.
 * Worker entry files (*.worker.ts) are loaded by URL and never imported.
 * test/unit/layers.test.ts and test/unit/actors/layers.test.ts show each rule failing when broken.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'uws-only-in-http',
      severity: 'error',
      from: { pathNot: '^(src/http/|test/|native-bench/)' },
      to: { path: 'node_modules/@trufflesuite/uws-js-unofficial' },
    },
    {
      name: 'libvirt-only-in-hypervisor-libvirt',
      severity: 'error',
      from: { pathNot: '^(src/hypervisor/libvirt/|test/|native-bench/)' },
      to: { path: 'node_modules/@unraid/libvirt' },
    },
    {
      name: 'grpc-only-in-the-agent-link-and-the-guest-agent',
      severity: 'error',
      from: { pathNot: '^(src/agent-link/|src/guest-agent/|test/|native-bench/)' },
      to: { path: 'node_modules/@grpc/grpc-js' },
    },
    {
      name: 'workers-are-loaded-by-url',
      severity: 'error',
      from: {},
      to: { path: '\\.worker\\.(ts|js)$' },
    },
    {
      name: 'util-is-the-bottom',
      severity: 'error',
      from: { path: '^src/util/' },
      to: { path: '^(src/(?!util/)|actors/)' },
    },
    {
      name: 'the-wire-types-are-a-leaf',
      severity: 'error',
      from: { path: '^src/wire/' },
      to: { pathNot: '^src/wire/' },
    },
    {
      name: 'core-does-not-reach-up',
      severity: 'error',
      from: { path: '^src/(core|config|observability)/' },
      to: { path: '^(src/(?!(util|core|config|observability|wire)/)|actors/)' },
    },
    {
      name: 'actors-do-not-use-transports',
      severity: 'error',
      from: { path: '^actors/' },
      to: { path: '^src/(?!(util|core|observability|wire)/)' },
    },
    {
      name: 'src-reaches-actors-only-through-the-runtime-face-and-the-protocol',
      comment: 'The faces: the actor system, the job pool and the screen-state worker (keyframes).',
      severity: 'error',
      from: { path: '^src/' },
      to: {
        path: '^actors/',
        pathNot: '^actors/(protocol/|runtime/(actor-system|actor-lane)\\.ts$|jobs/job-pool\\.ts$|terminal/screen-states\\.ts$)',
      },
    },
    {
      name: 'the-protocol-imports-no-other-actors-folder',
      severity: 'error',
      from: { path: '^actors/protocol/' },
      to: { path: '^actors/(?!protocol/)' },
    },
    {
      name: 'the-ring-imports-no-other-actors-folder',
      severity: 'error',
      from: { path: '^actors/ring/' },
      to: { path: '^actors/(?!ring/)' },
    },
    {
      name: 'the-actor-runtime-never-imports-domain-actors',
      severity: 'error',
      from: { path: '^actors/runtime/' },
      to: { path: '^actors/(?!(runtime|protocol|ring)/)' },
    },
    {
      name: 'replay-actors-do-not-import-the-agent-actors',
      severity: 'error',
      from: { path: '^actors/replay/' },
      to: { path: '^actors/agent-connection/' },
    },
    {
      name: 'chat-projection-does-not-import-agent-or-replay-actors',
      severity: 'error',
      from: { path: '^actors/chat/' },
      to: { path: '^actors/(agent-connection|replay)/' },
    },
    {
      name: 'vm-actors-import-no-other-domain-actors',
      severity: 'error',
      from: { path: '^actors/vm/' },
      to: { path: '^actors/(agent-connection|replay|chat)/' },
    },
    {
      name: 'no-other-domain-actor-imports-the-vm-actors',
      severity: 'error',
      from: { path: '^actors/(agent-connection|replay|chat)/' },
      to: { path: '^actors/vm/' },
    },
    {
      name: 'the-terminal-screens-import-no-other-actors-folder',
      severity: 'error',
      from: { path: '^actors/terminal/' },
      to: { path: '^actors/(?!terminal/)' },
    },
    {
      name: 'no-other-actors-folder-imports-the-terminal-screens',
      severity: 'error',
      from: { path: '^actors/(?!terminal/)' },
      to: { path: '^actors/terminal/' },
    },
    {
      name: 'nothing-imports-main-or-bins',
      severity: 'error',
      from: { pathNot: '^(src/bin/|test/|native-bench/)' },
      to: { path: '^src/(main\\.ts|bin/)' },
    },
    {
      name: 'features-never-import-the-server-root',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(server/|bin/|main\\.ts$)' },
      to: { path: '^src/(server/|main\\.ts$)' },
    },
    {
      name: 'the-component-contract-imports-no-feature',
      severity: 'error',
      from: { path: '^src/component/' },
      to: { path: '^(src/(?!(component|http|util|core|config|observability|wire)/)|actors/)' },
    },
    {
      name: 'http-never-imports-features',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: '^(src/(?!(http|util|core|config|observability|wire)/)|actors/)' },
    },
    {
      name: 'the-guest-agent-never-imports-server-folders',
      severity: 'error',
      from: { path: '^src/guest-agent/' },
      to: { path: '^(src/(?!(guest-agent|util|core|config|observability|wire)/)|actors/)' },
    },
    {
      name: 'client-cli-and-dashboard-never-import-server-folders',
      severity: 'error',
      from: { path: '^src/(client|cli|dashboard)/' },
      to: { path: '^(src/(?!(client|cli|dashboard|util|wire)/)|actors/|proto/)' },
    },
    {
      name: 'the-bench-imports-no-test-but-the-support-kit',
      severity: 'error',
      from: { path: '^native-bench/' },
      to: { path: '^test/(?!support/)' },
    },
    {
      name: 'the-support-kit-imports-no-test',
      severity: 'error',
      from: { path: '^test/support/' },
      to: { path: '^(test/(?!support/)|native-bench/)' },
    },
    {
      name: 'src-does-not-import-tests-or-bench',
      severity: 'error',
      from: { path: '^(src|actors|proto)/' },
      to: { path: '^(test|native-bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|\\.build-)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'] },
  },
};
