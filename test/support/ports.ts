/** Loopback ports for tests and the bench. */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** A TCP port nothing listens on (local agents dial it and retry when no agents server runs there). */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/**
 * A free port for a server that must bind an address chosen before it starts (a child process
 * given `-p`, a config's `host:port`, a restart on the same address). It comes from below the
 * kernel's ephemeral range: a port from `closedPort()` is free only until the next `bind(0)` or
 * outgoing `connect()` of any process on the machine, and one of those took it once in CI while
 * the server was still starting. Ports below the range are handed out by nobody.
 */
export async function serverPort(): Promise<number> {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const top = Math.min(low ?? 32768, 32768) - 1;
  const bottom = 10_000;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = bottom + Math.floor(Math.random() * (top - bottom + 1));
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port found in ${bottom}-${top} after 50 tries`);
}

async function isFree(port: number): Promise<boolean> {
  const srv = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (bound) await new Promise<void>((resolve) => srv.close(() => resolve()));
  return bound;
}
