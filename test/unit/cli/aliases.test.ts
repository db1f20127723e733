/**
 * kubectl-habit aliases: `ls` for list and `rm` for delete on every noun that has the verb, and
 * `-f` for `--follow` on `task logs`.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseArgs, UsageError } from '../../../src/cli/args.js';
import type { CliEnv } from '../../../src/cli/config.js';
import { VERB_ALIASES } from '../../../src/cli/commands/command.js';
import { COMMANDS, findCommand } from '../../../src/cli/run.js';
import { sbx } from './run-sbx.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

function resolved(argv: string[]): { noun: string; verb: string; rest: string[] } {
  const found = findCommand(argv);
  assert.ok(!('help' in found), `${argv.join(' ')} finds a command`);
  return { noun: found.command.noun, verb: found.command.verb, rest: found.rest };
}

void describe('sbx aliases', () => {
  void test('ls and rm stand for list and delete on every noun that has them, and nowhere else', () => {
    assert.deepEqual(VERB_ALIASES, { ls: 'list', rm: 'delete' });
    const nouns = new Set(COMMANDS.map((c) => c.noun));
    let checked = 0;
    for (const noun of nouns) {
      for (const [alias, verb] of Object.entries(VERB_ALIASES)) {
        if (COMMANDS.some((c) => c.noun === noun && c.verb === verb)) {
          assert.deepEqual(resolved([noun, alias, 'X']), { noun, verb, rest: ['X'] }, `sbx ${noun} ${alias}`);
          checked++;
        } else if (COMMANDS.some((c) => c.noun === noun && c.verb !== '')) {
          assert.throws(() => findCommand([noun, alias]), UsageError, `sbx ${noun} ${alias} is unknown`);
        }
      }
    }
    // list: vm, agent, session, task, events, context, cred, checkpoint, pool, profile, loadout, storage; delete: vm, context, profile, storage.
    // Missions: list: executor, mission; delete: executor.
    assert.equal(checked, 16 + 3);
    assert.deepEqual(resolved(['vm', 'rm', 'agent-x', '--force']), { noun: 'vm', verb: 'delete', rest: ['agent-x', '--force'] });
  });

  void test('help names the aliases', async () => {
    const main = await sbx(['--help'], {});
    assert.match(main.stdout, /^ {2}vm list \(ls\) /m);
    assert.match(main.stdout, /^ {2}context delete \(rm\) /m);
    assert.match(main.stdout, /ls = list, rm = delete/);
    assert.match((await sbx(['vm', '--help'], {})).stdout, /sbx vm ls = sbx vm list, sbx vm rm = sbx vm delete/);
    const one = await sbx(['vm', 'rm', '--help'], {});
    assert.equal(one.code, 0);
    assert.match(one.stdout, /^usage: sbx vm delete NAME \[flags\]\nalias: sbx vm rm\n/);
    assert.match((await sbx(['task', 'logs', '--help'], {})).stdout, /-f, --follow/);
  });

  void test('an alias runs the command: context rm deletes, vm ls reaches the server', async () => {
    const d = await mkdtemp(join(tmpdir(), 'sbx-alias-'));
    dirs.push(d);
    const env: CliEnv = { XDG_CONFIG_HOME: d, HOME: d };
    assert.equal((await sbx(['context', 'set', 'lab', '--server', 'http://10.1.1.1:8122'], env)).code, 0);
    assert.equal((await sbx(['context', 'set', 'prod', '--server', 'http://10.1.1.2:8122'], env)).code, 0);
    assert.equal((await sbx(['context', 'rm', 'prod'], env)).code, 0);
    const ls = await sbx(['context', 'ls', '--json'], env);
    assert.equal(ls.code, 0, ls.stderr);
    assert.ok(ls.stdout.includes('lab') && !ls.stdout.includes('prod'), ls.stdout);
    // Not a usage error (2): vm ls was dispatched and failed only on the unreachable server (5).
    const vm = await sbx(['vm', 'ls'], { ...env, SBX_SERVER: 'http://127.0.0.1:9' });
    assert.equal(vm.code, 5, vm.stderr);
  });

  void test('task logs -f is task logs --follow', () => {
    const logs = COMMANDS.find((c) => c.noun === 'task' && c.verb === 'logs');
    assert.ok(logs !== undefined);
    const { rest } = resolved(['task', 'logs', 'task-1', '-f']);
    const parsed = parseArgs(rest, logs.flags, logs.args);
    assert.deepEqual(parsed.args, ['task-1']);
    assert.equal(parsed.flags['follow'], true);
    assert.equal(parseArgs(['task-1'], logs.flags, logs.args).flags['follow'], undefined);
  });
});
