/**
 * The command table of the sandboxd binary (src/bin/sandboxd.ts runs `runSandboxd`): every
 * command and subcommand with its synopsis and handler, so the usage text, the dispatcher and
 * the test that asks each entry for `--help` (exit 0, usage on stdout) read one list.
 *
 *   sandboxd serve                 run the server (what `npm start` runs after set-up)
 *   sandboxd certs issue-agent …   issue an agent client certificate (see `sandboxd certs --help`)
 *   sandboxd certs issue-operator …
 *   sandboxd image build …         build a guest image for qemu hosts
 *   sandboxd host prepare …        prepare this host for qemu VMs
 *   sandboxd config [--markdown]   print the configuration table (README is generated from it)
 *   sandboxd errors [--markdown]   print the error table
 *   sandboxd version
 *
 * The heavy modules (the server, the image builder, host preparation, the CA) are imported only
 * when their command runs.
 */
import { readFileSync } from 'node:fs';
import { configMarkdownTable, configTableRows, ConfigError, loadConfig } from '../config/load.js';
import { errorsMarkdownTable } from '../core/errors.js';

export interface SandboxdIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export interface SandboxdCommand {
  /** The words that select it (`['host', 'prepare']`); the first is the command, the rest its subcommand. */
  readonly words: readonly string[];
  /** What follows the words in the usage line. */
  readonly synopsis: string;
  readonly summary: string;
}

/** Every command and subcommand, in usage order. */
export const SANDBOXD_COMMANDS: readonly SandboxdCommand[] = [
  { words: ['serve'], synopsis: '', summary: 'run the server (HTTP 127.0.0.1:8122, WebSocket 8121, gRPC 8120 by default)' },
  { words: ['certs'], synopsis: '<sub> ...', summary: 'manage identities: issue-agent, issue-operator (sandboxd certs --help)' },
  {
    words: ['certs', 'issue-agent'],
    synopsis: '--instance-id ID --out DIR [--ttl-seconds N]',
    summary: 'issue an agent client certificate',
  },
  {
    words: ['certs', 'issue-operator'],
    synopsis: '--name NAME --out DIR [--ttl-seconds N]',
    summary: 'issue an operator client certificate',
  },
  { words: ['image'], synopsis: 'build ...', summary: 'build a bootable guest image for qemu hosts (sandboxd image --help)' },
  {
    words: ['image', 'build'],
    synopsis: '[--kind minimal|debian] [--out DIR]',
    summary: 'build a guest image (minimal, or debian as root)',
  },
  { words: ['host'], synopsis: 'prepare ...', summary: 'prepare this host for qemu VMs (sandboxd host --help)' },
  {
    words: ['host', 'prepare'],
    synopsis: '[--network NAME] [--bridge DEV] [--address IP] [--no-install]',
    summary: 'libvirtd, virtlogd, isolated network (root)',
  },
  { words: ['config'], synopsis: '[--markdown]', summary: 'list every configuration variable with its default' },
  { words: ['errors'], synopsis: '[--markdown]', summary: 'list every error code with its HTTP and gRPC status' },
  { words: ['version'], synopsis: '', summary: 'print the version' },
  { words: ['help'], synopsis: '', summary: 'print this help' },
];

function usageLine(c: SandboxdCommand): string {
  return [...c.words, c.synopsis].filter((w) => w !== '').join(' ');
}

/** `sandboxd --help`: the top-level commands (a subcommand's flags are in its own help). */
export function mainUsage(): string {
  const top = SANDBOXD_COMMANDS.filter((c) => c.words.length === 1);
  const left = top.map(usageLine);
  const w = Math.max(...left.map((l) => l.length));
  return `usage: sandboxd <command> [options]     sandboxd <command> --help for details

commands:
${top.map((c, i) => `  ${(left[i] ?? '').padEnd(w)}  ${c.summary}`).join('\n')}

Configuration is read from the environment only; see \`sandboxd serve --help\`.
`;
}

function serveHelp(): string {
  const rows = configTableRows();
  const width = Math.max(...rows.map((r) => r.name.length));
  const lines = rows.map((r) => `  ${r.name.padEnd(width)}  ${r.meaning}\n  ${' '.repeat(width)}  default: ${r.default}`);
  return `usage: sandboxd serve\n\nRuns sandboxd until SIGTERM or SIGINT (a second signal exits at once).\n\nenvironment:\n${lines.join('\n')}\n`;
}

/** Help of a command that has no subcommands and no help of its own module. */
function simpleHelp(words: string): string {
  const c = SANDBOXD_COMMANDS.find((x) => x.words.join(' ') === words);
  if (c === undefined) return mainUsage();
  return `usage: sandboxd ${usageLine(c)}\n\n${c.summary.charAt(0).toUpperCase()}${c.summary.slice(1)}.\n`;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

const isHelp = (a: string): boolean => a === '--help' || a === '-h';

/**
 * Runs `sandboxd <argv…>`; resolves to the exit code (0 done, 1 failed, 2 usage). `serve` (without
 * --help) ends the process with the server's exit code once it has stopped.
 */
export async function runSandboxd(argv: readonly string[], io: SandboxdIo, env: NodeJS.ProcessEnv): Promise<number> {
  const [cmd, ...rest] = argv;
  const wantsHelp = rest.some(isHelp);
  switch (cmd) {
    case 'serve':
      if (wantsHelp) {
        io.stdout(serveHelp());
        return 0;
      }
      if (rest.length > 0) {
        io.stderr(`sandboxd serve: unexpected argument ${rest[0]}; configuration comes from the environment (sandboxd serve --help)\n`);
        return 2;
      }
      // Exit explicitly: shutdown already bounded every component; nothing may keep the process up.
      return process.exit(await (await import('../main.js')).runServe(env));
    case 'certs': {
      const out = { stdout: { write: (t: string) => io.stdout(t) }, stderr: { write: (t: string) => io.stderr(t) } };
      const { runCertsCommand } = await import('../identity/certs-command.js');
      // Help needs no configuration (an invalid variable must not hide the usage text).
      if (wantsHelp) return runCertsCommand([...rest.slice(0, 1), '--help'], { secretsDir: '', trustDomain: '' }, out);
      let cfg;
      try {
        cfg = loadConfig(env);
      } catch (err) {
        if (err instanceof ConfigError) {
          io.stderr(`sandboxd: ${err.message}\n`);
          return 2;
        }
        throw err;
      }
      return runCertsCommand(rest, { secretsDir: cfg.secretsDir, trustDomain: cfg.trustDomain }, out);
    }
    case 'image':
      return (await import('../image/command.js')).runImageCommand(rest, io);
    case 'host':
      return (await import('../host/command.js')).runHostCommand(rest, io);
    case 'config':
      io.stdout(wantsHelp ? simpleHelp('config') : `${rest.includes('--markdown') ? configMarkdownTable() : serveHelp()}\n`);
      return 0;
    case 'errors':
      io.stdout(wantsHelp ? simpleHelp('errors') : `${errorsMarkdownTable()}\n`);
      return 0;
    case 'version':
    case '--version':
      io.stdout(wantsHelp ? simpleHelp('version') : `sandboxd ${version()}\n`);
      return 0;
    case undefined:
      io.stdout(mainUsage());
      return 2;
    case 'help':
    case '--help':
    case '-h':
      io.stdout(mainUsage());
      return 0;
    default:
      io.stderr(`sandboxd: unknown command "${cmd}"\n${mainUsage()}`);
      return 2;
  }
}
