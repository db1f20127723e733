/**
 * Which session of the managed tmux server (src/core/tmux-argv.ts) a command is a client of, read
 * from its argv (`tmux -L sandboxd … new-session … -s NAME` or `attach-session -t =NAME`).
 */
import type { TmuxSocket } from '../core/tmux-argv.js';

/** Which managed tmux session a command is a client of, from its argv; undefined when none. */
export function managedTmuxTarget(command: string, args: readonly string[], socket?: TmuxSocket): string | undefined {
  if (command !== 'tmux' && !command.endsWith('/tmux')) return undefined;
  const [flag, sock] = args;
  const want =
    socket === undefined
      ? { flag: '-L', value: 'sandboxd' }
      : 'path' in socket
        ? { flag: '-S', value: socket.path }
        : { flag: '-L', value: socket.name };
  if (flag !== want.flag || sock !== want.value) return undefined;
  for (let i = 2; i < args.length - 1; i++) {
    const a = args[i];
    if (a === '--') break;
    const next = args[i + 1] ?? '';
    if (a === '-s' && args.slice(2, i).includes('new-session')) return next;
    if (a === '-t' && args.slice(2, i).includes('attach-session')) return next.startsWith('=') ? next.slice(1) : next;
  }
  return undefined;
}
