import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  ConfigFileError,
  configPath,
  DEFAULT_SERVER,
  emptyConfig,
  loadConfigFile,
  resolveActor,
  resolveSettings,
  saveConfigFile,
  type SbxConfigFile,
} from '../../../src/cli/config.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'sbx-config-'));
  dirs.push(d);
  return d;
}

const FILE: SbxConfigFile = {
  version: 1,
  current: 'lab',
  contexts: {
    lab: { server: 'http://10.0.0.5:8122/', role: 'operator' },
    prod: { server: 'https://sbx.example:8443', ws: 'wss://sbx.example:8443', actor: 'alice', role: 'admin' },
  },
};

describe('contexts file', () => {
  test('lives under XDG_CONFIG_HOME, else ~/.config', () => {
    assert.equal(configPath({ XDG_CONFIG_HOME: '/x/cfg', HOME: '/home/u' }), '/x/cfg/sbx/config.json');
    assert.equal(configPath({ HOME: '/home/u' }), '/home/u/.config/sbx/config.json');
    assert.equal(configPath({ XDG_CONFIG_HOME: '', HOME: '/home/u' }), '/home/u/.config/sbx/config.json');
  });

  test('a missing file is an empty configuration', async () => {
    assert.deepEqual(await loadConfigFile(join(await tempDir(), 'nope', 'config.json')), emptyConfig());
  });

  test('is written atomically with mode 0600 in a 0700 directory and reads back', async () => {
    const path = configPath({ XDG_CONFIG_HOME: await tempDir() });
    await saveConfigFile(path, FILE);
    await saveConfigFile(path, { ...FILE, current: 'prod' });
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.equal((await stat(join(path, '..'))).mode & 0o777, 0o700);
    assert.deepEqual(await readdir(join(path, '..')), ['config.json'], 'no temp files left behind');
    assert.equal((await loadConfigFile(path)).current, 'prod');
  });

  test('a broken file is a ConfigFileError naming the path and the problem', async () => {
    const d = await tempDir();
    const path = join(d, 'sbx', 'config.json');
    await mkdir(join(d, 'sbx'));
    await writeFile(path, '{"version": 1, "contexts": {"a": {"server": 5}}}');
    await assert.rejects(
      loadConfigFile(path),
      (e: unknown) => e instanceof ConfigFileError && e.message.includes(path) && /contexts\.a\.server/.test(e.message),
    );
    await writeFile(path, '{not json');
    await assert.rejects(loadConfigFile(path), /not valid JSON/);
    assert.match(await readFile(path, 'utf8'), /not json/, 'a broken file is never overwritten by reading it');
  });
});

describe('resolveSettings', () => {
  const os = (): string => 'osuser';

  test('server: --server, then SBX_SERVER, then the context, then the default', () => {
    assert.equal(resolveSettings({ server: 'http://a:1' }, { SBX_SERVER: 'http://b:2' }, FILE, os).server, 'http://a:1');
    assert.equal(resolveSettings({}, { SBX_SERVER: 'http://b:2' }, FILE, os).serverSource, 'SBX_SERVER');
    const fromCtx = resolveSettings({}, {}, FILE, os);
    assert.equal(fromCtx.server, 'http://10.0.0.5:8122');
    assert.equal(fromCtx.ws, 'ws://10.0.0.5:8122');
    const none = resolveSettings({}, {}, emptyConfig(), os);
    assert.deepEqual([none.server, none.contextName, none.contextSaved, none.serverSource], [DEFAULT_SERVER, 'default', false, 'default']);
  });

  test('context: --context, then SBX_CONTEXT, then current; an unknown one names the known ones', () => {
    assert.equal(resolveSettings({ context: 'prod' }, { SBX_CONTEXT: 'lab' }, FILE, os).contextName, 'prod');
    const prod = resolveSettings({}, { SBX_CONTEXT: 'prod' }, FILE, os);
    assert.equal(prod.ws, 'wss://sbx.example:8443');
    assert.throws(
      () => resolveSettings({ context: 'staging' }, {}, FILE, os),
      (e: unknown) => e instanceof ConfigFileError && /known: lab, prod/.test(e.message),
    );
    assert.throws(() => resolveSettings({ server: 'ftp://x' }, {}, FILE, os), /must start with http:\/\/ or https:\/\//);
  });

  test('actor order: --actor, SVC_GATEWAY_SSH_ACTOR, context actor, context role, OS user', () => {
    const ctx = { server: DEFAULT_SERVER, actor: 'ctx-actor', role: 'ctx-role' };
    assert.deepEqual(resolveActor({ actor: 'flag' }, { SVC_GATEWAY_SSH_ACTOR: 'env' }, ctx, os), { actor: 'flag', source: '--actor' });
    assert.deepEqual(resolveActor({}, { SVC_GATEWAY_SSH_ACTOR: 'env' }, ctx, os), { actor: 'env', source: 'SVC_GATEWAY_SSH_ACTOR' });
    assert.deepEqual(resolveActor({}, {}, ctx, os), { actor: 'ctx-actor', source: 'context actor' });
    assert.deepEqual(resolveActor({}, {}, { server: DEFAULT_SERVER, role: 'ctx-role' }, os), { actor: 'ctx-role', source: 'context role' });
    assert.deepEqual(resolveActor({}, { SVC_GATEWAY_SSH_ACTOR: '' }, undefined, os), { actor: 'osuser', source: 'OS user' });
    // Through resolveSettings: the lab context has a role only.
    assert.equal(resolveSettings({}, {}, FILE, os).actor, 'operator');
  });
});
