import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (tests run from dist/test/..., three levels below it). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The compiled tree (dist/). */
export const distRoot = join(repoRoot, 'dist');
