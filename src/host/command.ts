/** `sandboxd host prepare [--network NAME] [--bridge DEV] [--address IP] [--no-install]` (prepare.ts). */
import type { CommandIo } from '../image/command.js';
import { DEFAULT_NETWORK, prepareHost } from './prepare.js';

export const HOST_USAGE = `usage: sandboxd host prepare [--network NAME] [--bridge DEV] [--address IP] [--no-install]

  Installs the qemu/libvirt packages (apt, as root), starts virtlogd and libvirtd (by hand when
  PID 1 is not systemd), and defines/starts an isolated libvirt network (default ${DEFAULT_NETWORK.name},
  bridge ${DEFAULT_NETWORK.bridge}, host ${DEFAULT_NETWORK.hostAddress}/24, no NAT). Idempotent.
  Then: SVC_HYPERVISOR_URI=qemu:///system SVC_VM_NETWORK=<network> SVC_GRPC_ADDR=<address>:8120
`;

function isHelpFlag(a: string): boolean {
  return a === '--help' || a === '-h';
}

/** Runs the host subcommand; resolves to the exit code (0 ok, 1 failed, 2 usage). */
export async function runHostCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'prepare') {
    const help = sub !== undefined && (isHelpFlag(sub) || sub === 'help');
    (help ? io.stdout : io.stderr)(HOST_USAGE);
    return help ? 0 : 2;
  }
  if (rest.some(isHelpFlag)) {
    io.stdout(HOST_USAGE);
    return 0;
  }
  const net = { ...DEFAULT_NETWORK };
  let install = true;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i] ?? '';
    const v = rest[i + 1];
    if (a === '--no-install') {
      install = false;
    } else if (a === '--network' && v !== undefined) {
      net.name = v;
      i++;
    } else if (a === '--bridge' && v !== undefined) {
      net.bridge = v;
      i++;
    } else if (a === '--address' && v !== undefined) {
      net.hostAddress = v;
      i++;
    } else {
      io.stderr(`sandboxd host prepare: unexpected argument '${a}'\n${HOST_USAGE}`);
      return 2;
    }
  }
  try {
    const r = await prepareHost({ network: net, install, log: (l) => io.stderr(`${l}\n`) });
    io.stdout(
      `host ready: network ${r.network.name} (${r.network.hostAddress}/24), accelerator ${r.accelerator} (${r.acceleratorReason})\n`,
    );
    return 0;
  } catch (err) {
    io.stderr(`sandboxd host prepare refused: ${(err as Error).message}\n`);
    return 1;
  }
}
