/**
 * The sandbox-agent as guest images ship it: one JavaScript bundle (esbuild) instead of the
 * compiled tree and its node_modules, made by `npm run build` into <build>/agent/:
 *
 *   package.json                          name and version (the agent reports the version)
 *   src/bin/sandbox-agent.js              the loader (agent-loader.ts): the path images run
 *   src/bin/sandbox-agent.bundle.js       the agent and its pure-JS packages, one CommonJS file
 *   node_modules/node-pty/                the native PTY addon (lib/*.js, build/Release/pty.node),
 *                                         loaded at the first PTY command, never at start
 *   node_modules/pino-pretty/index.js     pino-pretty bundled on its own, loaded only for
 *                                         --log-format pretty
 *   bundle.json                           what it was built from (sha256 of every input)
 *
 * The image builder adds the V8 code cache (src/bin/sandbox-agent.bundle.cache) with the node
 * binary of the image (agent-loader.ts `makeCodeCache`), so a guest compiles almost nothing.
 *
 * esbuild is a devDependency: `npm run build` runs it once, and a machine without dev packages
 * uses that build. `ensureAgentBundle` rebuilds only when an input changed since (a checkout after
 * `tsc -b` alone) and esbuild is there; otherwise it says to run `npm run build`.
 *
 * Run: `node dist/src/image/agent-bundle.js` (part of `npm run build`).
 */
import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Esbuild from 'esbuild';
import { errorMessage } from '../util/error-message.js';
import { BUNDLE_FILE } from './agent-loader.js';

/** Bumped when the bundle's layout or settings change (part of bundle.json's key). */
export const AGENT_BUNDLE_RECIPE = 'agent-bundle-1';

/** The loader's entry has no file (esbuild stdin); this is its name in the metafile. */
const LOADER_STDIN = 'sandbox-agent-loader.js';

/** The bundle folder next to a compiled tree (dist/agent for dist/). */
export function defaultBundleDir(agentTree: string): string {
  return join(agentTree, 'agent');
}

export interface AgentBundleOptions {
  /** Compiled tree holding src/bin/sandbox-agent-main.js and src/image/agent-loader.js (dist/). */
  agentTree: string;
  /** Folder with package.json and node_modules. */
  packageRoot: string;
  /** Default defaultBundleDir(agentTree). */
  outDir?: string;
}

export interface AgentBundleManifest {
  recipe: string;
  /** sha256 over the recipe and every input's path and digest: the bundle's identity. */
  key: string;
  version: string;
  /** Input path (relative to the package root) → sha256. */
  inputs: Record<string, string>;
  /** Output path (relative to the bundle folder) → bytes. */
  files: Record<string, number>;
}

/** Files of node-pty the agent needs at run time (no tests, maps, sources or build leftovers). */
function nodePtyFile(rel: string): boolean {
  if (rel === 'package.json' || rel === 'build/Release/pty.node') return true;
  return rel.startsWith('lib/') && rel.endsWith('.js') && !rel.endsWith('.test.js');
}

async function sha256(p: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(p))
    .digest('hex');
}

function keyOf(inputs: Record<string, string>): string {
  const h = createHash('sha256').update(`${AGENT_BUNDLE_RECIPE}\n`);
  for (const k of Object.keys(inputs).sort()) h.update(`${k} ${inputs[k]}\n`);
  return h.digest('hex');
}

async function readBundleManifest(dir: string): Promise<AgentBundleManifest | null> {
  try {
    const m = JSON.parse(await readFile(join(dir, 'bundle.json'), 'utf8')) as AgentBundleManifest;
    return m.recipe === AGENT_BUNDLE_RECIPE ? m : null;
  } catch {
    return null;
  }
}

/** Whether every input of the bundle in `dir` is unchanged (the bundle is current). */
async function isCurrent(dir: string, packageRoot: string): Promise<AgentBundleManifest | null> {
  const m = await readBundleManifest(dir);
  if (m === null) return null;
  const now: Record<string, string> = {};
  for (const rel of Object.keys(m.inputs)) {
    try {
      now[rel] = await sha256(join(packageRoot, rel));
    } catch {
      return null;
    }
  }
  if (keyOf(now) !== m.key) return null;
  // An input that is new since (a module the agent imports now) changes the compiled entry's
  // digest, so the key above already covers it.
  return m;
}

async function loadEsbuild(): Promise<typeof Esbuild | null> {
  try {
    return await import('esbuild');
  } catch {
    return null;
  }
}

