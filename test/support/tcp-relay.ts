/**
 * A TCP relay a test can cut: `cut()` drops every connection and refuses new ones until
 * `restore()`. Used to simulate network loss between an agent and the server.
 */
import net from 'node:net';

export class Relay {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #blocked = false;
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.#server = net.createServer((client) => {
      if (this.#blocked) {
        client.destroy();
        return;
      }
      const upstream = net.connect(target.port, target.host);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as net.AddressInfo).port;
  }

  cut(): void {
    this.#blocked = true;
    for (const s of this.#sockets) s.destroy();
  }

  restore(): void {
    this.#blocked = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
