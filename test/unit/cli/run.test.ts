/**
 * runCli end to end with in-memory streams: help, usage errors, --json errors, and the local
 * context commands against a temporary XDG_CONFIG_HOME.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { CliEnv } from '../../../src/cli/config.js';
import { sbx } from './run-sbx.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function configHome(): Promise<CliEnv> {
  const d = await mkdtemp(join(tmpdir(), 'sbx-run-'));
  dirs.push(d);
  return { XDG_CONFIG_HOME: d, HOME: d };
}

describe('sbx', () => {
  test('--help lists every noun, the exit codes and the detach key', async () => {
    const r = await sbx(['--help']);
    assert.equal(r.code, 0);
    for (const s of [
      'vm create',
      'agent list',
      'session attach',
      'task submit',
      'events tail',
      'ops wait',
      'health',
      'context use',
      'exit codes:',
      'Ctrl-]',
    ]) {
      assert.ok(r.stdout.includes(s), s);
    }
    const one = await sbx(['task', 'submit', '--help']);
    assert.equal(one.code, 0);
    assert.match(one.stdout, /-f, --file FILE/);
  });

  test('usage errors exit 2 with the reason and a hint on stderr', async () => {
    const r = await sbx(['vm', 'create']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^sbx: missing NAME\nusage: sbx vm create --help\n$/);
    assert.equal((await sbx(['vm', 'list', '--state', 'sleeping'])).code, 2);
  });

  test('with --json an error is also a JSON object on stdout', async () => {
    const r = await sbx(['vm', 'get', '--json']);
    assert.equal(r.code, 2);
    assert.deepEqual(JSON.parse(r.stdout), { error: { code: 'usage', message: 'missing NAME' }, exit_code: 2 });
  });

  test('an unreachable server exits 5 with the network code', async () => {
    const r = await sbx(['health'], { ...(await configHome()), SBX_SERVER: 'http://127.0.0.1:9' });
    assert.equal(r.code, 5);
    assert.match(r.stderr, /^sbx: network: cannot reach http:\/\/127\.0\.0\.1:9/);
  });

  test('context set/use/list/current/delete keep the file and resolve the server and actor', async () => {
    const env = await configHome();
    assert.match((await sbx(['context', 'list'], env)).stdout, /No contexts/);
    assert.equal((await sbx(['context', 'set', 'lab', '--server', 'http://10.1.1.1:8122', '--role', 'operator'], env)).code, 0);
    assert.equal((await sbx(['context', 'set', 'prod', '--server', 'https://p.example', '--actor', 'alice'], env)).code, 0);
    const path = join(env.XDG_CONFIG_HOME as string, 'sbx', 'config.json');
    assert.equal((await stat(path)).mode & 0o777, 0o600);

    // The first context became current.
    let cur = JSON.parse((await sbx(['context', 'current', '--json'], env)).stdout) as Record<string, unknown>;
    assert.deepEqual(
      [cur['name'], cur['server'], cur['actor'], cur['actor_source']],
      ['lab', 'http://10.1.1.1:8122', 'operator', 'context role'],
    );

    assert.equal((await sbx(['context', 'use', 'prod'], env)).code, 0);
    cur = JSON.parse((await sbx(['context', 'current', '--json', '--actor', 'bob'], env)).stdout) as Record<string, unknown>;
    assert.deepEqual([cur['name'], cur['ws'], cur['actor'], cur['actor_source']], ['prod', 'wss://p.example', 'bob', '--actor']);
    cur = JSON.parse(
      (await sbx(['context', 'current', '--json'], { ...env, SBX_CONTEXT: 'lab', SVC_GATEWAY_SSH_ACTOR: 'envy' })).stdout,
    ) as Record<string, unknown>;
    assert.deepEqual([cur['name'], cur['actor']], ['lab', 'envy']);

    const list = await sbx(['context', 'list'], env);
    assert.match(list.stdout, /^\*\s+prod\s+https:\/\/p\.example/m);

    assert.equal((await sbx(['context', 'use', 'nope'], env)).code, 3);
    const bad = await sbx(['vm', 'list', '--context', 'nope'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /no context named "nope" \(known: lab, prod\)/);

    assert.equal((await sbx(['context', 'delete', 'prod'], env)).code, 0);
    const after = JSON.parse((await sbx(['context', 'list', '--json'], env)).stdout) as {
      current: string | null;
      contexts: Record<string, unknown>;
    };
    assert.equal(after.current, null);
    assert.deepEqual(Object.keys(after.contexts), ['lab']);
  });

  test('context set refuses bad names and URLs with exit 2', async () => {
    const env = await configHome();
    assert.equal((await sbx(['context', 'set', 'bad name'], env)).code, 2);
    const r = await sbx(['context', 'set', 'x', '--server', 'localhost:8122'], env);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /must start with http:\/\/ or https:\/\//);
  });
});
