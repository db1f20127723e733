import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { int, parseArgs, UsageError, type FlagSpec } from '../../../src/cli/args.js';
import { findCommand } from '../../../src/cli/run.js';

const FLAGS: FlagSpec[] = [
  { name: 'file', short: 'f', type: 'string', value: 'FILE', description: '' },
  { name: 'wait', type: 'boolean', description: '' },
  { name: 'limit', type: 'number', description: '' },
];
const ARGS = [
  { name: 'ID', required: true, description: '' },
  { name: 'EXTRA', required: false, description: '' },
];

describe('parseArgs', () => {
  test('long, =, short and global flags anywhere; -- ends flags', () => {
    const p = parseArgs(['task-1', '--wait', '-f', 'm.yaml', '--limit=5', '--json', '--', '--not-a-flag'], FLAGS, ARGS);
    assert.deepEqual(p.args, ['task-1', '--not-a-flag']);
    assert.deepEqual(p.flags, { wait: true, file: 'm.yaml', limit: 5, json: true });
  });

  test("'-' is a value (stdin), also after a flag", () => {
    assert.deepEqual(parseArgs(['x', '-f', '-'], FLAGS, ARGS).flags, { file: '-' });
  });

  test('mistakes are UsageErrors naming the flag or argument', () => {
    const cases: [string[], RegExp][] = [
      [['x', '--nope'], /unknown flag --nope/],
      [['x', '-q'], /unknown flag -q/],
      [['x', '-file', 'a'], /long flags take two dashes/],
      [['x', '--file'], /--file needs a value \(FILE\)/],
      [['x', '--file', '--wait'], /--file needs a value/],
      [['x', '--limit', 'ten'], /--limit needs a number/],
      [['x', '--wait=yes'], /--wait takes no value/],
      [[], /missing ID/],
      [['a', 'b', 'c'], /unexpected argument "c"/],
    ];
    for (const [tokens, re] of cases)
      assert.throws(
        () => parseArgs(tokens, FLAGS, ARGS),
        (e: unknown) => e instanceof UsageError && re.test(e.message),
        tokens.join(' '),
      );
  });

  test('--help skips the argument checks', () => {
    assert.equal(parseArgs(['--help'], FLAGS, ARGS).flags['help'], true);
  });

  test('command flags shadow global flags of the same name (context set --server)', () => {
    const p = parseArgs(
      ['lab', '--server', 'http://x:1'],
      [{ name: 'server', type: 'string', description: 'the context server' }],
      [{ name: 'NAME', required: true, description: '' }],
    );
    assert.equal(p.flags['server'], 'http://x:1');
  });

  test('int() checks integer ranges', () => {
    assert.equal(int({ n: 3 }, 'n', 1, 5), 3);
    assert.equal(int({}, 'n', 1), undefined);
    assert.throws(() => int({ n: 2.5 }, 'n', 1), /--n must be an integer from 1/);
    assert.throws(() => int({ n: 0 }, 'n', 1, 10), /from 1 to 10/);
  });
});

describe('findCommand', () => {
  test('finds noun and verb, the bare health command, and help requests', () => {
    const vm = findCommand(['vm', 'create', 'agent-a']);
    assert.ok('command' in vm);
    assert.equal(vm.command.verb, 'create');
    assert.deepEqual(vm.rest, ['agent-a']);
    const health = findCommand(['health', '--json']);
    assert.ok('command' in health && health.command.noun === 'health');
    assert.ok('help' in findCommand([]));
    assert.ok('help' in findCommand(['vm']));
  });

  test('unknown nouns and verbs are usage errors with the choices', () => {
    assert.throws(
      () => findCommand(['vms']),
      (e: unknown) => e instanceof UsageError && /unknown command "vms"/.test(e.message) && /vm, agent/.test(e.hint ?? ''),
    );
    assert.throws(
      () => findCommand(['vm', 'boot']),
      (e: unknown) => e instanceof UsageError && /list\|get\|create/.test(e.hint ?? ''),
    );
  });
});
