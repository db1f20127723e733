/**
 * The per-instance AgentCard, served at `/agents/{instance_id}/.well-known/agent-card.json` (the
 * path the reference publishes; A2A's well-known name under the per-instance base). It names what
 * sandboxd truly serves for the instance, nothing more:
 * - the operations travel on the pty-ws.v1 binding (`preferredTransport` and the 1.0
 *   `supportedInterfaces` entry name the binding URI; `url` is its endpoint, `{session_id}` a
 *   fresh UUID the client picks), advertised as the binding's section 10 asks (`bindings[]`);
 * - the pty-extensions/v1 extension, not required;
 * - the 4.8 artifact routes under `sandboxd` (not an A2A field: no standard A2A HTTP+JSON
 *   interface is served, so none is advertised).
 * The card is not signed (the reference signs its card; sandboxd has no card-signing key).
 */
import { BINDING_URI, PTY_EXTENSIONS_URI } from '../sessions/binding/codes.js';
import { A2A_SERVED_OPS } from '../sessions/binding/a2a.js';

export const AGENT_CARD_PATH = '/.well-known/agent-card.json';

export interface AgentCardInput {
  readonly instanceId: string;
  /** `http(s)://host:port` the caller reached. */
  readonly httpOrigin: string;
  /** `ws(s)://host:port` of the same listener. */
  readonly wsOrigin: string;
  readonly serverVersion: string;
}

export function agentCard(i: AgentCardInput): Record<string, unknown> {
  const inst = encodeURIComponent(i.instanceId);
  const attach = `${i.wsOrigin}/agents/${inst}/sessions/{session_id}/attach`;
  const six = A2A_SERVED_OPS.filter((op) => op !== 'Unsubscribe');
  return {
    name: `sandboxd instance ${i.instanceId}`,
    description:
      "A sandboxd-managed agent VM. A message's text is run as a shell command (/bin/sh -c) on the instance; " +
      'its stdout and stderr are kept as task artifacts.',
    version: i.serverVersion,
    protocolVersion: '0.3.0',
    url: attach,
    preferredTransport: BINDING_URI,
    supportedInterfaces: [{ url: attach, protocolBinding: BINDING_URI, protocolVersion: '1.0' }],
    bindings: [
      {
        uri: BINDING_URI,
        endpoint: attach,
        preference: 'primary',
        operations: six,
        notes:
          'Open one WebSocket per {session_id} (a fresh UUID), subprotocol pty-ws.v1; ListTasks lists every task of the instance, ' +
          "not only the session's. Task output: GET the artifact routes under sandboxd.artifacts.",
      },
    ],
    provider: { organization: 'sandboxd', url: i.httpOrigin },
    capabilities: {
      streaming: true,
      pushNotifications: false,
      stateTransitionHistory: false,
      extensions: [{ uri: PTY_EXTENSIONS_URI, required: false }],
    },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'shell-command',
        name: 'Run a shell command',
        description:
          "Runs the message text with /bin/sh -c in the agent's work directory; exit 0 completes the task, anything else fails it.",
        tags: ['shell', 'command', 'sandbox'],
        examples: ['uname -a', 'ls -la && git status'],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
      },
    ],
    sandboxd: {
      instance_id: i.instanceId,
      artifacts: {
        list: `${i.httpOrigin}/agents/${inst}/v1/tasks/{task_id}/artifacts`,
        get: `${i.httpOrigin}/agents/${inst}/v1/tasks/{task_id}/artifacts/{artifact_id}`,
        a2a_versions: ['0.3', '1.0'],
      },
    },
  };
}
