/**
 * A raw HTTP/1.1 client over node:net for tests that need what fetch hides: malformed requests,
 * partial bodies, dropped connections, requests on an existing keep-alive connection.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RawResponse {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: string;
}

/** Parse one response with a Content-Length from the start of `buf`: [response, bytes used], or undefined. */
export function parseResponse(buf: Buffer): [RawResponse, number] | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  if (buf.length < end + 4 + length) return undefined;
  const body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
  return [{ status: Number(statusLine.split(' ')[1]), headers, body }, end + 4 + length];
}

/** A GET request head. `extra` is more header lines, each ending in \r\n. */
export const rawGet = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nhost: t\r\n${extra}\r\n`;

/** A keep-alive connection that sends requests one at a time and reads their responses. */
export class RawConnection {
  readonly #sock: Socket;
  #buf = Buffer.alloc(0);
  #closed = false;
  #wake: (() => void) | undefined;

  private constructor(sock: Socket) {
    this.#sock = sock;
    sock.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#wake?.();
    });
    const closed = (): void => {
      this.#closed = true;
      this.#wake?.();
    };
    sock.on('close', closed);
    sock.on('error', closed);
  }

  static async open(port: number): Promise<RawConnection> {
    const sock = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    return new RawConnection(sock);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Write bytes (a request or part of one). */
  write(data: string | Buffer): void {
    this.#sock.write(data);
  }

  /** The next response, or null when the server closed the connection first. */
  async response(timeoutMs = 10_000): Promise<RawResponse | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const parsed = parseResponse(this.#buf);
      if (parsed) {
        this.#buf = this.#buf.subarray(parsed[1]);
        return parsed[0];
      }
      if (this.#closed) return null;
      if (Date.now() > deadline) assert.fail('no response in time');
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 50).unref();
      });
    }
  }

  /** Wait until the server closes the connection (true) or the timeout passes (false). */
  async waitClosed(timeoutMs = 10_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#closed && Date.now() < deadline) await sleep(20);
    return this.#closed;
  }

  destroy(): void {
    this.#sock.destroy();
  }
}
