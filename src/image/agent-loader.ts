/**
 * The loader of the bundled sandbox-agent (what guest images run as src/bin/sandbox-agent.js):
 * compiles the one-file bundle with the V8 code cache made when the image was built, then calls
 * the bundle's `main`.
 *
 * Why: inside a TCG guest every byte of JavaScript Node parses and compiles at start costs tens of
 * times what it costs on the host. The bundle (agent-bundle.ts) removes the module resolution and
 * the 180 file reads of the compiled tree; the code cache removes most of the compiling. The cache
 * is made by the image's own node binary (`makeCodeCache`, run by the image builder), after the
 * bundle's top-level code ran, so it holds the bytecode of every function that ran. V8 checks it
 * against the source, its version and its flags; a cache it rejects only costs the time it saves
 * (the loader says so on stderr and runs without it).
 *
 * A V8 startup snapshot (`node --build-snapshot`) would be faster still, but Node 20 cannot
 * snapshot the agent: http2 and tls (grpc-js loads both at the top level) abort the snapshot
 * builder (native handles and external references it cannot serialize).
 *
 * Node built-ins only: this module is bundled into the loader file (CommonJS) and runs in guests.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';

/** File names inside the bundle's src/bin/ (next to the loader). */
export const BUNDLE_FILE = 'sandbox-agent.bundle.js';
export const CODE_CACHE_FILE = 'sandbox-agent.bundle.cache';

interface BundleExports {
  main(): void;
}

/** The CommonJS wrapper the bundle runs in (the same string when the cache is made and used). */
function wrap(source: string): string {
  return `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
}

function compile(binDir: string, cachedData: Buffer | undefined): { script: Script; exports: BundleExports } {
  const file = join(binDir, BUNDLE_FILE);
  const script = new Script(wrap(readFileSync(file, 'utf8')), { filename: file, ...(cachedData !== undefined ? { cachedData } : {}) });
  if (cachedData !== undefined && script.cachedDataRejected === true)
    process.stderr.write(`sandbox-agent: V8 rejected the code cache ${join(binDir, CODE_CACHE_FILE)}; starting without it\n`);
  const fn = script.runInThisContext() as (e: object, r: NodeJS.Require, m: { exports: object }, f: string, d: string) => void;
  const mod = { exports: {} };
  fn.call(mod.exports, mod.exports, createRequire(file), mod, file, dirname(file));
  return { script, exports: mod.exports as BundleExports };
}

/** Starts the agent from the bundle in `binDir`, with its code cache when there is one. */
export function startBundledAgent(binDir: string): void {
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(join(binDir, CODE_CACHE_FILE));
  } catch {
    cachedData = undefined;
  }
  compile(binDir, cachedData).exports.main();
}

/**
 * Writes the code cache of the bundle in `binDir` (run by the node binary the image ships):
 * compiles and runs the bundle's top level (which starts nothing), then serializes the bytecode
 * V8 holds for it. Returns the cache's size in bytes.
 */
export function makeCodeCache(binDir: string): number {
  const { script } = compile(binDir, undefined);
  const data = script.createCachedData();
  writeFileSync(join(binDir, CODE_CACHE_FILE), data);
  return data.length;
}
