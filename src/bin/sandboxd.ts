#!/usr/bin/env node
/**
 * The sandboxd binary.
 *
 *   sandboxd serve                 run the server (what `npm start` runs after set-up)
 *   sandboxd certs issue-agent …   issue an agent client certificate (see `sandboxd certs --help`)
 *   sandboxd certs issue-operator …
 *   sandboxd config [--markdown]   print the configuration table (README is generated from it)
 *   sandboxd errors [--markdown]   print the error table
 *   sandboxd version
 */
import { readFileSync } from 'node:fs';
import { configMarkdownTable, configTableRows, ConfigError, loadConfig } from '../config/load.js';
import { errorsMarkdownTable } from '../core/errors.js';

// libvirt calls, file system work and crypto share libuv's thread pool (4 threads by default). A
// hung hypervisor host can hold up to 4 of them (its read and write lanes), so give the pool room
// before anything touches it; main.ts is imported lazily below for that reason.
process.env['UV_THREADPOOL_SIZE'] ??= '16';

const USAGE = `usage: sandboxd <command> [options]

commands:
  serve                 run the server (HTTP ${'127.0.0.1:8122'}, WebSocket 8121, gRPC 8120 by default)
  certs <sub> ...       manage identities: issue-agent, issue-operator (sandboxd certs --help)
  image build ...       build a bootable guest image for qemu hosts (sandboxd image --help)
  host prepare ...      prepare this host for qemu VMs: libvirtd, virtlogd, isolated network (root)
  config [--markdown]   list every configuration variable with its default
  errors [--markdown]   list every error code with its HTTP and gRPC status
  version               print the version

Configuration is read from the environment only; see \`sandboxd serve --help\`.`;

function serveHelp(): string {
  const rows = configTableRows();
  const width = Math.max(...rows.map((r) => r.name.length));
  const lines = rows.map((r) => `  ${r.name.padEnd(width)}  ${r.meaning}\n  ${' '.repeat(width)}  default: ${r.default}`);
  return `usage: sandboxd serve\n\nRuns sandboxd until SIGTERM or SIGINT (a second signal exits at once).\n\nenvironment:\n${lines.join('\n')}\n`;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function stdio(): { stdout: (t: string) => void; stderr: (t: string) => void } {
  return { stdout: (t) => void process.stdout.write(t), stderr: (t) => void process.stderr.write(t) };
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'serve':
      if (rest.includes('--help') || rest.includes('-h')) {
        process.stdout.write(serveHelp());
        return 0;
      }
      if (rest.length > 0) {
        process.stderr.write(`sandboxd serve: unexpected argument ${rest[0]}; configuration comes from the environment (sandboxd serve --help)\n`);
        return 2;
      }
      // Exit explicitly: shutdown already bounded every component; nothing may keep the process up.
      return process.exit(await (await import('../main.js')).runServe(process.env));
    case 'certs': {
      let cfg;
      try {
        cfg = loadConfig(process.env);
      } catch (err) {
        if (err instanceof ConfigError) {
          process.stderr.write(`sandboxd: ${err.message}\n`);
          return 2;
        }
        throw err;
      }
      const { runCertsCommand } = await import('../identity/certs-command.js');
      return runCertsCommand(rest, { secretsDir: cfg.secretsDir, trustDomain: cfg.trustDomain }, { stdout: process.stdout, stderr: process.stderr });
    }
    case 'image':
      return (await import('../image/command.js')).runImageCommand(rest, stdio());
    case 'host':
      return (await import('../host/command.js')).runHostCommand(rest, stdio());
    case 'config':
      process.stdout.write(`${rest.includes('--markdown') ? configMarkdownTable() : serveHelp()}\n`);
      return 0;
    case 'errors':
      process.stdout.write(`${errorsMarkdownTable()}\n`);
      return 0;
    case 'version':
    case '--version':
      process.stdout.write(`sandboxd ${version()}\n`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return cmd === undefined ? 2 : 0;
    default:
      process.stderr.write(`sandboxd: unknown command "${cmd}"\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`sandboxd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