/** Builds the bundle into `outDir` (written beside it, then renamed in one step). */
export async function buildAgentBundle(o: AgentBundleOptions): Promise<{ dir: string; manifest: AgentBundleManifest }> {
  const esbuild = await loadEsbuild();
  if (esbuild === null)
    throw new Error(
      'the agent bundle needs esbuild (a devDependency) to be built: run `npm run build` where dev dependencies are installed',
    );
  const root = resolve(o.packageRoot);
  const out = resolve(o.outDir ?? defaultBundleDir(o.agentTree));
  const tmp = `${out}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  const inputs: Record<string, string> = {};
  const addInputs = async (meta: { inputs: Record<string, unknown> }): Promise<void> => {
    for (const rel of Object.keys(meta.inputs)) if (rel !== LOADER_STDIN) inputs[rel] = await sha256(join(root, rel));
  };
  try {
    const binDir = join(tmp, 'src', 'bin');
    await mkdir(binDir, { recursive: true });
    const common = {
      absWorkingDir: root,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      minify: true,
      // Error and class names stay what the code and its logs say.
      keepNames: true,
      legalComments: 'none',
      metafile: true,
      logLevel: 'silent',
    } as const;
    // ES modules read import.meta.url (package.json for the version, createRequire for the lazy
    // natives): in the CommonJS bundle it is the bundle file's own URL.
    const agent = await esbuild.build({
      ...common,
      entryPoints: [join(resolve(o.agentTree), 'src', 'bin', 'sandbox-agent-main.js')],
      outfile: join(binDir, BUNDLE_FILE),
      define: { 'import.meta.url': '__sbxImportMetaUrl' },
      banner: { js: 'var __sbxImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
    });
    await addInputs(agent.metafile);
    const loader = await esbuild.build({
      ...common,
      stdin: {
        contents: [
          `const loader = require(${JSON.stringify(join(resolve(o.agentTree), 'src', 'image', 'agent-loader.js'))});`,
          'if (require.main === module) loader.startBundledAgent(__dirname);',
          'else module.exports = { makeCodeCache: () => loader.makeCodeCache(__dirname) };',
        ].join('\n'),
        resolveDir: root,
        sourcefile: LOADER_STDIN,
        loader: 'js',
      },
      outfile: join(binDir, 'sandbox-agent.js'),
    });
    await addInputs(loader.metafile);
    const pretty = await esbuild.build({
      ...common,
      entryPoints: [join(root, 'node_modules', 'pino-pretty', 'index.js')],
      outfile: join(tmp, 'node_modules', 'pino-pretty', 'index.js'),
    });
    await addInputs(pretty.metafile);
    const prettyPkg = JSON.parse(await readFile(join(root, 'node_modules', 'pino-pretty', 'package.json'), 'utf8')) as {
      version: string;
    };
    await writeFile(
      join(tmp, 'node_modules', 'pino-pretty', 'package.json'),
      `${JSON.stringify({ name: 'pino-pretty', version: prettyPkg.version, main: 'index.js', note: 'bundled by sandboxd' })}\n`,
    );
    const ptySrc = join(root, 'node_modules', 'node-pty');
    for (const e of await readdir(ptySrc, { recursive: true, withFileTypes: true })) {
      if (!e.isFile()) continue;
      const rel = relative(ptySrc, join(e.parentPath, e.name));
      if (!nodePtyFile(rel)) continue;
      await mkdir(dirname(join(tmp, 'node_modules', 'node-pty', rel)), { recursive: true });
      await cp(join(ptySrc, rel), join(tmp, 'node_modules', 'node-pty', rel));
      inputs[relative(root, join(ptySrc, rel))] = await sha256(join(ptySrc, rel));
    }
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { name: string; version: string };
    inputs['package.json'] = await sha256(join(root, 'package.json'));
    await writeFile(
      join(tmp, 'package.json'),
      `${JSON.stringify({ name: pkg.name, version: pkg.version, private: true, type: 'commonjs' }, null, 2)}\n`,
    );
    const files: Record<string, number> = {};
    for (const e of await readdir(tmp, { recursive: true, withFileTypes: true }))
      if (e.isFile()) files[relative(tmp, join(e.parentPath, e.name))] = (await readFile(join(e.parentPath, e.name))).length;
    const manifest: AgentBundleManifest = { recipe: AGENT_BUNDLE_RECIPE, key: keyOf(inputs), version: pkg.version, inputs, files };
    await writeFile(join(tmp, 'bundle.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    await rm(out, { recursive: true, force: true });
    await rename(tmp, out);
    return { dir: out, manifest };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The folder of a current agent bundle for `agentTree`: the one `npm run build` made when none of
 * its inputs changed since, else a fresh build (needs esbuild; without it, says to run
 * `npm run build`).
 */
export async function ensureAgentBundle(o: AgentBundleOptions): Promise<{ dir: string; manifest: AgentBundleManifest; rebuilt: boolean }> {
  const dir = resolve(o.outDir ?? defaultBundleDir(o.agentTree));
  const current = await isCurrent(dir, o.packageRoot);
  if (current !== null) return { dir, manifest: current, rebuilt: false };
  if ((await loadEsbuild()) === null) {
    const why =
      (await readBundleManifest(dir)) === null ? `there is no agent bundle in ${dir}` : `the agent bundle in ${dir} is out of date`;
    throw new Error(`${why} and esbuild (a devDependency) is not installed: run \`npm run build\` where it is`);
  }
  return { ...(await buildAgentBundle({ ...o, outDir: dir })), rebuilt: true };
}

async function main(): Promise<void> {
  const agentTree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const started = Date.now();
  const { dir, manifest } = await buildAgentBundle({ agentTree, packageRoot: resolve(agentTree, '..') });
  const kib = (n: number): string => `${(n / 1024).toFixed(0)} KiB`;
  process.stdout.write(
    `agent bundle: ${relative(process.cwd(), dir) || '.'} (${BUNDLE_FILE} ${kib(manifest.files[join('src', 'bin', BUNDLE_FILE)] ?? 0)}, ${Object.keys(manifest.inputs).length} inputs) in ${Date.now() - started} ms\n`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`agent bundle failed: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  });
}
