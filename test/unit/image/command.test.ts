import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import { IMAGE_USAGE, parseBuildArgs, runImageCommand } from '../../../src/image/command.js';

async function runCmd(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runImageCommand(argv, {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
  });
  return { code, out, err };
}

void describe('sandboxd image build arguments', () => {
  void test('minimal into ./images by default; --kind debian and --out in both spellings', () => {
    assert.deepEqual(parseBuildArgs([]), { kind: 'minimal', out: resolve('images') });
    assert.deepEqual(parseBuildArgs(['--kind', 'debian']), { kind: 'debian', out: resolve('images') });
    assert.deepEqual(parseBuildArgs(['--kind=debian', '--out=/tmp/img']), { kind: 'debian', out: '/tmp/img' });
    assert.deepEqual(parseBuildArgs(['--out', 'rel', '--kind', 'minimal']), { kind: 'minimal', out: resolve('rel') });
  });

  void test('unknown kinds, flags and missing values are usage errors', () => {
    assert.deepEqual(parseBuildArgs(['--kind', 'ubuntu']), { error: "--kind must be minimal or debian, not 'ubuntu'" });
    assert.deepEqual(parseBuildArgs(['--kind']), { error: "unexpected argument '--kind'" });
    assert.deepEqual(parseBuildArgs(['--size', '4G']), { error: "unexpected argument '--size'" });
  });

  void test('the command answers usage errors with exit 2 and the usage text, which documents both kinds', async () => {
    const r = await runCmd(['build', '--kind', 'ubuntu']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--kind must be minimal or debian/);
    assert.ok(r.err.includes(IMAGE_USAGE));
    assert.equal((await runCmd([])).code, 2);
    assert.equal((await runCmd(['--help'])).code, 0);
    assert.match(IMAGE_USAGE, /debian: Debian bookworm root/);
    assert.doesNotMatch(IMAGE_USAGE, /not available/);
  });
});
