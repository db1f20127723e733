/**
 * The agent-connection actor module loaded by URL into a real ActorSystem, in both modes:
 * frames sent by the main thread reach it in order, and what it emits comes back through onEmit.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { v1 } from '../../../../proto/index.js';
import {
  AGENT_ACTOR_TYPE,
  AgentFrameKind,
  agentActorId,
  decodeConnPrefixed,
  decodeJson,
  encodeJson,
  type AgentSnapshot,
} from '../../../../actors/protocol/agent-frames.js';
import { ActorSystem } from '../../../../actors/runtime/actor-system.js';
import { AGENT_ACTOR_MODULE } from '../../../../src/agent-link/agent-service.js';

for (const mode of ['inline', 'workers'] as const) {
  void describe(`agent actor in an ActorSystem (${mode})`, () => {
    void test('attach, registration, heartbeat: ack and snapshot come back', async () => {
      const frames: { kind: number; key: string; payload: Uint8Array }[] = [];
      let wake: (() => void) | undefined;
      const system = await ActorSystem.start({
        mode,
        shards: 2,
        actorModules: [AGENT_ACTOR_MODULE],
        ringBytes: 1 << 20,
        onEmit: (kind, key, payload) => {
          frames.push({ kind, key, payload: payload.slice() });
          wake?.();
        },
      });
      try {
        const id = agentActorId('agent-sys');
        await system.spawn(AGENT_ACTOR_TYPE, id, {
          agentId: 'agent-sys',
          heartbeatIntervalSeconds: 9,
          staleAfterMs: 60_000,
          retentionMs: 60_000,
        });
        system.send(
          id,
          AgentFrameKind.kFrameAgentAttach,
          encodeJson({ connId: 1, instanceId: 'i-sys', traceId: null, peer: 'p', connectedAtMs: Date.now() }),
        );
        system.send(
          id,
          AgentFrameKind.kFrameAgentIn,
          v1.AgentMessage.encode({ registration: { agentId: 'agent-sys', instanceId: 'i-sys', hostname: 'h' } }).finish(),
        );
        system.send(id, AgentFrameKind.kFrameAgentIn, v1.AgentMessage.encode({ heartbeat: { status: v1.AgentStatus.READY } }).finish());
        const ready = (): boolean =>
          frames.some((f) => f.kind === AgentFrameKind.kFrameAgentSnapshot && decodeJson<AgentSnapshot>(f.payload).status === 'Ready');
        while (!ready()) await new Promise<void>((resolve) => (wake = resolve));
        const ack = frames.find((f) => f.kind === AgentFrameKind.kFrameSendToAgent)!;
        assert.equal(ack.key, 'agent-sys');
        const msg = v1.ManagementMessage.decode(decodeConnPrefixed(ack.payload)!.rest);
        assert.equal(msg.registrationAck?.heartbeatIntervalSeconds, 9);
        const stats = await system.call<{ status: string }>(id, 'stats');
        assert.equal(stats.status, 'Ready');
      } finally {
        await system.stop();
      }
    });
  });
}
