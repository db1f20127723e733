// comlink ships this module's types as node-adapter.d.ts, which NodeNext resolution does not
// pair with the .mjs file; this restates its one export.
declare module 'comlink/dist/esm/node-adapter.mjs' {
  import type { Endpoint } from 'comlink';
  import type { TransferListItem } from 'node:worker_threads';

  export interface NodeEndpoint {
    postMessage(message: unknown, transfer?: readonly TransferListItem[]): void;
    on(type: string, listener: (value: unknown) => void): void;
    off(type: string, listener: (value: unknown) => void): void;
    start?: () => void;
  }

  export default function nodeEndpoint(nep: NodeEndpoint): Endpoint;
}
