/**
 * Wire compatibility between the generated static code and a peer that only has proto/: the
 * .proto loaded at run time (protobufjs reflection, and @grpc/proto-loader as a grpc-js client
 * written from proto/ alone would use it). Bytes from either side must decode on the other.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import fc from 'fast-check';
import type protobuf from 'protobufjs';
import { AGENT_PROTO_PATH, AGENT_SERVICE_NAME, AgentServiceMethods, PROTO_INCLUDE_DIR, v1 } from '../../../proto/index.js';
import { COMPARE, loadContract, messageArbitrary } from './contract-arbitraries.js';

interface StaticCodec {
  encode(message: object): { finish(): Uint8Array };
  decode(bytes: Uint8Array): object;
  toObject(message: object, options?: protobuf.IConversionOptions): Record<string, unknown>;
}

const contract = loadContract();
const codecs = v1 as unknown as Record<string, StaticCodec>;

void describe('static code ⇄ run-time reflection of agent.proto', () => {
  for (const name of ['AgentMessage', 'ManagementMessage', 'ExecRequest', 'ExecOutput']) {
    void test(`${name}: bytes from either side decode identically on the other`, () => {
      const reflected = contract.lookupType(`svc.sandbox.v1.${name}`);
      const stat = codecs[name]!;
      fc.assert(
        fc.property(messageArbitrary(reflected), (value) => {
          const fromStatic = stat.encode(value).finish();
          const fromReflection = reflected.encode(reflected.fromObject(value)).finish();
          const expected = reflected.toObject(reflected.decode(fromReflection), COMPARE);
          assert.deepStrictEqual(reflected.toObject(reflected.decode(fromStatic), COMPARE), expected);
          assert.deepStrictEqual(stat.toObject(stat.decode(fromReflection), COMPARE), expected);
        }),
        { numRuns: 200 },
      );
    });
  }
});

void describe('a grpc-js client built from proto/ alone (@grpc/proto-loader)', () => {
  // What an independent client would typically pass: snake_case names, strings for longs.
  const pkg = loadSync(AGENT_PROTO_PATH, {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [PROTO_INCLUDE_DIR],
  });
  const service = pkg[AGENT_SERVICE_NAME] as Record<string, MethodDefinition<unknown, unknown>>;

  void test('AgentServiceMethods matches every RPC of the .proto', () => {
    assert.deepEqual(Object.keys(service).sort(), Object.keys(AgentServiceMethods).sort());
    for (const [name, m] of Object.entries(AgentServiceMethods)) {
      const def = service[name]!;
      assert.equal(def.path, m.path);
      assert.equal(def.requestStream, m.requestStream);
      assert.equal(def.responseStream, m.responseStream);
      // proto-loader types the descriptor loosely; it is a DescriptorProto with a name.
      assert.equal(`svc.sandbox.v1.${(def.requestType.type as { name: string }).name}`, m.requestType);
      assert.equal(`svc.sandbox.v1.${(def.responseType.type as { name: string }).name}`, m.responseType);
    }
  });

  void test('it reads an AgentRegistration encoded by the static code (the server-side decoder)', () => {
    const bytes = v1.AgentMessage.encode({
      registration: {
        agentId: 'agent-01',
        instanceId: 'i-0001',
        hostname: 'vm-1',
        labels: { team: 'core' },
        system: { os: 'linux', kernel: '6.1.0', cpuCores: 2, memoryBytes: 8 * 2 ** 30, diskBytes: 2 ** 40 },
        cursors: [{ commandId: 'c-1', lastSeq: 17 }],
      },
    }).finish();
    const msg = service.Connect!.requestDeserialize(Buffer.from(bytes)) as {
      payload: string;
      registration: {
        agent_id: string;
        instance_id: string;
        labels: Record<string, string>;
        system: { memory_bytes: string; disk_bytes: string };
        cursors: { command_id: string; last_seq: string }[];
      };
    };
    assert.equal(msg.payload, 'registration');
    assert.equal(msg.registration.agent_id, 'agent-01');
    assert.equal(msg.registration.instance_id, 'i-0001');
    assert.deepEqual(msg.registration.labels, { team: 'core' });
    assert.equal(msg.registration.system.memory_bytes, String(8 * 2 ** 30));
    assert.equal(msg.registration.system.disk_bytes, String(2 ** 40));
    assert.deepEqual(msg.registration.cursors, [{ command_id: 'c-1', last_seq: '17' }]);
  });

  void test('the static code reads what it sends: RegistrationAck, CommandRequest, PtyControl', () => {
    const ack = service.Connect!.responseSerialize({
      registration_ack: {
        accepted: true,
        heartbeat_interval_seconds: 30,
        server_time_ms: '1700000000000',
        cursors: [{ command_id: 'c-1', last_seq: '9' }],
      },
    });
    const decodedAck = v1.ManagementMessage.decode(ack);
    assert.equal(decodedAck.payload, 'registrationAck');
    assert.equal(decodedAck.registrationAck?.heartbeatIntervalSeconds, 30);
    assert.equal(decodedAck.registrationAck?.serverTimeMs, 1_700_000_000_000);
    assert.equal(decodedAck.registrationAck?.cursors?.[0]?.lastSeq, 9);

    const cmd = v1.ManagementMessage.decode(
      service.Connect!.responseSerialize({
        command: { command_id: 'c-2', command: 'bash', args: ['-c', 'echo hi'], allocate_pty: true, pty_cols: 120, env: { A: '1' } },
      }),
    );
    assert.equal(cmd.command?.commandId, 'c-2');
    assert.deepEqual(cmd.command?.args, ['-c', 'echo hi']);
    assert.equal(cmd.command?.ptyCols, 120);
    assert.deepEqual({ ...cmd.command?.env }, { A: '1' });

    const sig = v1.ManagementMessage.decode(
      service.Connect!.responseSerialize({ pty_control: { command_id: 'c-2', signal: { signal_number: 15 } } }),
    );
    assert.ok(sig.ptyControl instanceof v1.PtyControl);
    assert.equal(sig.ptyControl.action, 'signal');
    assert.equal(sig.ptyControl?.signal?.signalNumber, 15);
  });

  void test('Exec: request from the foreign client, output from the static code', () => {
    const req = v1.ExecRequest.decode(
      service.Exec!.requestSerialize({ agent_id: 'agent-01', command: 'uname', args: ['-a'], timeout_seconds: 5 }),
    );
    assert.equal(req.agentId, 'agent-01');
    assert.deepEqual(req.args, ['-a']);
    assert.equal(req.timeoutSeconds, 5);

    const out = service.Exec!.responseDeserialize(
      Buffer.from(
        v1.ExecOutput.encode({
          stream: v1.ExecOutput.Stream.STREAM_STDERR,
          data: Buffer.from('oops'),
          exitCode: 2,
          complete: true,
        }).finish(),
      ),
    ) as { stream: string; data: Buffer; exit_code: number; complete: boolean };
    assert.equal(out.stream, 'STREAM_STDERR');
    assert.equal(out.data.toString(), 'oops');
    assert.equal(out.exit_code, 2);
    assert.equal(out.complete, true);
  });
});
