/**
 * One HTTPS request with a client certificate (the admin listener's mutual TLS), a JSON body and
 * extra headers if given; resolves with the status and the body as text. A fresh connection each time (no agent),
 * so every request is its own TLS handshake and presents its own certificate.
 */
import { request } from 'node:https';

export interface MtlsClient {
  port: number;
  /** PEM of the CA the server's certificate chains to. */
  ca: string | Buffer;
  cert: string | Buffer;
  key: string | Buffer;
}

export function mtlsRequest(
  c: MtlsClient,
  method: string,
  path: string,
  body?: unknown,
  headers: Readonly<Record<string, string>> = {},
): Promise<{ status: number; text: string }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: c.port,
        path,
        method,
        ca: c.ca,
        cert: c.cert,
        key: c.key,
        agent: false,
        headers: {
          ...headers,
          ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }),
        },
      },
      (res) => {
        let out = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (out += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: out }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}
