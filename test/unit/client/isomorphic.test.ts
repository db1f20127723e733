/**
 * The client must run in the dashboard's browser bundle as well as in Node: bundling it for the
 * browser platform must succeed without Node built-ins, and the bundle must not mention any. It
 * pulls in nothing but itself and the wire shapes it shares with the server (src/wire, a leaf).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { build } from 'esbuild';

// dist/test/unit/client/ (or a private build folder) → the repository's src/client/index.ts.
const ENTRY = fileURLToPath(new URL('../../../../src/client/index.ts', import.meta.url));

test('src/client bundles for the browser with no Node built-ins and no server code', async () => {
  const out = await build({
    entryPoints: [ENTRY],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'silent',
    metafile: true,
  });
  const inputs = Object.keys(out.metafile.inputs);
  assert.ok(inputs.length > 5, inputs.join(', '));
  const ours = (p: string): boolean => p.includes('src/client/') || p.includes('src/wire/');
  assert.ok(inputs.every(ours), `the client pulls in files outside src/client and src/wire: ${inputs.filter((p) => !ours(p)).join(', ')}`);
  const code = out.outputFiles[0]?.text ?? '';
  assert.doesNotMatch(code, /\bfrom ["']node:|require\(["']/);
});
