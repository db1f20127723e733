/**
 * Runs the real .dependency-cruiser.cjs over a scratch tree (a temporary directory of one-line
 * modules, each importing one other) and answers the violations it names, as
 * `rule: from -> to`. The layering tests put one forbidden import per rule beside imports the
 * rules allow and expect exactly the forbidden ones back.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './paths.js';

const run = promisify(execFile);

/** One import of the scratch tree, as repository paths (`.ts`). */
export interface ScratchImport {
  readonly from: string;
  readonly to: string;
}

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** The sorted `rule: from -> to` lines depcruise reports for `imports` (folders cruised: `roots`). */
export async function scratchViolations(imports: readonly ScratchImport[], roots: readonly string[]): Promise<string[]> {
  const root = mkdtempSync(join(tmpdir(), 'layers-'));
  try {
    copyFileSync(join(repoRoot, '.dependency-cruiser.cjs'), join(root, '.dependency-cruiser.cjs'));
    writeFileSync(
      join(root, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', allowJs: true } }),
    );
    const write = (path: string, text: string): void => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    for (const { to } of imports) write(to, 'export {};\n');
    const bySource = new Map<string, string[]>();
    for (const { from, to } of imports) {
      const spec = posix.relative(posix.dirname(from), to).replace(/\.ts$/, '.js');
      bySource.set(from, [...(bySource.get(from) ?? []), `import '${spec.startsWith('.') ? spec : `./${spec}`}';\n`]);
    }
    for (const [from, lines] of bySource) write(from, lines.join(''));
    // depcruise exits non-zero when it finds violations; its JSON report is on stdout either way.
    const out = await run(
      join(repoRoot, 'node_modules', '.bin', 'depcruise'),
      ['--config', '.dependency-cruiser.cjs', '--output-type', 'json', ...roots],
      {
        cwd: root,
        maxBuffer: 1 << 26,
      },
    ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(out.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
    assert.equal(report.summary.totalCruised, new Set(imports.flatMap((p) => [p.from, p.to])).size, 'every scratch module was cruised');
    return report.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
