#!/usr/bin/env node
/**
 * The sandboxd binary: `sandboxd <command>`, dispatched by the command table in
 * sandboxd-commands.ts (serve, certs, image build, host prepare, config, errors, version;
 * `sandboxd --help`, and `--help` after any command or subcommand).
 */

// libvirt calls, file system work and crypto share libuv's thread pool (4 threads by default). A
// hung hypervisor host can hold up to 4 of them (its read and write lanes), so give the pool room
// before anything touches it; main.ts is imported lazily (by `serve`) for that reason.
process.env['UV_THREADPOOL_SIZE'] ??= '16';

const { runSandboxd } = await import('./sandboxd-commands.js');

runSandboxd(
  process.argv.slice(2),
  { stdout: (t) => void process.stdout.write(t), stderr: (t) => void process.stderr.write(t) },
  process.env,
).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`sandboxd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
