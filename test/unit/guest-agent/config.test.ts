import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AGENT_USAGE,
  AgentConfigError,
  AgentHelpRequested,
  parseAgentConfig,
  withBootstrapIdentity,
} from '../../../src/guest-agent/config.js';

const REQUIRED = ['--server', '127.0.0.1:8120', '--certs', '/etc/agent', '--agent-id', 'agent-01', '--instance-id', 'i-0001'];

function configError(argv: string[], env: Record<string, string> = {}): AgentConfigError {
  try {
    parseAgentConfig(argv, env, '/work');
  } catch (err) {
    if (err instanceof AgentConfigError) return err;
    throw err;
  }
  assert.fail('expected an AgentConfigError');
}

describe('agent config', () => {
  test('flags give a frozen config with defaults', () => {
    const cfg = parseAgentConfig(REQUIRED, {}, '/work');
    assert.deepEqual(cfg.server, { host: '127.0.0.1', port: 8120 });
    assert.equal(cfg.certsDir, '/etc/agent');
    assert.equal(cfg.profile, 'basic');
    assert.deepEqual(cfg.labels, {});
    assert.equal(cfg.workDir, '/work');
    assert.equal(cfg.tlsServerName, 'localhost', 'an IP server is dialed with the localhost name');
    assert.equal(cfg.logFormat, 'json');
    assert.equal(cfg.outputBufferBytes, 64 * 1024 * 1024);
    assert.ok(Object.isFrozen(cfg) && Object.isFrozen(cfg.labels) && Object.isFrozen(cfg.server));
  });

  test('environment variables fill in, flags win', () => {
    const cfg = parseAgentConfig(
      ['--profile=gpu', '--labels', 'zone=a,tier=2'],
      {
        SANDBOX_AGENT_SERVER: 'mgmt.internal:9000',
        SANDBOX_AGENT_CERTS: 'certs',
        SANDBOX_AGENT_ID: 'agent-02',
        SANDBOX_AGENT_INSTANCE_ID: 'i-2',
        SANDBOX_AGENT_PROFILE: 'ignored',
        SANDBOX_AGENT_OUTPUT_BUFFER: '1MiB',
        PATH: '/usr/bin',
      },
      '/home/a',
    );
    assert.equal(cfg.profile, 'gpu');
    assert.deepEqual(cfg.labels, { zone: 'a', tier: '2' });
    assert.equal(cfg.certsDir, '/home/a/certs');
    assert.equal(cfg.tlsServerName, 'mgmt.internal');
    assert.equal(cfg.outputBufferBytes, 1024 * 1024);
    assert.deepEqual(cfg.childEnv, { PATH: '/usr/bin' }, 'children do not inherit the agent settings');
  });

  test('--exit-with takes stdin only; without it the agent ignores its stdin', () => {
    assert.equal(parseAgentConfig(REQUIRED, {}, '/work').exitWith, null);
    assert.equal(parseAgentConfig([...REQUIRED, '--exit-with', 'stdin'], {}, '/work').exitWith, 'stdin');
    assert.equal(parseAgentConfig(REQUIRED, { SANDBOX_AGENT_EXIT_WITH: 'stdin' }, '/work').exitWith, 'stdin');
    const err = configError([...REQUIRED, '--exit-with', 'parent']);
    assert.equal(err.flag, '--exit-with');
    assert.match(err.message, /"parent" must be stdin/);
  });

  test('a missing required setting names the flag and its variable', () => {
    const err = configError(['--server', '127.0.0.1:1', '--certs', 'x', '--agent-id', 'a']);
    assert.equal(err.flag, '--instance-id');
    assert.match(err.message, /--instance-id \(or SANDBOX_AGENT_INSTANCE_ID\) is required/);
  });

  test('bad values name the flag or variable they came from', () => {
    assert.equal(configError([...REQUIRED.slice(2), '--server', 'nohost']).flag, '--server');
    assert.match(configError(REQUIRED, { SANDBOX_AGENT_LOG_LEVEL: 'loud' }).message, /^SANDBOX_AGENT_LOG_LEVEL: "loud" is not one of/);
    assert.match(configError([...REQUIRED, '--labels', 'novalue']).message, /^--labels: "novalue" is not key=value/);
    assert.match(configError([...REQUIRED, '--output-buffer', 'lots']).message, /^--output-buffer:/);
    assert.match(configError([...REQUIRED.slice(0, 6), '--instance-id', 'bad id']).message, /^--instance-id:/);
  });

  test('unknown, valueless and repeated flags are errors', () => {
    assert.match(configError([...REQUIRED, '--verbose']).message, /unknown argument "--verbose"/);
    assert.match(configError([...REQUIRED, '--profile']).message, /--profile needs a value/);
    assert.match(configError([...REQUIRED, '--server', '127.0.0.1:1']).message, /--server given twice/);
  });

  test('--help is reported, and the usage lists every flag', () => {
    assert.throws(() => parseAgentConfig(['--help'], {}, '/'), AgentHelpRequested);
    for (const flag of [
      '--server',
      '--certs',
      '--agent-id',
      '--instance-id',
      '--profile',
      '--labels',
      '--work-dir',
      '--log-format',
      '--log-level',
    ]) {
      assert.ok(AGENT_USAGE.includes(flag), flag);
    }
  });

  test('--bootstrap-token-file: the agent and instance ids may come from the material, and must match it when given', () => {
    const cfg = parseAgentConfig(['--server', '127.0.0.1:8120', '--certs', 'certs', '--bootstrap-token-file', 'boot/m.json'], {}, '/work');
    assert.equal(cfg.bootstrapTokenFile, '/work/boot/m.json');
    assert.equal(cfg.agentId, '');
    const filled = withBootstrapIdentity(cfg, { agent_id: 'agent-7', instance_id: 'i-7' });
    assert.equal(filled.agentId, 'agent-7');
    assert.equal(filled.instanceId, 'i-7');
    assert.ok(Object.isFrozen(filled));
    const given = parseAgentConfig([...REQUIRED, '--bootstrap-token-file', '/m.json'], {}, '/work');
    assert.equal(withBootstrapIdentity(given, { agent_id: 'agent-01', instance_id: 'i-0001' }).instanceId, 'i-0001');
    assert.throws(() => withBootstrapIdentity(given, { agent_id: 'agent-01', instance_id: 'other' }), AgentConfigError);
    assert.equal(parseAgentConfig(REQUIRED, {}, '/work').bootstrapTokenFile, null);
    assert.equal(
      configError(['--server', '127.0.0.1:8120', '--certs', 'c']).flag,
      '--agent-id',
      'without a token file the ids stay required',
    );
    assert.match(AGENT_USAGE, /--bootstrap-token-file FILE/);
  });
});
