/**
 * `npm run docs`: rewrites the generated tables of README.md (configuration, errors) from the
 * code. The unit tests fail when README and code disagree; this is how to fix them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { readmeTables } from './readme-tables.js';
import { repoRoot } from './paths.js';

const tables = readmeTables();
const file = `${repoRoot}/README.md`;
let readme = readFileSync(file, 'utf8');
for (const [name, table] of Object.entries(tables)) {
  const re = new RegExp(`<!-- ${name}:begin -->[\\s\\S]*?<!-- ${name}:end -->`);
  if (!re.test(readme)) throw new Error(`README.md lacks the ${name} markers`);
  readme = readme.replace(re, `<!-- ${name}:begin -->\n${table}\n<!-- ${name}:end -->`);
}
writeFileSync(file, readme);
process.stdout.write('README.md tables updated\n');
