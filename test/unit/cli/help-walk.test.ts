/**
 * Walks sbx's command table: every noun and every noun-verb answers `--help` and `-h` with exit 0
 * and its usage text on stdout.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { COMMANDS } from '../../../src/cli/run.js';
import { sbx } from './run-sbx.js';

void describe('sbx --help on every command', () => {
  for (const c of COMMANDS) {
    const words = c.verb === '' ? [c.noun] : [c.noun, c.verb];
    for (const flag of ['--help', '-h']) {
      void test(`sbx ${words.join(' ')} ${flag}`, async () => {
        const r = await sbx([...words, flag]);
        assert.equal(r.code, 0, r.stderr);
        assert.ok(r.stdout.startsWith(`usage: sbx ${words.join(' ')}`), r.stdout);
        assert.equal(r.stderr, '');
      });
    }
  }

  for (const noun of new Set(COMMANDS.filter((c) => c.verb !== '').map((c) => c.noun))) {
    void test(`sbx ${noun} --help lists its verbs`, async () => {
      const r = await sbx([noun, '--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^usage:\n/);
      for (const c of COMMANDS.filter((x) => x.noun === noun)) assert.ok(r.stdout.includes(`sbx ${noun} ${c.verb}`), c.verb);
    });
  }

  void test('sbx --help, sbx -h and sbx help exit 0', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const r = await sbx(argv);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /^sbx .*\n\nusage: sbx <noun> <verb>/);
    }
  });
});
