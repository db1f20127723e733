/**
 * Work-around for the lost tail of fast-exiting PTY programs (node-pty issue #72).
 *
 * What really drops the bytes (measured on Linux 6.x, node-pty 1.1.0, Node 20): node-pty reads
 * the master through `tty.ReadStream`, i.e. a libuv stream. When the last slave fd closes, the
 * kernel raises POLLHUP on the master while data can still be queued in the pty (reads hand out
 * at most the 4 KiB line-discipline buffer at a time; the rest waits in the flip buffers).
 * libuv's uv__stream_io() treats "POLLHUP after a partial read" as end-of-file and stops reading
 * — correct for pipes and sockets, wrong for a pty, whose reads are always partial. The stream
 * emits 'end' and is destroyed; the bytes still in the kernel go with the fd. (When libuv reads
 * once more instead, it gets EIO with nothing lost: that is the lucky half of the runs.)
 * A second, rarer path: node-pty's onExit arms a 200 ms timer that destroys the socket if it has
 * not closed by then (event loop busy, or a background process holding the slave open).
 *
 * Fix: before the socket's fd is closed — on its 'end' event (emitted synchronously before
 * auto-destroy) and in front of destroy() — read the master fd directly with readSync until the
 * kernel says EIO (the slave side is closed and everything was read) or EAGAIN (nothing more for
 * now, slave still open). With the slave closed the kernel flushes pending input before
 * answering EIO, so the loop is exact and short (at most the pty's buffered bytes). The drained
 * bytes go out after every byte node-pty emitted, so order is kept.
 *
 * Second fix, same hook: node-pty closes the master as soon as the read side fails (EIO/EOF),
 * i.e. when the last slave fd closes — which a program may do itself just before exiting (cat,
 * and everything using coreutils' close_stdout, closes stdin/stdout/stderr in an atexit
 * handler). Closing the master hangs the terminal up and the kernel SIGHUPs the still-living
 * session leader: a clean `exit 0` is then reported as 129 (measured: 25-70 % of runs of
 * `cat` reading "line\n^D"). So the master is closed only once the leader is gone (polled in
 * /proc; a zombie counts as gone).
 *
 * This touches node-pty's private fields `_socket` and `_fd`; they are checked at run time and
 * the test suite (test/unit/guest-agent/pty-runner.test.ts, 20 × 10 MiB) fails if they change.
 */
import { readFileSync, readSync } from 'node:fs';
import { ReadStream } from 'node:tty';
import type { IPty } from 'node-pty';

/** Upper bound of one drain, in bytes: a background writer holding the slave cannot pin us in a loop. */
const MAX_DRAIN_BYTES = 8 * 1024 * 1024;

interface UnixTerminalPrivate {
  readonly _socket?: unknown;
  readonly _fd?: unknown;
}

/**
 * Installs the drain on a node-pty terminal. `onTail` receives drained bytes (after all bytes
 * node-pty delivered through onData). Returns false when node-pty's internals are not the
 * expected ones (the terminal then works as before, with the upstream race).
 */
export function installTailDrain(term: IPty, onTail: (data: Buffer) => void): boolean {
  const priv = term as unknown as UnixTerminalPrivate;
  const socket = priv._socket;
  const fd = priv._fd;
  if (!(socket instanceof ReadStream) || typeof fd !== 'number' || !Number.isInteger(fd) || fd < 0) return false;
  let done = false;
  const drain = (): void => {
    if (done || socket.destroyed) return;
    done = true;
    const buf = Buffer.allocUnsafe(64 * 1024);
    let total = 0;
    while (total < MAX_DRAIN_BYTES) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, null);
      } catch {
        break; // EIO: slave closed and all read; EAGAIN: nothing more now; EBADF: already closed
      }
      if (n <= 0) break;
      total += n;
      onTail(Buffer.from(buf.subarray(0, n)));
    }
  };
  socket.on('end', drain);
  const destroy = socket.destroy.bind(socket);
  const pid = term.pid;
  let deferred = false;
  socket.destroy = (err?: Error): ReadStream => {
    // With an error (EIO from libuv) everything was read already; without one this is
    // node-pty's post-exit timer or autoDestroy after 'end'.
    if (err === undefined) drain();
    if (deferred) return socket;
    if (!leaderAlive(pid)) return destroy(err);
    deferred = true;
    let waitedMs = 0;
    const poll = (): void => {
      if (leaderAlive(pid)) {
        // Usually the leader is microseconds from exit; a daemon that closed its terminal is polled slowly.
        const stepMs = waitedMs < 200 ? 5 : 100;
        waitedMs += stepMs;
        setTimeout(poll, stepMs).unref();
      } else {
        destroy(err);
      }
    };
    poll();
    return socket;
  };
  return true;
}

/** True while pid is our child and not a zombie. */
function leaderAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[0] !== 'Z' && Number(rest[1]) === process.pid;
  } catch {
    return false;
  }
}
