/**
 * Every entry of sandboxd's command table answers `--help` (and `-h`) with exit 0 and its usage
 * text on stdout, run as the real binary (issue 15: `sandboxd host prepare --help` used to print
 * the usage and exit 2).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { SANDBOXD_COMMANDS } from '../../../src/bin/sandboxd-commands.js';
import { distRoot } from '../../support/paths.js';

const BIN = join(distRoot, 'src', 'bin', 'sandboxd.js');

function sandboxd(argv: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

void describe('sandboxd --help', () => {
  for (const c of SANDBOXD_COMMANDS) {
    for (const flag of ['--help', '-h']) {
      const argv = [...c.words, flag];
      void test(`sandboxd ${argv.join(' ')} exits 0 with usage text`, async () => {
        const r = await sandboxd(argv);
        assert.equal(r.code, 0, `exit ${String(r.code)}; stderr: ${r.stderr}`);
        assert.match(r.stdout, /^usage: sandboxd /);
        if (c.words[0] !== 'help') for (const w of c.words) assert.ok(r.stdout.includes(w), `the usage names ${w}`);
        assert.equal(r.stderr, '');
      });
    }
  }

  void test('the table lists every top-level command the usage names, and each subcommand under its command', async () => {
    const top = SANDBOXD_COMMANDS.filter((c) => c.words.length === 1).map((c) => c.words[0]);
    const usage = (await sandboxd(['--help'])).stdout;
    for (const w of top) assert.match(usage, new RegExp(`^  ${w ?? ''}\\b`, 'm'));
    for (const c of SANDBOXD_COMMANDS.filter((x) => x.words.length > 1)) assert.ok(top.includes(c.words[0]), c.words.join(' '));
  });

  void test('a usage mistake still exits 2', async () => {
    assert.equal((await sandboxd(['bogus'])).code, 2);
    assert.equal((await sandboxd(['host', 'prepare', '--bogus'])).code, 2);
    assert.equal((await sandboxd(['image', 'build', '--kind', 'ubuntu'])).code, 2);
    assert.equal((await sandboxd(['serve', 'extra'])).code, 2);
  });
});
