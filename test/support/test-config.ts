/** The server configuration tests and the bench start from. */
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';

/**
 * A config with its state in `stateDir`, the HTTP, WebSocket and gRPC listeners on 127.0.0.1
 * port 0 and the server's own log level silent; `env` is layered on top.
 */
export function loopbackConfig(stateDir: string, env: Readonly<Record<string, string>> = {}): Config {
  return loadConfig({
    SVC_STATE_DIR: stateDir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ADMIN_ADDR: '127.0.0.1:0',
    LOG_LEVEL: 'silent',
    ...env,
  });
}
