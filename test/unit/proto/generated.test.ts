/**
 * The committed generated code (proto/gen/) must be exactly what proto/generate.mjs makes from
 * proto/ today, and it must load as an ES module under Node, both as committed and as compiled.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PROTO_INCLUDE_DIR, v1 } from '../../../proto/index.js';

const run = promisify(execFile);
const repoRoot = dirname(PROTO_INCLUDE_DIR);
const genDir = join(PROTO_INCLUDE_DIR, 'gen');

void describe('proto/gen', () => {
  void test('is up to date with proto/ (regenerating gives the same bytes)', { timeout: 120_000 }, async () => {
    const out = await mkdtemp(join(tmpdir(), 'sandboxd-proto-gen-'));
    try {
      await run(process.execPath, [join(PROTO_INCLUDE_DIR, 'generate.mjs'), '--out', out], { cwd: repoRoot });
      const fresh = (await readdir(out)).sort();
      const committed = (await readdir(genDir)).sort();
      assert.deepEqual(committed, fresh, 'proto/gen holds other files than the generator writes');
      for (const name of fresh) {
        const [a, b] = await Promise.all([readFile(join(genDir, name)), readFile(join(out, name))]);
        assert.ok(a.equals(b), `generated code is stale: proto/gen/${name} differs; run \`npm run proto\` and commit it`);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  void test('the committed agent.js loads as an ES module under Node and encodes', async () => {
    const mod = (await import(pathToFileURL(join(genDir, 'agent.js')).href)) as { svc: { sandbox: { v1: typeof v1 } } };
    const bytes = mod.svc.sandbox.v1.Ping.encode({ timestampMs: 1_700_000_000_000 }).finish();
    assert.equal(v1.Ping.decode(bytes).timestampMs, 1_700_000_000_000);
  });

  void test('generated code carries no machine-specific paths or timestamps', async () => {
    for (const name of await readdir(genDir)) {
      const text = await readFile(join(genDir, name), 'utf8');
      assert.ok(!text.includes(repoRoot), `proto/gen/${name} embeds the checkout path`);
      assert.ok(!text.includes(tmpdir()), `proto/gen/${name} embeds a temp path`);
      assert.ok(!/\b20\d\d-\d\d-\d\dT\d\d:/.test(text), `proto/gen/${name} embeds a timestamp`);
    }
  });
});
