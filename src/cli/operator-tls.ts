/**
 * sbx as an operator on the admin listener (README "The admin listener"): with SBX_OPERATOR_CERTS
 * naming the folder `sandboxd certs issue-operator --out DIR` wrote (ca.pem, operator.pem,
 * operator-key.pem), requests to an https:// server present that certificate and trust only that
 * CA. SSH leases need it: the trusted local listener claims no SSH identity.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import type { FetchLike } from '../client/sse-stream.js';
import { ConfigFileError } from './config.js';

/** A fetch presenting the operator certificate of `dir`; throws ConfigFileError when a file cannot be read. */
export function operatorFetch(dir: string): FetchLike {
  const read = (name: string): string => {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch (err) {
      throw new ConfigFileError(`SBX_OPERATOR_CERTS=${dir}: cannot read ${name} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const dispatcher = new Agent({ connect: { ca: read('ca.pem'), cert: read('operator.pem'), key: read('operator-key.pem') } });
  return (input: string, init?: RequestInit) => undiciFetch(input, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher });
}
