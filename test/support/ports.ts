/** Loopback ports for tests and the bench. */
import { createServer } from 'node:net';

/** A TCP port nothing listens on (local agents dial it and retry when no agents server runs there). */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
